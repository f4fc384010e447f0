"""What the command line and the library both need around their inputs: loading a template for a request, a
request file, model output from a stream, text with its whitespace made visible, and the one-line error wrapper
every command runs under. Library modules import these from here, never from a command-line module."""

from __future__ import annotations

import argparse
import codecs
import json
import os
import re
import stat
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterator

from .escapes import escape_invisible, visible as _visible
from .errors import ChatTemplateExplorerError, RequestError, RequestFileError, os_error_text
from .jinja.template import ChatTemplate

if TYPE_CHECKING:
    from .chat.request import ChatRequest


def load_chat_template(spec: str, variant: str | None = None, request: "ChatRequest | None" = None) -> ChatTemplate:
    """The template at ``spec`` (a path or a Hub id, as :func:`core.sources.load_template` reads it). Without an
    explicit ``variant``, the variant llama.cpp would use for ``request`` (the ``tool_use`` template when the
    request has tools and the source has one). Raises :class:`~core.errors.TemplateLoadError` or
    :class:`~core.errors.TemplateSyntaxError` naming ``spec``."""
    from .sources import load_template

    loaded = load_template(spec, variant)
    if variant is None and request is not None:
        from .chat.prompt import choose_variant

        wanted = choose_variant(loaded.variants, request)
        if wanted != loaded.variant and wanted in loaded.variants:
            loaded = loaded.with_variant(wanted)
    return loaded.template()


#: the most bytes a file option or stdin may hold: a request, a cases file or a model's output is megabytes at most,
#: and a device or stream without end (``/dev/zero``, ``yes |``) must not be read until memory runs out
MAX_INPUT_BYTES = 64 * 1024 * 1024

_NOT_A_FILE = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISSOCK, "a socket"))


def check_input_file(path: str, kind: str, limit: int = MAX_INPUT_BYTES) -> None:
    """Raise :class:`~core.errors.RequestFileError` naming ``path`` (a ``kind`` such as ``"request file"``) when it
    is a folder, a device or a socket, or a regular file above ``limit`` bytes — before a byte is read. A named pipe
    passes (``--request <(…)``); a missing file is left to ``open``, whose error names it."""
    try:
        st = os.stat(path)
    except OSError:
        return
    what = next((name for test, name in _NOT_A_FILE if test(st.st_mode)), None)
    if what:
        raise RequestFileError(path, f"{what}, not a file", kind=kind)
    if stat.S_ISREG(st.st_mode) and st.st_size > limit:
        raise RequestFileError(path, f"{st.st_size:,} bytes, above the limit of {limit:,}", kind=kind)


def read_input_file(path: str, kind: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the file option ``path`` (a ``kind`` such as ``"request file"``), checked by
    :func:`check_input_file` and read to at most ``limit`` bytes: a named pipe passes the check, and one without end
    (``<(yes)``, ``/dev/stdin`` fed forever) raises :class:`~core.errors.RequestFileError` once past the limit.
    ``OSError`` is the caller's to name."""
    check_input_file(path, kind, limit)
    with open(path, "rb") as f:
        raw = f.read(limit + 1)
    if len(raw) > limit:
        raise RequestFileError(path, f"above the limit of {limit:,} bytes", kind=kind)
    return raw


def read_input_lines(path: str, kind: str, limit: int = MAX_INPUT_BYTES) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of every line of the file option ``path`` (a ``kind`` such as ``"cases file"``),
    checked by :func:`check_input_file`; the bytes read are counted over the whole file, so a named pipe of one
    endless line (``conform <(yes)``) raises :class:`~core.errors.RequestFileError` one byte past ``limit`` instead
    of being read until memory runs out. Text is UTF-8 with invalid bytes kept as surrogate escapes (the caller
    names the line); ``OSError`` is the caller's to name. Lines end at "\n", "\r\n" or a lone "\r" (the text mode's
    universal newlines), and a UTF-8 byte order mark at the start of the file is not text."""
    check_input_file(path, kind, limit)
    total = 0
    with open(path, "rb") as f:
        n = 0
        while True:
            raw = f.readline(limit - total + 1)
            if not raw:
                return
            total += len(raw)
            if total > limit:
                raise RequestFileError(path, f"above the limit of {limit:,} bytes", kind=kind)
            if n == 0 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            for line in raw.splitlines(keepends=True):   # bytes split at \n, \r\n and \r only
                n += 1
                yield n, line.decode("utf-8", "surrogateescape")


class JsonLineError(ValueError):
    """Line ``line`` of a JSON Lines file is not a JSON value: ``problem`` says why in a few words ("not UTF-8 text",
    "not valid JSON: Expecting value", "JSON nested too deeply"), ``msg`` is the JSON reader's own message (or
    ``problem``). The caller names the file in its own error."""

    def __init__(self, line: int, problem: str, msg: str | None = None):
        super().__init__(f"line {line}: {problem}")
        self.line, self.problem, self.msg = line, problem, msg or problem


def read_json_lines(path: str, kind: str, limit: int = MAX_INPUT_BYTES) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of every non-blank line of the JSON Lines file ``path``, read as
    :func:`read_input_lines` reads it (so bounded, a pipe included). Raises :class:`JsonLineError` for a line that is
    not UTF-8 text, not JSON, or JSON nested too deeply; ``OSError`` is the caller's to name."""
    for n, line in read_input_lines(path, kind, limit):
        if not line.strip():
            continue
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:
            raise JsonLineError(n, "not UTF-8 text") from None
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            raise JsonLineError(n, f"not valid JSON: {e.msg}", e.msg) from None
        except RecursionError:
            raise JsonLineError(n, "JSON nested too deeply") from None
        yield n, value


def load_request(path: str | None, limit: int = MAX_INPUT_BYTES) -> "ChatRequest":
    """A request from a JSON file (``None``: one user message "Hello", no tools) of at most ``limit`` bytes; a
    UTF-8 byte order mark at its start (Windows editors write one) is dropped, as for templates and cases files.
    Raises :class:`~core.errors.RequestFileError` naming the file (and the bad field)."""
    from .chat.request import ChatRequest

    if path is None:
        return ChatRequest.from_dict({"messages": [{"role": "user", "content": "Hello"}]})
    try:
        data = json.loads(read_input_file(path, "request file", limit).decode("utf-8-sig"))  # a BOM is not JSON
    except OSError as e:
        raise RequestFileError(path, f"cannot read: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise RequestFileError(path, f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except UnicodeDecodeError as e:
        raise RequestFileError(path, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    except RecursionError:
        raise RequestFileError(path, "JSON nested too deeply") from None
    try:
        return ChatRequest.from_dict(data)
    except RequestError as e:
        raise RequestFileError(path, e.message, field=e.field) from None


_INVALID_RUN = re.compile("[\udc80-\udcff]+")


def read_model_output(stream: Any = None, limit: int = MAX_INPUT_BYTES) -> str:
    """Model output from ``stream`` (stdin): UTF-8, each run of invalid bytes replaced by one U+FFFD as
    llama.cpp sanitizes undecodable text (stdin's surrogateescape would pass the raw bytes through to the JSON
    we print, which is then not UTF-8). A text stream without ``buffer`` is read as it is (``limit`` counts its
    characters). Raises :class:`~core.errors.ChatTemplateExplorerError` when there is more than ``limit``."""
    stream = stream or sys.stdin
    buffer = getattr(stream, "buffer", None)
    data = stream.read(limit + 1) if buffer is None else buffer.read(limit + 1)
    if len(data) > limit:
        raise ChatTemplateExplorerError(f"model output on stdin is above the limit of {limit:,} bytes")
    text = data if buffer is None else data.decode("utf-8", "surrogateescape")
    return _INVALID_RUN.sub("\ufffd", text)


def visible(s: str) -> str:
    """Whitespace made visible (``␣`` ``↵`` ``→``), every other invisible character escaped (``\\u001b``,
    ``\\u202e``: :mod:`core.escapes`); special tokens and all other text as is."""
    return _visible(s)


def guard(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command function that prints one ``error: …`` line and returns 2 for bad input (3 for an internal
    error, naming its cause for a bug report) instead of raising, so no input ends in a traceback."""
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except ChatTemplateExplorerError as e:
            request_path = getattr(args, "request", None)
            if request_path and isinstance(e, RequestError) and not isinstance(e, RequestFileError):
                e = RequestFileError(request_path, e.message, field=e.field)  # found late, e.g. a content part
            # the message quotes the input (a file name, a template's raise_exception text): no character of it may
            # reorder, hide or break the line a terminal shows
            print(f"error: {escape_invisible(str(e), keep='')}", file=sys.stderr)
            return 2
        except BrokenPipeError:  # an OSError: core.cli.main ends quietly (`… | head`)
            raise
        except OSError as e:
            print(f"error: {os_error_text(e)}", file=sys.stderr)
            return 2
        except UnicodeDecodeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        except (RecursionError, MemoryError) as e:
            print(f"error: input too large or nested too deeply ({type(e).__name__})", file=sys.stderr)
            return 2
        except Exception as e:  # last resort: one line, never a traceback (the cause is named for a bug report)
            print(f"error: internal error in {getattr(args, 'command', 'command')}: {type(e).__name__}: {e}",
                  file=sys.stderr)
            return 3
    run.__doc__ = fn.__doc__
    return run
