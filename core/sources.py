"""Where chat templates come from: a string, a ``.jinja`` file, a ``tokenizer_config.json`` /
``chat_template.json``, a ``.gguf`` file, a local model folder, a Hugging Face Hub repo.

Every loader returns a :class:`LoadedTemplate` holding *all* named templates of the source (``variants``,
``"default"`` for the unnamed one, as transformers and llama.cpp name them) and the selected one.
Failures raise :class:`core.errors.TemplateLoadError` (or a subclass) naming the input and the cause:
missing file, empty file, binary data, invalid UTF-8, too large, invalid JSON, no template, unknown variant,
a GGUF without ``tokenizer.chat_template``; for the Hub :class:`~core.errors.HubOfflineError`,
:class:`~core.errors.HubNotFoundError`, :class:`~core.errors.HubGatedError`,
:class:`~core.errors.HubTimeoutError`.

Formats (as transformers and llama.cpp store templates):

* ``tokenizer_config.json`` / ``chat_template.json``: ``"chat_template"`` is a string, or a list of
  ``{"name": …, "template": …}`` (transformers' named templates, e.g. ``default`` and ``tool_use``);
  a mapping ``{name: template}`` is accepted too;
* ``.gguf``: the string ``tokenizer.chat_template`` plus ``tokenizer.chat_template.<name>`` for named ones
  (gguf-py's ``add_chat_template``), read by :mod:`core.gguf_meta` (only those keys, memory-mapped, every
  header claim checked against the file: bounded time and memory for model files of any size);
* Hub repo: ``chat_template.jinja`` (plus ``additional_chat_templates/<name>.jinja``), else
  ``chat_template.json``, else ``tokenizer_config.json`` — fetched with ``hf_hub_download`` so the standard
  HF cache is used. The token comes from ``token=`` or, as huggingface_hub does, ``HF_TOKEN`` / the stored
  login; it is never printed. With ``HF_HUB_OFFLINE=1`` only the cache is read.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import stat
import tempfile
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import (
    HubGatedError,
    HubNotFoundError,
    HubOfflineError,
    HubTimeoutError,
    TemplateLoadError,
    TemplateTooLargeError,
    VariantNotFoundError,
    shown_source,
)

if TYPE_CHECKING:  # jinja2 loads when a template is compiled, not when a file is read (the app's front page)
    from .jinja.template import ChatTemplate

__all__ = [
    "ADDITIONAL_TEMPLATES_DIR",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_JSON_BYTES",
    "HUB_TEMPLATE_FILES",
    "LoadedTemplate",
    "is_repo_id",
    "load_bytes",
    "load_file",
    "load_folder",
    "load_hub",
    "load_hub_spec",
    "load_string",
    "load_template",
    "parse_template_json",
    "read_template_file",
]

#: Largest template text (and ``.jinja`` file) accepted, in bytes. Real templates are a few KB; the
#: biggest in the reference corpus is under 40 KB. Override per call with ``max_bytes``.
DEFAULT_MAX_BYTES = 2 * 1024 * 1024
#: Largest JSON file accepted, in bytes: tokenizer_config.json can carry thousands of added tokens
#: (over 1 MB for some models) around a small template.
DEFAULT_MAX_JSON_BYTES = 32 * 1024 * 1024

#: Files looked for in a Hub repo or a local model folder, in this order.
HUB_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json", "tokenizer_config.json")
#: Folder of named variants (``<name>.jinja``) next to ``chat_template.jinja`` (transformers' layout).
ADDITIONAL_TEMPLATES_DIR = "additional_chat_templates"

_GGUF_MAGIC = b"GGUF"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_GGUF_KEY = "tokenizer.chat_template"


@dataclass
class LoadedTemplate:
    """A loaded template source.

    ``name``: file name or repo id, with ``:variant`` appended when a non-default variant is selected;
    ``source``: the selected template text; ``variants``: every named template of the source
    (``"default"`` is the unnamed one); ``variant``: the selected name; ``origin``: ``"string"``,
    ``"file"``, ``"json"``, ``"gguf"``, ``"folder"``, ``"hub"`` or ``"bundled"``; ``path``: the file read
    (for the Hub, the cached file) or None; ``revision``: the Hub revision asked for (None = main).
    """

    name: str
    source: str
    variants: dict[str, str]
    variant: str
    origin: str
    path: str | None = None
    revision: str | None = None
    base_name: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if not self.base_name:
            self.base_name = self.name.split(":")[0] if self.variant != "default" else self.name

    def template(self) -> ChatTemplate:
        """The compiled template (raises :class:`core.errors.TemplateSyntaxError` on bad Jinja)."""
        from .jinja.template import ChatTemplate

        return ChatTemplate(self.source, self.name)

    def with_variant(self, variant: str) -> "LoadedTemplate":
        """The same source with another variant selected (raises :class:`VariantNotFoundError`)."""
        return _select(self.base_name, self.variants, variant, self.origin, self.path, self.revision)


# ---------------------------------------------------------------------------------------------------------
# text checks
# ---------------------------------------------------------------------------------------------------------


def _decode(source: str, data: bytes, what: str = "file") -> str:
    """UTF-8 text of ``data`` (a BOM is dropped); clear errors for empty, NUL bytes, invalid UTF-8."""
    if not data.strip():
        raise TemplateLoadError(source, f"the {what} is empty" if not data else f"the {what} contains only "
                                                                                 "whitespace")
    if b"\x00" in data:
        raise TemplateLoadError(source, f"the {what} is binary (it contains NUL bytes), not a text template")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TemplateLoadError(source, f"the {what} is not UTF-8 text (invalid byte 0x{data[e.start]:02x} at "
                                        f"offset {e.start})") from None
    if text.startswith("\ufeff"):
        text = text[1:]
        if not text.strip():   # else the message named a variant ('default') the file does not have
            raise TemplateLoadError(source, f"the {what} contains only a byte order mark"
                                    + (" and whitespace" if text else ""))
    return text


def json_kind(value: Any) -> str:
    """A plain-words name of a parsed JSON value's kind, with its article, for messages: ``"a number"``,
    ``"a string"``, ``"true/false"``, ``"null"``, ``"a list"``, ``"an object"`` (never a Python type name)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def _check_size(source: str, size: int, limit: int | None, what: str = "file") -> None:
    if limit is not None and size > limit:
        raise TemplateTooLargeError(source, size, limit, what)


def read_template_file(path: str | os.PathLike[str], max_bytes: int | None = DEFAULT_MAX_BYTES) -> str:
    """The text of one template file of a batch folder, read as ``Path.read_text`` reads it. Raises
    :class:`TemplateLoadError` for a named pipe, device or socket in the folder (a pipe without a writer blocks its
    reader for good, ``/dev/zero`` never ends) and :class:`TemplateTooLargeError` above ``max_bytes``, before a byte
    is read."""
    st = os.stat(path)
    _check_regular(str(path), st.st_mode)
    _check_size(str(path), st.st_size, max_bytes)
    return pathlib.Path(path).read_text(encoding="utf-8")


def _check_template_text(source: str, name: str, text: Any, limit: int | None) -> str:
    if not isinstance(text, str):
        raise TemplateLoadError(source, f"chat template {name!r} must be a string, got {json_kind(text)}")
    if not text.strip():
        raise TemplateLoadError(source, f"chat template {name!r} is empty")
    if "\x00" in text:
        raise TemplateLoadError(source, f"chat template {name!r} contains NUL characters")
    lone = _LONE_SURROGATE.search(text)
    if lone:
        raise TemplateLoadError(source, f"chat template {name!r} contains a lone surrogate "
                                        f"U+{ord(lone.group()):04X} at character {lone.start()}: not valid Unicode text")
    _check_size(source, len(text.encode("utf-8", "surrogatepass")), limit, f"chat template {name!r}")
    return text


def _select(name: str, variants: dict[str, str], variant: str | None, origin: str, path: str | None,
            revision: str | None = None) -> LoadedTemplate:
    if not variants:
        raise TemplateLoadError(name, "no chat template found")
    if variant is None or variant == "":
        chosen = "default" if "default" in variants else next(iter(variants))
    elif variant in variants:
        chosen = variant
    else:
        raise VariantNotFoundError(name, variant, list(variants))
    shown = name if chosen == "default" else f"{name}:{chosen}"
    return LoadedTemplate(shown, variants[chosen], dict(variants), chosen, origin, path, revision, name)


# ---------------------------------------------------------------------------------------------------------
# strings and files
# ---------------------------------------------------------------------------------------------------------


def load_string(text: str, name: str = "<string>", *, max_bytes: int | None = DEFAULT_MAX_BYTES) -> LoadedTemplate:
    """A template given as text (pasted). Raises :class:`TemplateLoadError` if it is empty, contains NUL
    characters or is larger than ``max_bytes``."""
    if not isinstance(text, str):
        raise TemplateLoadError(name, f"expected template text, got {json_kind(text)}")
    text = _check_template_text(name, "default", text, max_bytes)
    return _select(name, {"default": text}, None, "string", None)


def parse_template_json(source: str, data: Any, *, max_bytes: int | None = DEFAULT_MAX_BYTES) -> dict[str, str]:
    """The named templates in parsed ``tokenizer_config.json`` / ``chat_template.json`` content.

    Accepts ``{"chat_template": str | [{"name", "template"}, …] | {name: template}}``, or such a list /
    mapping at the top level. Returns ``{name: template}`` with ``"default"`` for an unnamed template.
    Raises :class:`TemplateLoadError` when there is no template or it has the wrong shape.
    """
    if isinstance(data, dict) and "chat_template" in data:
        value = data["chat_template"]
    elif isinstance(data, list):
        value = data
    elif isinstance(data, dict):
        keys = ", ".join(list(data)[:12]) or "none"
        raise TemplateLoadError(source, f"the JSON has no \"chat_template\" field (its keys: {keys})")
    else:
        raise TemplateLoadError(source, f"the JSON must be an object with a \"chat_template\" field, got "
                                        f"{json_kind(data)}")
    if value is None:
        raise TemplateLoadError(source, "\"chat_template\" is null: this tokenizer has no chat template")
    variants: dict[str, str] = {}
    if isinstance(value, str):
        variants["default"] = _check_template_text(source, "default", value, max_bytes)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if not isinstance(item, dict) or "template" not in item:
                raise TemplateLoadError(source, f"chat_template[{i}] is not an object with \"name\" and "
                                                "\"template\"")
            vname = item.get("name") or "default"
            if not isinstance(vname, str):
                raise TemplateLoadError(source, f"chat_template[{i}].name is not a string")
            variants[vname] = _check_template_text(source, vname, item["template"], max_bytes)
    elif isinstance(value, dict):
        for vname, tmpl in value.items():
            variants[str(vname)] = _check_template_text(source, str(vname), tmpl, max_bytes)
    else:
        raise TemplateLoadError(source, f"\"chat_template\" must be a string or a list of {{name, template}}, "
                                        f"got {json_kind(value)}")
    if not variants:
        raise TemplateLoadError(source, "\"chat_template\" is an empty list")
    return variants


def _json_variants(source: str, text: str, max_bytes: int | None) -> dict[str, str]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise TemplateLoadError(source, f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise TemplateLoadError(source, "not valid JSON: nested too deeply") from None
    return parse_template_json(source, data, max_bytes=max_bytes)


def _gguf_variants(source: str, path: str, max_bytes: int | None) -> dict[str, str]:
    """Named templates in a GGUF file's metadata (``tokenizer.chat_template[.<name>]``), read with the bounded
    reader of :mod:`core.gguf_meta` (only those keys; bounded time and memory whatever the header claims)."""
    from .gguf_meta import GGUFError, read_chat_templates

    try:
        found = read_chat_templates(path, max_template_bytes=max_bytes if max_bytes is not None else 1 << 40)
    except GGUFError as e:
        msg = str(e)
        raise TemplateLoadError(source, msg if "GGUF" in msg else f"cannot read the GGUF metadata: {msg}") from None
    except OSError as e:
        raise TemplateLoadError(source, f"cannot read the file: {e.strerror or e}") from None
    variants: dict[str, str] = {}
    for key, raw in found.templates.items():
        vname = "default" if key == _GGUF_KEY else key[len(_GGUF_KEY) + 1:]
        text = _decode(source, raw, f"GGUF value {key!r}")
        variants[vname] = _check_template_text(source, vname, text, max_bytes)
    if not variants:
        raise TemplateLoadError(source, "the GGUF file has no chat template (no tokenizer.chat_template in its "
                                        "metadata); use the model's tokenizer_config.json or a .jinja file")
    if "default" in variants:  # default first
        variants = {"default": variants.pop("default"), **variants}
    return variants


def load_file(path: str | os.PathLike[str], variant: str | None = None, *,
              max_bytes: int | None = DEFAULT_MAX_BYTES,
              max_json_bytes: int | None = DEFAULT_MAX_JSON_BYTES) -> LoadedTemplate:
    """Load a template file: ``.gguf`` (detected by its magic bytes, any size), ``.json``
    (tokenizer_config.json / chat_template.json) or anything else as Jinja text (``.jinja``, ``.j2``, …).

    ``variant`` selects a named template (default: ``"default"``, else the first one). Raises
    :class:`TemplateLoadError` (missing, a folder, empty, binary, not UTF-8, invalid JSON, no template, GGUF
    without template), :class:`TemplateTooLargeError`, :class:`VariantNotFoundError`.
    """
    p = pathlib.Path(path)
    source = str(path)
    name = p.name or source
    if not p.exists():
        raise TemplateLoadError(source, "file not found")
    if p.is_dir():
        return load_folder(p, variant, max_bytes=max_bytes, max_json_bytes=max_json_bytes)
    try:
        st = p.stat()
        _check_regular(source, st.st_mode)
        # one open, never blocking: a FIFO put in the file's place after the check opens at once and is refused
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb") as f:
            _check_regular(source, os.fstat(f.fileno()).st_mode)
            head = f.read(4)
            if head == _GGUF_MAGIC or p.suffix.lower() == ".gguf":
                data = None
            else:
                is_json = p.suffix.lower() == ".json"
                limit = max_json_bytes if is_json else max_bytes
                _check_size(source, st.st_size, limit)
                # at most one byte past the limit: the file may have grown since its size was read
                data = head + (f.read() if limit is None else f.read(max(0, limit + 1 - len(head))))
    except OSError as e:
        raise TemplateLoadError(source, f"cannot read the file: {e.strerror or e}") from None
    if data is None:
        return _select(name, _gguf_variants(source, str(p), max_bytes), variant, "gguf", str(p))
    if limit is not None and len(data) > limit:
        raise TemplateLoadError(source, f"the file holds more than the limit of {limit:,} bytes (it grew while "
                                        "read); chat templates are kilobytes")
    return _text_template(source, name, data, is_json, variant, str(p), max_bytes)


_NOT_REGULAR = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
                (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _check_regular(source: str, mode: int) -> None:
    """Refuse anything but a regular file before reading it: a pipe without a writer blocks its reader, a device
    may never end, a socket cannot be opened."""
    if stat.S_ISREG(mode):
        return
    kind = next((what for test, what in _NOT_REGULAR if test(mode)), "not a regular file")
    raise TemplateLoadError(source, f"{kind}, not a regular file: a chat template is read from a .jinja, .json "
                                    "or .gguf file")


def _text_template(source: str, name: str, data: bytes, is_json: bool, variant: str | None, path: str | None,
                   max_bytes: int | None) -> LoadedTemplate:
    """A JSON or Jinja file's bytes as a :class:`LoadedTemplate` (errors name ``source``)."""
    text = _decode(source, data)
    if is_json:
        return _select(name, _json_variants(source, text, max_bytes), variant, "json", path)
    return _select(name, {"default": _check_template_text(source, "default", text, max_bytes)}, variant, "file",
                   path)


def load_bytes(data: bytes, filename: str, variant: str | None = None, *,
               max_bytes: int | None = DEFAULT_MAX_BYTES,
               max_json_bytes: int | None = DEFAULT_MAX_JSON_BYTES,
               max_gguf_bytes: int | None = None) -> LoadedTemplate:
    """Load an uploaded file's bytes; ``filename`` (its suffix) picks the format, GGUF is also recognised by
    its magic bytes. Size limits: ``max_bytes`` for Jinja text, ``max_json_bytes`` for JSON,
    ``max_gguf_bytes`` (None = no limit) for GGUF. Same errors as :func:`load_file`, naming ``filename``."""
    name = pathlib.PurePath(filename).name or "upload"
    suffix = pathlib.PurePath(filename).suffix.lower()
    if data[:4] == _GGUF_MAGIC or suffix == ".gguf":
        _check_size(name, len(data), max_gguf_bytes)
        fd, tmp = tempfile.mkstemp(suffix=".gguf")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            return _select(name, _gguf_variants(name, tmp, max_bytes), variant, "gguf", None)
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    is_json = suffix == ".json"
    _check_size(name, len(data), max_json_bytes if is_json else max_bytes)
    return _text_template(name, name, data, is_json, variant, None, max_bytes)


def _additional_templates(source: str, folder: pathlib.Path, max_bytes: int | None) -> dict[str, str]:
    out: dict[str, str] = {}
    extra = folder / ADDITIONAL_TEMPLATES_DIR
    if extra.is_dir():
        for f in sorted(extra.glob("*.jinja")):
            if not f.is_file():
                continue  # a pipe or device named *.jinja would block or never end
            try:
                out[f.stem] = _check_template_text(source, f.stem, _decode(str(f), f.read_bytes()), max_bytes)
            except (OSError, TemplateLoadError):
                continue  # a broken extra variant does not hide the main template
    return out


def load_folder(folder: str | os.PathLike[str], variant: str | None = None, *,
                max_bytes: int | None = DEFAULT_MAX_BYTES,
                max_json_bytes: int | None = DEFAULT_MAX_JSON_BYTES) -> LoadedTemplate:
    """A local model folder (e.g. a downloaded repo): the first of :data:`HUB_TEMPLATE_FILES` present
    (with ``additional_chat_templates/*.jinja`` as named variants next to ``chat_template.jinja``)."""
    d = pathlib.Path(folder)
    source = str(folder)
    if not d.is_dir():
        raise TemplateLoadError(source, "folder not found")
    for fname in HUB_TEMPLATE_FILES:
        f = d / fname
        if f.is_file():
            loaded = load_file(f, None, max_bytes=max_bytes, max_json_bytes=max_json_bytes)
            variants = dict(loaded.variants)
            if fname == "chat_template.jinja":
                variants.update({k: v for k, v in _additional_templates(source, d, max_bytes).items()
                                 if k not in variants})
            return _select(d.name or source, variants, variant, "folder", str(f))
    raise TemplateLoadError(source, "the folder has none of " + ", ".join(HUB_TEMPLATE_FILES))


# ---------------------------------------------------------------------------------------------------------
# Hugging Face Hub
# ---------------------------------------------------------------------------------------------------------

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*/[A-Za-z0-9_.\-]+$")
_HUB_URL = re.compile(r"^(?:https?://)?(?:www\.)?(?:huggingface\.co|hf\.co)/(?P<id>[^/?#]+/[^/?#]+)"
                      r"(?:/(?:tree|blob|resolve)/(?P<rev>[^/?#]+))?")


def _parse_repo_spec(spec: str) -> tuple[str, str | None] | None:
    """``(repo_id, revision)`` if ``spec`` names a Hub repo: ``org/name``, ``org/name@rev``,
    ``hf://org/name`` or a huggingface.co URL; else None."""
    s = spec.strip()
    if s.startswith("hf://"):
        s = s[5:]
    m = _HUB_URL.match(s)
    if m:
        return m.group("id"), m.group("rev")
    rev = None
    if "@" in s:
        s, rev = s.split("@", 1)
    if _REPO_ID.match(s) and ".." not in s and not s.endswith((".jinja", ".json", ".gguf")):
        return s, rev or None
    return None


def is_repo_id(spec: str) -> bool:
    """True if ``spec`` looks like a Hub repo id (``org/name``, optionally ``@revision`` or a hf.co URL)."""
    return _parse_repo_spec(spec) is not None


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in ("1", "ON", "YES", "TRUE")


def _hub_offline() -> bool:
    """Offline mode, read from the environment at call time (huggingface_hub reads it once at import)."""
    return _env_true("HF_HUB_OFFLINE") or _env_true("TRANSFORMERS_OFFLINE")


def _hub_cache_dir() -> str | None:
    """The HF cache folder from the environment at call time (None = huggingface_hub's default)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    return None


#: Seconds the reachability check before a Hub download may take (see :func:`_hub_reachable`).
HUB_CONNECT_TIMEOUT = 1.0
#: Seconds huggingface_hub waits for a file's metadata (``etag_timeout``).
_ETAG_TIMEOUT_S = 10.0


def _hub_probe_target() -> tuple[str, int] | None:
    """``(host, port)`` a Hub request would connect to first: the HTTPS proxy when one applies to the endpoint
    (``HTTPS_PROXY`` etc., as urllib reads them), else the endpoint (``HF_ENDPOINT``, default huggingface.co)."""
    import urllib.request

    endpoint = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    if not endpoint.hostname:
        return None
    scheme = endpoint.scheme or "https"
    proxy = urllib.request.getproxies().get(scheme)
    if proxy and not urllib.request.proxy_bypass(endpoint.hostname):
        p = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        if p.hostname:
            return p.hostname, p.port or (443 if p.scheme == "https" else 80)
    return endpoint.hostname, endpoint.port or (443 if scheme == "https" else 80)


def _hub_reachable(timeout: float = HUB_CONNECT_TIMEOUT) -> bool:
    """True if a TCP connection to the Hub (or its proxy) opens within ``timeout`` seconds, name lookup included.

    huggingface_hub retries a failing connection five times with backoff (about 25 s per file, printing "Retrying
    in 8s" each time); one bounded check first lets an offline machine fail at once and read its cache instead.
    The lookup runs in a daemon thread because ``getaddrinfo`` has no timeout of its own.
    """
    import socket

    target = _hub_probe_target()
    if target is None:
        return True  # an endpoint we cannot parse: let huggingface_hub report it
    ok: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection(target, timeout=timeout):
                ok.append(True)
        except OSError:
            pass

    t = threading.Thread(target=probe, name="hub-probe", daemon=True)
    t.start()
    t.join(timeout)
    return bool(ok)


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def _is_timeout(exc: BaseException) -> bool:
    return any(isinstance(e, TimeoutError) or "Timeout" in type(e).__name__ for e in _chain(exc))


def _status(exc: BaseException) -> int | None:
    resp = getattr(exc, "response", None)
    return getattr(resp, "status_code", None)


_LOGIN_HINT = "set HF_TOKEN or run `hf auth login` (a token with read access)"


def _map_hub_error(repo: str, revision: str | None, exc: BaseException) -> Exception | None:
    """A clear error for a fatal Hub failure, or None when the failure only concerns one file."""
    from huggingface_hub import errors as hf_errors

    what = repo if not revision else f"{repo}@{revision}"
    if isinstance(exc, hf_errors.GatedRepoError):
        return HubGatedError(what, "the repository is gated: accept its terms on "
                                   f"https://huggingface.co/{repo} and {_LOGIN_HINT}")
    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return HubNotFoundError(what, f"revision {revision!r} does not exist in the repository (use a branch, "
                                      "tag or commit id; empty means main)")
    if isinstance(exc, hf_errors.RepositoryNotFoundError):
        return HubNotFoundError(what, "repository not found on the Hub: check the id (org/name); a private "
                                      f"repository looks the same without access, so {_LOGIN_HINT}")
    if isinstance(exc, hf_errors.DisabledRepoError):
        return HubNotFoundError(what, "the repository has been disabled on the Hub")
    if isinstance(exc, hf_errors.HFValidationError):
        return HubNotFoundError(what, f"not a valid repository id ({exc})")
    status = _status(exc)
    if status in (401, 403):
        return HubGatedError(what, f"access refused (HTTP {status}): the repository is private or gated; "
                                   f"{_LOGIN_HINT}")
    if _is_timeout(exc):
        return HubTimeoutError(what, "the Hub did not answer in time; retry, or raise HF_HUB_ETAG_TIMEOUT / "
                                     "HF_HUB_DOWNLOAD_TIMEOUT (seconds)")
    return None


def _cached_as_missing(repo_id: str, filename: str, cache: str | None, revision: str | None) -> bool:
    """True when the HF cache records that ``filename`` does not exist in the repo (its ``.no_exist``
    markers), so an offline lookup can say "no template" rather than "not cached"."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo_id, filename, cache_dir=cache, revision=revision)
    except Exception:
        return False
    return found is not None and not isinstance(found, str)


def _offline_error(repo: str, revision: str | None, offline: bool, cache: str | None) -> HubOfflineError:
    what = repo if not revision else f"{repo}@{revision}"
    where = cache or "the default HF cache (~/.cache/huggingface/hub)"
    if offline:
        return HubOfflineError(what, "offline mode is on (HF_HUB_OFFLINE=1) and the template files are not in "
                                     f"the local cache ({where}); unset HF_HUB_OFFLINE and connect once to download "
                                     "them, after which loading works offline")
    return HubOfflineError(what, "the Hub cannot be reached and the template files are not in the local cache "
                                 f"({where}); check the network connection (or a proxy) and retry")


def load_hub(repo_id: str, variant: str | None = None, *, revision: str | None = None,
             token: str | bool | None = None, max_bytes: int | None = DEFAULT_MAX_BYTES,
             max_json_bytes: int | None = DEFAULT_MAX_JSON_BYTES) -> LoadedTemplate:
    """Fetch a repo's chat template: the first of ``chat_template.jinja`` (plus
    ``additional_chat_templates/*.jinja``), ``chat_template.json``, ``tokenizer_config.json`` that exists,
    via ``huggingface_hub.hf_hub_download`` (standard cache; ``HF_HUB_CACHE`` / ``HF_HOME`` respected;
    with ``HF_HUB_OFFLINE=1`` only the cache is read). ``token``: None uses ``HF_TOKEN`` or the stored login —
    unless ``CTE_HUB_ANONYMOUS=1`` is set, which makes None mean ``False``; ``False`` sends no token at all (a
    public demo must not send the operator's token for any repo a visitor names); a string is that token.
    When the Hub (or the HTTPS proxy) does not accept a connection within :data:`HUB_CONNECT_TIMEOUT`, only the
    cache is read, so an offline machine answers in about that time rather than after minutes of retries.

    Raises :class:`HubOfflineError` (offline / unreachable and not cached), :class:`HubNotFoundError` (repo,
    revision, or no template file), :class:`HubGatedError` (401/403), :class:`HubTimeoutError`, plus the
    file errors of :func:`load_file` for what was downloaded.
    """
    from huggingface_hub import hf_hub_download
    from huggingface_hub import errors as hf_errors

    if token is None and _env_true("CTE_HUB_ANONYMOUS"):
        token = False
    offline = _hub_offline()
    cache = _hub_cache_dir()
    what = repo_id if not revision else f"{repo_id}@{revision}"
    # no network: read the cache only, at once, instead of huggingface_hub's ~25 s of retries per file
    unreachable = not offline and not _hub_reachable()
    missing: list[str] = []
    for fname in HUB_TEMPLATE_FILES:
        try:
            # once the Hub proved unreachable, the other files come from the cache only
            path = hf_hub_download(repo_id, fname, revision=revision, token=token, cache_dir=cache,
                                   local_files_only=offline or unreachable, etag_timeout=_ETAG_TIMEOUT_S)
        except hf_errors.LocalEntryNotFoundError as e:  # not cached and (offline or Hub unreachable)
            mapped = _map_hub_error(repo_id, revision, e)
            if isinstance(mapped, HubTimeoutError):
                raise mapped from None
            if _cached_as_missing(repo_id, fname, cache, revision):
                missing.append(fname)
            else:
                unreachable = True
                # huggingface_hub's own offline flag (read at its import) also counts as offline mode
                offline = offline or any(isinstance(x, hf_errors.OfflineModeIsEnabled) for x in _chain(e))
            continue
        except hf_errors.EntryNotFoundError:
            missing.append(fname)
            continue
        except hf_errors.OfflineModeIsEnabled:
            unreachable = offline = True
            continue
        except Exception as e:  # HTTP errors, timeouts, invalid id
            mapped = _map_hub_error(repo_id, revision, e)
            if mapped is not None:
                raise mapped from None
            raise HubNotFoundError(what, f"fetching {fname} failed: {type(e).__name__}: {e}") from None
        try:
            loaded = load_file(path, None, max_bytes=max_bytes, max_json_bytes=max_json_bytes)
        except TemplateLoadError as e:  # name the repo file, not the cache path
            e.source = f"{what}/{fname}"
            e.args = (f"cannot load chat template from {shown_source(e.source)!r}: {e.reason}",)
            raise
        variants = dict(loaded.variants)
        if fname == "chat_template.jinja":
            extra = _hub_additional(repo_id, revision, token, cache, offline or unreachable,
                                    pathlib.Path(path).parent, max_bytes)
            variants.update({k: v for k, v in extra.items() if k not in variants})
        return _select(repo_id, variants, variant, "hub", str(path), revision)
    if unreachable:
        raise _offline_error(repo_id, revision, offline, cache)
    raise HubNotFoundError(what, "the repository has no chat template (none of " + ", ".join(HUB_TEMPLATE_FILES)
                           + "); pick a chat/instruct model or load a template file")


def _hub_additional(repo_id: str, revision: str | None, token: Any, cache: str | None, offline: bool,
                    snapshot: pathlib.Path, max_bytes: int | None) -> dict[str, str]:
    """Named variants stored as ``additional_chat_templates/<name>.jinja`` (transformers' layout): listed on
    the Hub when online, else whatever the cached snapshot holds. Failures here never hide the main template."""
    names: list[str] = []
    if not offline:
        try:
            from huggingface_hub import list_repo_files

            names = [f for f in list_repo_files(repo_id, revision=revision, token=token)
                     if f.startswith(ADDITIONAL_TEMPLATES_DIR + "/") and f.endswith(".jinja")]
        except Exception:
            names = []
    if names:
        from huggingface_hub import hf_hub_download

        out: dict[str, str] = {}
        for f in names:
            try:
                p = hf_hub_download(repo_id, f, revision=revision, token=token, cache_dir=cache,
                                    etag_timeout=_ETAG_TIMEOUT_S)
                stem = pathlib.PurePosixPath(f).stem
                out[stem] = _check_template_text(repo_id, stem, _decode(f, pathlib.Path(p).read_bytes()), max_bytes)
            except Exception:
                continue
        return out
    return _additional_templates(repo_id, snapshot, max_bytes)


# ---------------------------------------------------------------------------------------------------------
# dispatch
# ---------------------------------------------------------------------------------------------------------


def load_template(spec: str | os.PathLike[str], variant: str | None = None, *, revision: str | None = None,
                  token: str | bool | None = None, max_bytes: int | None = DEFAULT_MAX_BYTES,
                  max_json_bytes: int | None = DEFAULT_MAX_JSON_BYTES) -> LoadedTemplate:
    """Load a template from ``spec``: an existing path (``.jinja`` / ``.json`` / ``.gguf`` file or a model
    folder), else a Hub repo id (``org/name``, ``org/name@revision``, ``hf://org/name`` or a huggingface.co
    URL; ``revision`` overrides the ``@`` part). ``variant`` picks a named template (default ``"default"``).

    Raises :class:`TemplateLoadError` or one of its subclasses (see the module docstring); a spec that is
    neither an existing path nor a repo id gives "file not found".
    """
    if isinstance(spec, os.PathLike):
        return load_file(spec, variant, max_bytes=max_bytes, max_json_bytes=max_json_bytes)
    if not isinstance(spec, str) or not spec.strip():
        raise TemplateLoadError(str(spec), "no template given (expected a file path or a Hub repo id)")
    if os.path.exists(spec):
        return load_file(spec, variant, max_bytes=max_bytes, max_json_bytes=max_json_bytes)
    if _parse_repo_spec(spec) is not None:
        return load_hub_spec(spec, variant, revision=revision, token=token, max_bytes=max_bytes,
                             max_json_bytes=max_json_bytes)
    raise TemplateLoadError(spec, "file not found (and it is not a Hub repo id such as org/name)")


def load_hub_spec(spec: str, variant: str | None = None, *, revision: str | None = None,
                  token: str | bool | None = None, max_bytes: int | None = DEFAULT_MAX_BYTES,
                  max_json_bytes: int | None = DEFAULT_MAX_JSON_BYTES) -> LoadedTemplate:
    """Load from the Hub only: ``spec`` is ``org/name``, ``org/name@revision``, ``hf://org/name`` or a
    huggingface.co URL, and is never tried as a local path (unlike :func:`load_template`), so text typed into a
    Hub field cannot read a server file such as ``core/cli.py``. ``revision`` overrides the ``@`` part;
    ``token`` as in :func:`load_hub` (``False``: send none).

    Raises :class:`TemplateLoadError` when ``spec`` is not a repo id, else the errors of :func:`load_hub`.
    """
    repo = _parse_repo_spec(spec) if isinstance(spec, str) else None
    if repo is None:
        raise TemplateLoadError(str(spec), "not a Hub repository id: expected org/name (letters, digits, '-', '_', "
                                           "'.'), org/name@revision or a huggingface.co URL")
    repo_id, rev = repo
    return load_hub(repo_id, variant, revision=revision or rev, token=token, max_bytes=max_bytes,
                    max_json_bytes=max_json_bytes)
