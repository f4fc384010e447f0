"""Where in the template source an error happened: :func:`locate_error` → :class:`ErrorLocation`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from jinja2.exceptions import TemplateSyntaxError as JinjaSyntaxError

from ..errors import ChatTemplateExplorerError, TemplateSyntaxError
from ..jinja.hf import ENV as _ENV
from ..jinja.template import ChatTemplate


@dataclass
class ErrorLocation:
    """``line`` (1-based, None when unknown), ``column`` (1-based, None when unknown), ``message`` (one line),
    ``kind`` ``"syntax"`` or ``"render"``, ``excerpt`` (the lines around ``line``, numbered, with a caret under
    the column)."""

    line: int | None
    column: int | None
    message: str
    kind: str
    excerpt: str = ""

    def headline(self) -> str:
        """``Syntax error at line 3, column 7: unexpected '}'`` (the parts known)."""
        where = ""
        if self.line:
            where = f" at line {self.line}" + (f", column {self.column}" if self.column else "")
        return f"{self.kind.capitalize()} error{where}: {self.message}"


_QUOTED = re.compile(r"'([^']{1,40})'")


def _column(line_text: str, message: str) -> int | None:
    """The column of the token a jinja2 message quotes (``unexpected '}'``, ``got '-'``, ``unknown tag 'x'``) in
    the line: the last quoted token found, at its last occurrence (the parser stops at the offending token, so
    it is the rightmost candidate)."""
    for tok in reversed(_QUOTED.findall(message)):
        i = line_text.rfind(tok)
        if i >= 0:
            return i + 1
    if "end of template" in message or "end of print statement" in message:
        return len(line_text) + 1 if line_text else 1
    stripped = len(line_text) - len(line_text.lstrip())
    return stripped + 1 if line_text.strip() else None


def _render_line(err: BaseException) -> int | None:
    """The template line of a render error: the last ``<template>`` frame of the original jinja2 exception
    (jinja2 rewrites tracebacks so template code frames carry template line numbers)."""
    seen = 0
    cause: BaseException | None = err
    line = None
    while cause is not None and seen < 5:
        tb = cause.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == "<template>" or tb.tb_frame.f_code.co_filename.endswith(".jinja"):
                line = tb.tb_lineno
            tb = tb.tb_next
        if line is not None:
            return line
        cause = cause.__context__ or cause.__cause__
        seen += 1
    return None


def excerpt(source: str, line: int | None, column: int | None = None, context: int = 2) -> str:
    """Lines ``line ± context`` of ``source``, numbered (``  12 | …``), with ``^`` under ``column``."""
    if not line:
        return ""
    lines = source.splitlines() or [""]
    lo, hi = max(1, line - context), min(len(lines), line + context)
    width = len(str(hi))
    out = []
    for n in range(lo, hi + 1):
        out.append(f"{n:>{width}} | {lines[n - 1] if n - 1 < len(lines) else ''}")
        if n == line and column:
            out.append(" " * width + " | " + " " * (column - 1) + "^")
    return "\n".join(out)


# block tags that need an end tag (``set`` only in its block form, without ``=``)
_OPENERS = ("for", "if", "macro", "call", "filter", "block", "with", "autoescape", "set", "trans")
_INNERMOST = re.compile(r"The innermost block that needs to be closed is '(\w+)'")


def open_blocks(source: str, upto_line: int | None = None) -> list[tuple[str, int]]:
    """The blocks still open (``(tag, line it opened on)``, outermost first) after the tags that start before
    ``upto_line`` (all of them when None). Lexes only (jinja2's lexer, no parse, no render); text that does not
    lex gives the blocks open up to where it stopped."""
    stack: list[tuple[str, int]] = []
    tokens = _ENV.lex(source)
    try:
        pending: tuple[str, int] | None = None   # a tag just opened whose statement is still being read
        assigns = False
        for line, kind, value in tokens:
            if upto_line is not None and line >= upto_line:
                break
            if kind == "block_begin":
                pending, assigns = ("", line), False
            elif pending is not None and pending[0] == "" and kind == "name":
                pending = (value, pending[1])
            elif pending is not None and kind == "operator" and value == "=":
                assigns = True
            elif kind == "block_end" and pending is not None:
                tag, at = pending
                pending = None
                if tag.startswith("end"):
                    for i in range(len(stack) - 1, -1, -1):
                        if stack[i][0] == tag[3:]:
                            del stack[i:]
                            break
                elif tag in _OPENERS and not (tag == "set" and assigns):
                    stack.append((tag, at))
    except JinjaSyntaxError:
        pass
    return stack


def _unclosed(message: str, source: str, line: int | None) -> str:
    """``message`` with the block jinja2 says is open named with the line it opened on: "`if` opened at line 3
    is never closed (…)" at the end of the template, "`if` opened at line 3 is not closed before line 6 (…)"
    elsewhere; ``message`` unchanged when it names no open block or the block is not found."""
    m = _INNERMOST.search(message)
    if not m:
        return message
    lines = source.splitlines()
    at_end = "end of template" in message.lower()
    opened = [b for b in open_blocks(source, None if at_end else line) if b[0] == m.group(1)]
    if not opened:
        return message
    tag, at = opened[-1]
    where = "is never closed" if at_end else f"is not closed before line {line}"
    hint = f"add {{% end{tag} %}}" if at_end else f"close it with {{% end{tag} %}} first"
    first = lines[at - 1].strip() if 0 < at <= len(lines) else ""
    return f"`{tag}` opened at line {at} {where} ({hint}; it opened with {first[:60]!r}). jinja2: {message}"


def locate_error(err: BaseException, source: str) -> ErrorLocation:
    """The position of ``err`` (a :class:`~core.errors.TemplateSyntaxError` or a render error raised while
    rendering ``source``) in ``source``: the line from the syntax error or from the template frame of the
    render traceback, the column from the token the message quotes. Never raises; unknown parts are None."""
    if isinstance(err, TemplateSyntaxError):
        line, msg, kind = err.lineno, err.message, "syntax"
    else:
        line, msg, kind = _render_line(err), str(err), "render"
        msg = re.sub(r"^template '.*?' failed to render: ", "", msg)
    lines = source.splitlines()
    col = _column(lines[line - 1], msg) if line and 0 < line <= len(lines) else None
    msg = " ".join(msg.split())
    if kind == "syntax":
        msg = _unclosed(msg, source, line)
    return ErrorLocation(line, col, msg, kind, excerpt(source, line, col))


def check_source(source: str, name: str = "<edited>") -> tuple[Any, ErrorLocation | None]:
    """Compile ``source`` and render one user turn with a generation prompt (through the sandbox). Returns
    ``(ChatTemplate, None)`` when both work, ``(None, location)`` on a syntax error and ``(template,
    location)`` on a render error."""
    try:
        t = ChatTemplate(source, name)
    except TemplateSyntaxError as e:
        return None, locate_error(e, source)
    try:
        t.render({"messages": [{"role": "user", "content": "Hello"}], "add_generation_prompt": True,
                  "tools": None, "bos_token": "", "eos_token": ""})
    except TemplateSyntaxError as e:  # found by code generation at the first render (unknown filter)
        return None, locate_error(e, source)
    except ChatTemplateExplorerError as e:
        return t, locate_error(e, source)
    return t, None
