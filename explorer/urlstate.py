"""URL state: the current source, fidelity and overrides in the query string, so a link (or a reload)
reopens the same view. The page is already in the URL path (Streamlit's multipage routing).

Query parameters: ``src`` — ``bundled:NAME``, ``hub:REPO[@REVISION][#VARIANT]``, ``file:PATH``, or
``text:DIGEST`` for edited, pasted or uploaded text (the text itself is kept server-side under its digest, see
:func:`save_text`, never in the URL); ``name`` (display name of ``text:`` sources); ``kind`` (``upload`` or
``string`` for a ``text:`` source that was uploaded or pasted, not edited; absent: edited); ``fidelity`` (only
when not the default); ``ov`` (the overrides as JSON, only when set); ``draft`` (digest of an edit not yet
analysed); ``base`` (an edited template's loaded source, as a ``src`` value: a reload keeps the original beside
the edit) and ``base_kind`` (its ``kind``).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
from typing import Any

import streamlit as st

from core.digest import source_digest
from core.errors import ChatTemplateExplorerError

_DIGEST = re.compile(r"^[0-9a-f]{16}$")


class LinkStateError(ChatTemplateExplorerError):
    """A link's state (``x``, ``ov``) cannot be read: ``param`` names the query parameter, ``reason`` says why
    (one line, no server detail)."""

    def __init__(self, param: str, reason: str):
        self.param = param
        self.reason = reason
        super().__init__(f"the link's {param}=… cannot be read: {reason}")


#: nesting a link's JSON may have (a request's messages and tool schemas nest a few levels; Python's JSON reader
#: recurses per level and fails with RecursionError near 1,000)
LINK_JSON_MAX_DEPTH = 64
#: characters of a link's ``ov`` parameter (overrides are a handful of short field values)
OV_MAX_CHARS = 16 * 1024

_JSON_TOKENS = re.compile(r'["\\\[\]{}]')


def json_depth(text: str, limit: int) -> int:
    """Deepest nesting of ``[`` / ``{`` in JSON ``text`` (strings skipped), counted up to ``limit + 1``: one
    linear pass over the structural characters, without parsing (so a hostile ``[[[[…`` costs nothing to
    refuse)."""
    depth = deepest = 0
    in_string = False
    escape_at = -2  # position of a backslash that escapes the next character
    for m in _JSON_TOKENS.finditer(text):
        ch, at = m.group(), m.start()
        if in_string:
            escaped = escape_at == at - 1
            escape_at = at if ch == "\\" and not escaped else -2
            if ch == '"' and not escaped:
                in_string = False
        elif ch == '"':
            in_string = True
            escape_at = -2
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def load_link_json(text: str, param: str, max_chars: int, max_depth: int = LINK_JSON_MAX_DEPTH) -> Any:
    """``json.loads(text)`` for a value that came in a link, refused first when longer than ``max_chars`` or
    nested deeper than ``max_depth``. Raises :class:`LinkStateError` (one line) for every failure."""
    if len(text) > max_chars:
        raise LinkStateError(param, f"it is {len(text):,} characters, over the {max_chars:,} a link may carry "
                                    "(limit: link size)")
    if json_depth(text, max_depth) > max_depth:
        raise LinkStateError(param, f"its JSON nests deeper than {max_depth} levels (limit: link JSON depth)")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise LinkStateError(param, f"it is not valid JSON ({type(e).__name__})") from None


def store_dir() -> pathlib.Path:
    """Where edited and pasted texts are kept by digest: ``$CTE_CACHE_DIR/edits`` or
    ``~/.cache/chat-template-explorer/edits``."""
    base = os.environ.get("CTE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "chat-template-explorer")
    return pathlib.Path(base) / "edits"


#: the edit store's bounds: texts kept at most this long (by last use), at most this many texts and bytes (the
#: least recently used go first), and no text larger than a template may be (core.sources.DEFAULT_MAX_BYTES) —
#: before, every distinct edit a visitor made was written to the server's disk for good
EDIT_TTL_S = 30 * 24 * 3600
EDIT_STORE_MAX_FILES = 2000
EDIT_STORE_MAX_BYTES = 64 * 1024 * 1024
EDIT_MAX_BYTES = 2 * 1024 * 1024


def _prune(d: pathlib.Path, keep: pathlib.Path | None = None) -> None:
    """Delete the store's expired texts, then the least recently used until it is within its bounds (``keep``
    stays: the text just written)."""
    import time

    now = time.time()
    entries = []
    with os.scandir(d) as it:
        for e in it:
            if not e.name.endswith(".jinja"):
                continue
            try:
                st_ = e.stat()
            except OSError:
                continue
            entries.append((st_.st_mtime, st_.st_size, e.path))
    entries.sort()
    count, total = len(entries), sum(size for _, size, _ in entries)
    for mtime, size, path in entries:
        expired = now - mtime > EDIT_TTL_S
        if not expired and count <= EDIT_STORE_MAX_FILES and total <= EDIT_STORE_MAX_BYTES:
            break
        if keep is not None and path == str(keep):
            continue
        try:
            os.unlink(path)
        except OSError:
            continue
        count, total = count - 1, total - size


def save_text(text: str) -> str:
    """Keep ``text`` under its digest (:func:`core.digest.source_digest`); returns the digest. The store is
    bounded (:data:`EDIT_TTL_S`, :data:`EDIT_STORE_MAX_FILES`, :data:`EDIT_STORE_MAX_BYTES`; a text over
    :data:`EDIT_MAX_BYTES` is not stored). A failure to write is ignored (the session still has the text; only
    a reload loses it)."""
    digest = source_digest(text)
    data = text.encode("utf-8", "surrogatepass")
    if len(data) > EDIT_MAX_BYTES:
        return digest
    try:
        d = store_dir()
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"{digest}.jinja"
        if p.exists():
            os.utime(p)  # used again: kept longer
        else:
            tmp = d / f".{digest}.{os.getpid()}.tmp"
            tmp.write_bytes(data)
            os.replace(tmp, p)
            _prune(d, keep=p)
    except OSError:
        pass
    return digest


def load_text(digest: str) -> str | None:
    """The text kept under ``digest``, or None (unknown, expired, or not a digest)."""
    import time

    if not _DIGEST.match(digest or ""):
        return None
    p = store_dir() / f"{digest}.jinja"
    try:
        if time.time() - p.stat().st_mtime > EDIT_TTL_S or p.stat().st_size > EDIT_MAX_BYTES:
            return None
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return text if source_digest(text) == digest else None


def source_param(tpl: Any) -> str:
    """The ``src`` value of a :class:`explorer.state.CurrentTemplate`."""
    if tpl.origin == "bundled":
        return f"bundled:{tpl.name}"
    if tpl.origin == "hub" and tpl.path:
        return f"hub:{tpl.path}" + (f"@{tpl.revision}" if tpl.revision else "") + \
            (f"#{tpl.variant}" if tpl.variant and tpl.variant != "default" else "")
    if tpl.origin in ("file", "json", "gguf") and tpl.path and os.path.isfile(tpl.path):
        return f"file:{tpl.path}" + (f"#{tpl.variant}" if tpl.variant and tpl.variant != "default" else "")
    return f"text:{save_text(tpl.source)}"


#: the query parameters that describe a view (:func:`sync` writes them; explorer.resume keeps them per browser)
VIEW_KEYS = ("src", "name", "kind", "fidelity", "ov", "base", "base_kind")

#: source kinds a ``text:`` link names apart from ``edited`` (a reload must not call an upload an edit)
TEXT_KINDS = ("upload", "string")


def text_kind(tpl: Any, src: str) -> str | None:
    """The ``kind`` parameter of a ``text:`` source: its origin when uploaded or pasted, else None (edited)."""
    return tpl.origin if src.startswith("text:") and tpl.origin in TEXT_KINDS else None


def params_for(tpl: Any, fidelity: str, overrides: dict[str, Any]) -> dict[str, str]:
    """The query parameters describing this view."""
    out = {"src": source_param(tpl)}
    if out["src"].startswith("text:"):
        out["name"] = tpl.name
    if kind := text_kind(tpl, out["src"]):
        out["kind"] = kind
    if fidelity != "llama.cpp":
        out["fidelity"] = fidelity
    if overrides:
        out["ov"] = json.dumps(overrides, sort_keys=True, ensure_ascii=False)
    return out


def sync(tpl: Any) -> None:
    """Write the current view's parameters into the URL (only the keys this module owns; ``draft`` is kept)."""
    from . import state

    want = params_for(tpl, state.fidelity(), state.overrides_for(tpl))
    base = st.session_state.get("edit_base")
    if tpl.origin == "edited" and base is not None and base.digest != tpl.digest:
        want["base"] = source_param(base)
        if kind := text_kind(base, want["base"]):
            want["base_kind"] = kind
    qp = st.query_params
    for key in VIEW_KEYS:
        if key in want:
            if qp.get(key) != want[key]:
                qp[key] = want[key]
        elif key in qp:
            del qp[key]


def restore() -> Any:
    """The :class:`~explorer.state.CurrentTemplate` the URL names (fidelity and overrides put back into the
    session), or None when the URL names none or it cannot be loaded. What the link asked for and could not get
    (a source that cannot be loaded, an override that does not apply) is kept as a notice for the top of the
    page the link opened (:func:`show_link_notice`); an unusable override is dropped, not carried on."""
    from . import state

    qp = st.query_params
    src = qp.get("src")
    if not src:
        return None
    try:
        tpl = _load(src, qp.get("name"), qp.get("kind"))
    except Exception as e:  # noqa: BLE001 - a stale link shows a message and the default template
        _notice(f"This link's src={_shown(src)} cannot be opened, so the default template "
                f"({state.DEFAULT_BUNDLED}) is shown instead: {_reason(e, src)}")
        return None
    if tpl.origin == "edited" and qp.get("base"):
        try:    # the loaded source the edit started from: Revert and Compare find it again
            st.session_state["edit_base"] = _load(qp["base"], tpl.name, qp.get("base_kind"))
        except Exception as e:  # noqa: BLE001 - the edit itself is restored; the message says what is missing
            _notice(f"This link's base={_shown(qp['base'])} (the source the edit started from) cannot be opened: "
                    f"{_reason(e, qp['base'])}")
    fid = qp.get("fidelity")
    if fid in state.FIDELITIES:
        st.session_state["fidelity"] = fid
    elif fid:
        _notice(f"This link's fidelity={_shown(fid)} was ignored: it is not one of {', '.join(state.FIDELITIES)}, "
                f"so the page shows {st.session_state.get('fidelity', state.FIDELITIES[0])}")
    if qp.get("ov"):
        try:
            ov = load_link_json(qp["ov"], "ov", OV_MAX_CHARS)
            if not isinstance(ov, dict):
                raise LinkStateError("ov", "it is not a JSON object of field paths and values")
        except LinkStateError as e:
            _notice(f"This link's ov={_shown(qp['ov'])} was ignored: {e.reason}")
        else:
            kept, dropped = {}, 0
            for path, value in ov.items():
                problem = override_problem(path, value)
                if problem is None:
                    kept[path] = value
                    continue
                dropped += 1
                if dropped <= NOTICE_MAX_OVERRIDES:
                    _notice(f"This link's override {_shown(path)}={_shown(json.dumps(value, ensure_ascii=False))} "
                            f"was dropped: {problem}")
            if dropped > NOTICE_MAX_OVERRIDES:
                _notice(f"This link's ov=… had {dropped - NOTICE_MAX_OVERRIDES} more overrides that were dropped.")
            if kept:
                st.session_state.setdefault("overrides", {})[tpl.digest] = kept
    return tpl


# ------------------------------------------------------------------------------------ link notices

#: session key of what a link asked for and did not get: ``{"messages": [...], "page": …, "digest": …}``
NOTICE_KEY = "link_notice"
#: characters of a ``text:`` link's display name (``name=``): a file name's limit on common file systems
LINK_NAME_MAX_CHARS = 255
#: characters of a link's value repeated in a notice (a hostile link may be kilobytes long)
NOTICE_VALUE_CHARS = 120
#: dropped overrides named one line each; the rest are counted in one line (a 16 KB ``ov`` holds thousands)
NOTICE_MAX_OVERRIDES = 5


def _shown(value: str) -> str:
    """A link's value as a notice repeats it: cut to :data:`NOTICE_VALUE_CHARS` (escaped when shown)."""
    value = str(value)
    return value if len(value) <= NOTICE_VALUE_CHARS else value[:NOTICE_VALUE_CHARS] + "…"


def _reason(err: BaseException, src: str) -> str:
    """``err`` as a notice says it. A load error names what it could not load — the ``src`` value after its kind,
    without its ``#variant`` — in full: cut like the value itself (a 6 KB link once filled the page's top)."""
    text = str(err) if isinstance(err, ChatTemplateExplorerError) else f"{type(err).__name__}: {err}"
    rest = src.partition(":")[2]
    for part in (src, rest, rest.partition("#")[0]):
        if len(part) > NOTICE_VALUE_CHARS:
            text = text.replace(part, _shown(part))
    return text


def _notice(message: str) -> None:
    st.session_state.setdefault(NOTICE_KEY, {"messages": [], "page": None, "digest": None})["messages"].append(
        message)


def override_problem(path: Any, value: Any) -> str | None:
    """Why ``path`` = ``value`` cannot be an override of any analysis (an unknown field path, a value of the
    wrong type or outside its enum), or None when it can. Checked on an empty analysis: every analysis has the
    same fields, so no template is analysed for this."""
    from core.analysis.analyzer import apply_overrides
    from core.analysis.result import TemplateAnalysis

    if not isinstance(path, str):
        return "an override's field path must be a string"
    try:
        apply_overrides("link", TemplateAnalysis(), {path: value})
    except ChatTemplateExplorerError as e:
        return getattr(e, "message", None) or str(e)
    return None


def show_link_notice(page: str) -> None:
    """At the top of the page a link opened (``page``: its URL path): what the link asked for and did not get,
    one escaped line each. Shown on that page's reruns while its template is current; gone once the visitor
    moves to another page or template."""
    from . import state
    from .components.text import md

    notice = st.session_state.get(NOTICE_KEY)
    if not notice:
        return
    tpl = st.session_state.get("template")
    digest = tpl.digest if tpl is not None else None
    if notice["page"] is None:
        notice["page"], notice["digest"] = page, digest
    elif (notice["page"], notice["digest"]) != (page, digest):
        del st.session_state[NOTICE_KEY]
        return
    for message in notice["messages"]:
        st.error(md(state.for_visitor(message)))


def _load(src: str, name: str | None, origin: str | None = None) -> Any:
    """The template a ``src`` value names (``name``: display name of ``text:`` sources, ``origin``: their source
    kind when not edited, one of :data:`TEXT_KINDS`; any other value is ignored). Raises the load errors."""
    from core.errors import TemplateLoadError

    from . import state

    kind, _, rest = src.partition(":")
    if kind == "bundled":
        tpl = state.load_bundled(rest)
    elif kind == "hub":  # Hub only: never read as a server path
        rest, _, variant = rest.partition("#")
        repo, _, rev = rest.partition("@")
        tpl = state.load_visitor_hub(repo, variant or None, revision=rev or None)
    elif kind == "file":  # the serving policy's rule: off by default, else inside the allowed folders
        path, _, variant = rest.partition("#")
        tpl = state.load_visitor_path(path, variant or None)
    elif kind == "text":
        text = load_text(rest)
        if text is None:
            raise TemplateLoadError(f"text:{rest}", "this link names edited text that this server does not keep")
        if name and len(name) > LINK_NAME_MAX_CHARS:  # every page and the sidebar show it
            _notice(f"This link's name={_shown(name)} was cut to {LINK_NAME_MAX_CHARS} characters (a file name's "
                    "limit)")
            name = name[:LINK_NAME_MAX_CHARS] + "…"
        if origin in TEXT_KINDS:
            shown = name or f"{origin}-{rest[:8]}.jinja"
            tpl = state.CurrentTemplate(shown, text, {"default": text}, "default", origin,
                                        shown if origin == "upload" else None)
        else:
            tpl = state.from_edit(None, text, name or f"edited-{rest[:8]}.jinja")
    else:
        raise TemplateLoadError(src, "a link's src must start with bundled:, hub:, file: or text:")
    return tpl


# ------------------------------------------------------------------------------------ Explain permalink

#: the Explain page's request and model output, inline: ``x`` = base64url (no padding) of zlib-compressed
#: JSON ``{"r": request, "o": output}``; longer than this many characters and no link is made (the page offers
#: the reproducer download instead) — browsers and proxies cut URLs of a few kilobytes
EXPLAIN_PARAM = "x"
EXPLAIN_MAX_CHARS = 4000


def encode_explain(request: dict[str, Any], output: str) -> str:
    """The ``x`` value for ``request`` (a :func:`explorer.state.request_dict`) and ``output``."""
    import base64
    import zlib

    # the request as given: its key order is meaningful to a template (the order it renders a tool's
    # parameters in), so the link reopens the request the command line would read
    raw = json.dumps({"r": request, "o": output}, ensure_ascii=False, separators=(",", ":"))
    return base64.urlsafe_b64encode(zlib.compress(raw.encode("utf-8"), 9)).decode("ascii").rstrip("=")


#: a link's ``x`` longer than this is not one this app wrote (it writes at most :data:`EXPLAIN_MAX_CHARS`)
EXPLAIN_MAX_PARAM_CHARS = 4 * EXPLAIN_MAX_CHARS
#: what an ``x`` may decompress to: a request and an output of the demo's 256 KB text caps, with room to spare (a
#: 408 KB crafted ``x`` once decompressed to 300 MB)
EXPLAIN_MAX_JSON_BYTES = 1 << 20


def read_explain(value: str) -> tuple[dict[str, Any], str]:
    """``(request, output)`` of an ``x`` value. Refused before any large allocation: a value longer than
    :data:`EXPLAIN_MAX_PARAM_CHARS`, bad base64, a stream that decompresses past :data:`EXPLAIN_MAX_JSON_BYTES`
    (decompression stops at the cap), JSON nested deeper than :data:`LINK_JSON_MAX_DEPTH`, or the wrong shape.
    Raises :class:`LinkStateError` (one line naming the limit)."""
    import base64
    import binascii
    import zlib

    if len(value) > EXPLAIN_MAX_PARAM_CHARS:
        raise LinkStateError(EXPLAIN_PARAM, f"it is {len(value):,} characters, over the {EXPLAIN_MAX_PARAM_CHARS:,} "
                                            "this app writes (limit: link size)")
    if not re.fullmatch(r"[A-Za-z0-9_-]*", value):
        raise LinkStateError(EXPLAIN_PARAM, "it is not base64url text (damaged or not made by this app)")
    try:
        packed = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        raise LinkStateError(EXPLAIN_PARAM, "it is not base64url text (damaged or not made by this app)") from None
    inflate = zlib.decompressobj()
    try:
        raw = inflate.decompress(packed, EXPLAIN_MAX_JSON_BYTES + 1)  # max_length: never more than the cap
    except zlib.error:
        raise LinkStateError(EXPLAIN_PARAM, "its compressed data is damaged") from None
    if len(raw) > EXPLAIN_MAX_JSON_BYTES or inflate.unconsumed_tail:
        raise LinkStateError(EXPLAIN_PARAM, f"it decompresses to more than {EXPLAIN_MAX_JSON_BYTES // 2**20} MB "
                                            "(limit: link size)")
    if not inflate.eof:
        raise LinkStateError(EXPLAIN_PARAM, "its compressed data is cut off (damaged link)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise LinkStateError(EXPLAIN_PARAM, "it does not hold UTF-8 text") from None
    data = load_link_json(text, EXPLAIN_PARAM, EXPLAIN_MAX_JSON_BYTES)
    if not (isinstance(data, dict) and isinstance(data.get("r"), dict) and isinstance(data.get("o"), str)):
        raise LinkStateError(EXPLAIN_PARAM, "it does not hold a request and an output")
    return data["r"], data["o"]


def decode_explain(value: str) -> tuple[dict[str, Any], str] | None:
    """``(request, output)`` of an ``x`` value, or None when it is not one (:func:`read_explain` says why)."""
    try:
        return read_explain(value)
    except LinkStateError:
        return None


def restore_explain() -> bool:
    """Put the request and output an ``x`` parameter names into the Playground's settings (once per value, so
    later edits stay); True when it did."""
    value = st.query_params.get(EXPLAIN_PARAM)
    if not value or st.session_state.get("_explain_restored") == value:
        return False
    st.session_state["_explain_restored"] = value
    try:
        req, output = read_explain(value)
    except LinkStateError as e:
        from . import state

        state.show_error(e)  # here, on the page: the sidebar was drawn before this page read the link
        return False
    ss = st.session_state
    ss["in_output"] = output
    ss["in_messages"] = json.dumps(req.get("messages") or [], indent=2, ensure_ascii=False)
    ss["in_tools"] = json.dumps(req["tools"], indent=2, ensure_ascii=False) if req.get("tools") else ""
    ss["in_tool_choice"] = req.get("tool_choice") or "auto"
    ss["in_parallel"] = bool(req.get("parallel_tool_calls"))
    ss["in_reasoning_format"] = req.get("reasoning_format") or "auto"
    flag = req.get("enable_thinking")
    ss["in_enable_thinking"] = None if flag is None else bool(flag)   # unset (null): the template default
    kwargs = req.get("chat_template_kwargs")
    ss["in_kwargs"] = json.dumps(kwargs, ensure_ascii=False) if isinstance(kwargs, dict) and kwargs else ""
    return True


def explain_permalink(request: dict[str, Any], output: str) -> tuple[str, int]:
    """Write ``x`` for this request and output into the URL and return ``(full URL, encoded length)``; when the
    encoded state is longer than :data:`EXPLAIN_MAX_CHARS`, ``x`` is removed and the URL is ``""``."""
    from urllib.parse import urlencode

    value = encode_explain(request, output)
    qp = st.query_params
    if len(value) > EXPLAIN_MAX_CHARS or decode_explain(value) is None:  # (a link that would not open again)
        if EXPLAIN_PARAM in qp:
            del qp[EXPLAIN_PARAM]
        return "", len(value)
    if qp.get(EXPLAIN_PARAM) != value:
        qp[EXPLAIN_PARAM] = value
    st.session_state["_explain_restored"] = value     # this session's own link: nothing to restore
    base = (getattr(st.context, "url", None) or "").split("?")[0] or "http://localhost:8501/explain"
    return base + "?" + urlencode(qp.to_dict()), len(value)
