"""Errors raised by the engine.

Named after what went wrong, in the style of ``huggingface_hub.errors``: every error carries the input it
is about (a file name, a template name, a field) so a message can say *which* input failed and *why*.
All derive from :class:`ChatTemplateExplorerError`, so a caller (CLI, app) can catch one base class and
show ``str(err)`` to the user instead of a traceback.
"""

from __future__ import annotations

from .escapes import escape_char


class ChatTemplateExplorerError(Exception):
    """Base class of every error this package raises on purpose."""


# JSON's short forms for CR and LF, the one escape of core.escapes (\\u2028) for the others
_LINE_BREAKS = str.maketrans({"\n": "\\n", "\r": "\\r",
                              **{ch: escape_char(ch) for ch in "\v\f\x1c\x1d\x1e\x85\u2028\u2029"}})


def one_line(text: str) -> str:
    """``text`` with every character ``str.splitlines`` breaks at written as its escape (``\\n``, ``\\u2028``…):
    a message from a template (``raise_exception``) or a model stays one line, so it cannot print a fake
    traceback or a second error under ours."""
    return text.translate(_LINE_BREAKS)


#: characters of a template source (a path, a Hub id) a load error quotes: a 20,000-character id typed in a box
#: came back as a 40,000-character error; ``TemplateLoadError.source`` keeps it whole
SOURCE_SHOWN_CHARS = 200


def shown_source(source: str) -> str:
    """``source`` as a load error quotes it: cut after :data:`SOURCE_SHOWN_CHARS` characters (``…``)."""
    return source if len(source) <= SOURCE_SHOWN_CHARS else source[:SOURCE_SHOWN_CHARS] + "…"


class TemplateLoadError(ChatTemplateExplorerError):
    """A template source could not be read: missing file, empty file, binary data, no template in a
    ``tokenizer_config.json`` / ``chat_template.json`` / ``.gguf``, unknown variant name.

    Attributes: ``source`` (str, the path or repo id), ``reason`` (str).
    """

    def __init__(self, source: str, reason: str):
        self.source = source
        self.reason = reason
        shown = shown_source(source)
        if shown != source:  # a reason may name the source again (a Hub id's revision, a variant's file)
            reason = reason.replace(source, shown)
        super().__init__(f"cannot load chat template from {shown!r}: {reason}")


class TemplateTooLargeError(TemplateLoadError):
    """A file, upload or template text is above the size limit (``size`` and ``limit`` in bytes)."""

    def __init__(self, source: str, size: int, limit: int, what: str = "file"):
        self.size = size
        self.limit = limit
        super().__init__(source, f"the {what} is {_human_bytes(size)}, above the limit of {_human_bytes(limit)}; "
                                 "chat templates are kilobytes, so check that this is the right file "
                                 "(or raise the limit with max_bytes)")


class VariantNotFoundError(TemplateLoadError):
    """The requested named template (variant) does not exist; ``available`` lists the names that do."""

    def __init__(self, source: str, variant: str, available: list[str]):
        self.variant = variant
        self.available = list(available)
        names = ", ".join(repr(a) for a in available) or "none"
        super().__init__(source, f"there is no chat template variant {variant!r}; available: {names}")


class HubError(TemplateLoadError):
    """Base class of Hugging Face Hub failures while fetching a template (``source`` is the repo id)."""


class HubOfflineError(HubError):
    """The repo's template files are not in the local HF cache and the Hub cannot be reached (offline mode
    ``HF_HUB_OFFLINE=1``, or no network)."""


class HubNotFoundError(HubError):
    """The repository, the revision, or every template file in it does not exist on the Hub."""


class HubGatedError(HubError):
    """The repository is gated or private (HTTP 401/403): a token with access is needed."""


class HubTimeoutError(HubError):
    """The Hub did not answer in time."""


def _human_bytes(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f} MB"
    if n >= 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n} bytes"


class TemplateSyntaxError(ChatTemplateExplorerError):
    """The template source is not valid Jinja. ``lineno`` is 1-based or None."""

    def __init__(self, name: str, message: str, lineno: int | None = None):
        self.name = name
        self.message = message
        self.lineno = lineno
        where = f" (line {lineno})" if lineno else ""
        super().__init__(f"template {name!r} has a Jinja syntax error{where}: {one_line(message)}")


class TemplateRenderError(ChatTemplateExplorerError):
    """Rendering raised: ``raise_exception`` in the template, an undefined value, a sandbox refusal…"""

    def __init__(self, name: str, message: str):
        self.name = name
        self.message = message
        super().__init__(f"template {name!r} failed to render: {one_line(message)}")


class TemplateSecurityError(TemplateRenderError):
    """The sandbox refused an operation (access to internals, unsafe callables)."""


class RenderLimitError(TemplateRenderError):
    """A render exceeded a resource limit (time, output size, loop iterations, recursion)."""


class AnalysisError(ChatTemplateExplorerError):
    """The differential analysis could not run at all (e.g. every probe failed)."""

    def __init__(self, name: str, message: str):
        self.name = name
        self.message = message
        super().__init__(f"cannot analyse template {name!r}: {one_line(message)}")


class AnalysisSettingError(AnalysisError):
    """A setting the user gave the analysis names nothing it has or has the wrong kind of value (an override
    ``--override PATH=VALUE`` or a workaround to switch off, on the CLI or the Overrides page): the input is at
    fault, not the template."""

    def __init__(self, name: str, message: str):
        super().__init__(name, message)
        ChatTemplateExplorerError.__init__(self, f"invalid analysis setting for template {name!r}: "
                                                 f"{one_line(message)}")


class RequestError(ChatTemplateExplorerError, ValueError):
    """A chat request (messages, tools, tool_choice, …) is malformed. ``field`` names the bad part."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"invalid request field {field!r}: {message}")


class RequestFileError(RequestError):
    """A request or cases file cannot be used: unreadable, not UTF-8, not JSON, or one of its fields is bad.
    ``path`` is the file (``file:line`` for a JSON-lines row); ``field`` the bad field (the path when the
    file as a whole is bad), ``kind`` what the file is (``"request file"``, ``"cases file"``)."""

    def __init__(self, path: str, message: str, field: str | None = None, kind: str = "request file"):
        self.path = path
        self.field = field or path
        self.message = message
        where = f"{kind} {path!r}" + (f", field {field!r}" if field else "")
        ChatTemplateExplorerError.__init__(self, f"{where}: {message}")


class DependencyError(ChatTemplateExplorerError, RuntimeError):
    """An optional package a feature needs is not installed, or older than it needs (``export --verify``:
    transformers); the message names the package, the minimum and what is installed."""


class ExpectedMessageError(ChatTemplateExplorerError):
    """An expected message (``explain --expect FILE``, the Explain page's box) is not an OpenAI assistant message
    the reproducers can assert: ``source`` names where it came from, ``field`` the bad part (``tool_calls[0]``)."""

    def __init__(self, source: str, field: str, message: str):
        self.source = source
        self.field = field
        self.message = message
        where = f"{source}, field {field!r}" if field else source
        super().__init__(f"expected message ({where}): {one_line(message)}")


def os_error_text(e: OSError) -> str:
    """One line for an ``OSError`` met on a path the user gave: ``"PATH: reason"`` (``"out: File exists"``)
    rather than Python's ``"[Errno 17] File exists: 'out'"``; the reason alone when no path is attached."""
    reason = e.strerror or str(e)
    return f"{e.filename}: {reason}" if e.filename is not None else reason
