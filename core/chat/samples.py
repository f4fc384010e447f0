"""What a model following a template writes for an assistant message: :func:`sample_output` renders the
conversation with the message appended, after the render that ends with the generation prompt, minus the
template's end-of-turn text (:func:`end_of_turn_candidates`). The round trip (:mod:`core.chat.roundtrip`) parses
it back; the pipeline learns from two such samples the turn header a template writes before a plain answer
(:func:`content_turn_header`, improvement ``content-turn-header``)."""

from __future__ import annotations

import copy
import enum
from dataclasses import dataclass, replace
from typing import Any, Mapping

from .. import memo as _memo
from ..diff import SegmentKind, common_prefix_len, common_suffix_len, segmentize_markers
from ..errors import ChatTemplateExplorerError
from ..jinja.template import ChatTemplate
from .request import ChatRequest, Continuation


# ------------------------------------------------------------------------------------------------ sample output

_SENTINELS = ("Q_END_PROBE_ONE_Q", "Z_END_PROBE_TWO_X")  # different last characters: the common suffix of two
# renders that differ only in these starts right after the message text
_NEXT_USER = "N_NEXT_USER_TURN_N"


class Alignment(str, enum.Enum):
    """How the render with the message lines up with the prompt (:class:`SampleOutput`).

    ``PREFIX``: the render starts with the whole prompt (generation prompt included) — the usual case.
    ``PREFIX_IGNORING_WHITESPACE``: it does up to whitespace (the template spaces the turn opening differently
    in the generation prompt and in history); the output starts after the prompt's last non-space character.
    ``PARTS_IN_GENERATION_PROMPT``: the render parts from the prompt inside the generation prompt, or after the
    last user message's text, and the rest of the prompt does not repeat that text (the template writes the
    assistant turn's opening differently, e.g. a generation prompt that adds a preamble or opens a reasoning
    block the rendered turn lacks); the output starts where they part.
    ``GENERATION_PROMPT_FOUND``: the conversation itself renders differently once the assistant turn exists
    (e.g. a system block moved after the last turn), but the generation prompt occurs in the render at or after
    the parting point; the output starts after it.
    ``CONVERSATION_DIFFERS``: neither — the render cannot be lined up with the prompt; the output starts where
    they part and is not what a model would write.
    """

    PREFIX = "prefix"
    PREFIX_IGNORING_WHITESPACE = "prefix_ignoring_whitespace"
    PARTS_IN_GENERATION_PROMPT = "parts_in_generation_prompt"
    GENERATION_PROMPT_FOUND = "generation_prompt_found"
    CONVERSATION_DIFFERS = "conversation_differs"


@dataclass
class SampleOutput:
    """How :func:`sample_output` cut a render.

    ``output``: the model text (after the prompt + generation prompt, end of turn removed); ``prompt``: the
    render that ends with the generation prompt; ``generation_prompt``: that generation prompt; ``full``: the
    render with the message appended (no generation prompt); ``alignment``: :class:`Alignment`;
    ``end_of_turn``: the candidate end-of-turn texts derived from renders (see :func:`end_of_turn_candidates`);
    ``eot_removed``: the text actually removed from the end of the output.
    """

    output: str
    prompt: str
    generation_prompt: str
    full: str
    alignment: Alignment
    end_of_turn: list[str]
    eot_removed: str

    @property
    def prompt_is_prefix(self) -> bool:
        """True if the prompt is a prefix of the full render (exactly, or ignoring whitespace)."""
        return self.alignment in (Alignment.PREFIX, Alignment.PREFIX_IGNORING_WHITESPACE)


def _as_request(request: ChatRequest | Mapping[str, Any]) -> ChatRequest:
    if isinstance(request, ChatRequest):
        return request
    return ChatRequest.from_dict(dict(request))


def with_messages(request: ChatRequest, *messages: dict[str, Any]) -> ChatRequest:
    """A copy of ``request`` with ``messages`` appended and no continuation of the last one."""
    r = copy.copy(request)
    r.messages = [*request.messages, *messages]
    r.continue_final_message = Continuation.NONE
    return r


def _boundaries(text: str) -> set[int]:
    """Positions in ``text`` where a cut does not split a marker or a word: segment borders of
    :func:`core.diff.segmentize_markers`, and any position next to whitespace."""
    out = {0, len(text)}
    pos = 0
    for seg in segmentize_markers(text):
        pos += len(seg.value)
        out.add(pos)
    for i, ch in enumerate(text):
        if ch.isspace():
            out.add(i)
            out.add(i + 1)
    return out


def end_of_turn_candidates(template: ChatTemplate, request: ChatRequest | Mapping[str, Any], *,
                           caps: Any = None, full: str | None = None, llama_engine: bool = True) -> list[str]:
    """Texts the template writes after an assistant turn, derived from renders (no per-model list), in the
    order :func:`sample_output` tries them:

    1. the *trailer*: the common suffix of ``full`` (the render ending with the assistant message under test)
       and the render ending with a content-only assistant message, cut so it starts at a marker or word
       border — what the template writes after any final assistant turn (``<|im_end|>\n``, or a system block
       some templates append after the conversation);
    2. the *final end*: the common suffix of two renders ending with content-only assistant messages whose
       texts differ (and end in different characters) — the end-of-turn after a final answer;
    3. the *turn separator*: the text between a content-only assistant message and a following user message
       (end of turn + next turn's opening) — for templates that treat a final assistant message as a prefill
       and write its end only when another turn follows.

    Empty candidates are dropped. Raises :class:`~core.errors.TemplateRenderError` when the template fails on
    the probe messages.
    """
    from .prompt import prepare_request, render_prompt

    req = _as_request(request)

    def render(*msgs: dict[str, Any]) -> str:
        prep = replace(prepare_request(template, with_messages(req, *msgs), caps=caps), llama_engine=llama_engine)
        return render_prompt(prep, add_generation_prompt=False)

    finals = [render({"role": "assistant", "content": s}) for s in _SENTINELS]
    out: list[str] = []
    if full is not None:
        n = common_suffix_len(full, finals[0])
        if n:
            cut = min((b for b in _boundaries(full) if b >= len(full) - n), default=len(full))
            if full[cut:]:
                out.append(full[cut:])
    n = common_suffix_len(*finals)
    i = finals[0].rfind(_SENTINELS[0])
    if i >= 0:  # never longer than what follows the message (a template may repeat the message later)
        n = min(n, len(finals[0]) - i - len(_SENTINELS[0]))
    if n:
        out.append(finals[0][len(finals[0]) - n:])
    try:
        between = render({"role": "assistant", "content": _SENTINELS[0]}, {"role": "user", "content": _NEXT_USER})
    except ChatTemplateExplorerError:
        between = ""
    i, j = between.rfind(_SENTINELS[0]), between.rfind(_NEXT_USER)
    if 0 <= i < j:
        out.append(between[i + len(_SENTINELS[0]):j])
    seen: list[str] = []
    for c in out:
        if c and c not in seen:
            seen.append(c)
    return seen


def strip_end_of_turn(output: str, candidates: list[str]) -> str:
    """``output`` without the end-of-turn text at its end.

    The first candidate (the trailer common to every final turn) is removed when ``output`` ends with it.
    Then, for the other candidates in order, the longest start of the candidate that ends at a marker or word
    border and that ``output`` ends with (whitespace around it ignored) is removed, once: a final turn may
    carry only the end-of-turn part of a turn separator. Whitespace is never significant here because the
    comparison strips outer whitespace.
    """
    out = output
    rest = list(candidates)
    if rest and out.endswith(rest[0]):
        out = out[: len(out) - len(rest[0])]
        rest = rest[1:]
    trimmed = out.rstrip()
    for c in rest:
        for b in sorted(_boundaries(c), reverse=True):
            piece = c[:b].strip()
            if piece and trimmed.endswith(piece):
                return trimmed[: len(trimmed) - len(piece)]
    return out


def _match_ignoring_whitespace(prompt: str, full: str, i: int) -> int | None:
    """When ``full[i:]`` starts with ``prompt[i:]`` up to whitespace (the same non-space characters in the same
    order, whitespace anywhere), the position in ``full`` right after the last of them; else None. Some
    templates space the assistant turn's opening differently in the generation prompt and in history."""
    rest = prompt[i:]
    if not rest.strip():
        return None
    j = i
    for ch in rest:
        if ch.isspace():
            continue
        while j < len(full) and full[j].isspace():
            j += 1
        if j >= len(full) or full[j] != ch:
            return None
        j += 1
    return j


def _last_user_text(request: ChatRequest) -> str:
    """Text of the conversation's last user message (stripped), "" when none."""
    from .prompt import message_text

    users = [m for m in request.messages if m.get("role") == "user"]
    return message_text(users[-1]).strip() if users else ""


def _marker_start(text: str, i: int) -> int:
    """``i``, or the start of the marker of ``text`` that ``i`` falls inside (``<`` of ``<tool_call>``): renders
    that part inside the generation prompt may share a marker's first characters with it (KAT-V1's prompt ends
    ``<judge>``, its rendered turn starts ``<tool_call>``), and a model writes the whole marker."""
    pos = 0
    for seg in segmentize_markers(text):
        end = pos + len(seg.value)
        if seg.kind == SegmentKind.MARKER and pos < i < end:
            return pos
        if end >= i:
            break
        pos = end
    return i


def sample_output_details(template: ChatTemplate, request: ChatRequest | Mapping[str, Any],
                          message: dict[str, Any], *, llama_engine: bool = True, caps: Any = None
                          ) -> SampleOutput:
    """:func:`sample_output` with the intermediate renders (:class:`SampleOutput`).

    Renders go through :mod:`core.chat.prompt` (llama.cpp's request path: canonical messages, caps
    normalisation, message workarounds). ``request``'s messages are the conversation before ``message``.
    ``llama_engine=False`` renders in the transformers dialect (improvement ``transformers-dialect``: what the
    parser's prepared request says), ``caps`` are the caps to prepare with (default: probed). Raises
    :class:`~core.errors.TemplateRenderError` when the template fails, :class:`~core.errors.RequestError` for a
    malformed request or message.
    """
    from .prompt import generation_prompt, prepare_request, render_prompt

    req = _as_request(request)
    prep = replace(prepare_request(template, req, caps=caps), llama_engine=llama_engine)
    prompt = render_prompt(prep, add_generation_prompt=True)
    gp = generation_prompt(prep)
    full = render_prompt(replace(prepare_request(template, with_messages(req, message), caps=prep.caps),
                                 llama_engine=llama_engine), add_generation_prompt=False)
    i = common_prefix_len(full, prompt)
    user_text = _last_user_text(req)
    rest_has_user = bool(user_text) and user_text in prompt[i:]
    ws_end = _match_ignoring_whitespace(prompt, full, i)
    if i == len(prompt):
        alignment, start = Alignment.PREFIX, i
    elif ws_end is not None:
        alignment, start = Alignment.PREFIX_IGNORING_WHITESPACE, ws_end
    elif i >= len(prompt) - len(gp) and not rest_has_user:
        alignment, start = Alignment.PARTS_IN_GENERATION_PROMPT, _marker_start(full, i)
    else:
        k = full.find(gp, max(0, i - len(gp))) if gp.strip() else -1
        if k >= 0:
            alignment, start = Alignment.GENERATION_PROMPT_FOUND, k + len(gp)
        elif user_text and not rest_has_user and 0 <= prompt.rfind(user_text) <= i - len(user_text):
            alignment, start = Alignment.PARTS_IN_GENERATION_PROMPT, i
        else:
            alignment, start = Alignment.CONVERSATION_DIFFERS, i
    out = full[start:]
    eot = end_of_turn_candidates(template, req, caps=prep.caps, full=full, llama_engine=llama_engine)
    stripped = strip_end_of_turn(out, eot)
    return SampleOutput(output=stripped, prompt=prompt, generation_prompt=gp, full=full, alignment=alignment,
                        end_of_turn=eot, eot_removed=out[len(stripped):])


def sample_output(template: ChatTemplate, request: ChatRequest | Mapping[str, Any],
                  message: dict[str, Any]) -> str:
    """What a model following ``template`` would generate for the assistant ``message`` (OpenAI shape) after
    the conversation of ``request`` (a :class:`ChatRequest` or its dict form; its tools, ``enable_thinking``
    and ``chat_template_kwargs`` apply).

    The conversation is rendered with the generation prompt (the model's prompt) and with ``message``
    appended (no generation prompt); the output is the second render after the first (see
    :class:`Alignment` when the second does not simply extend the first), with the end-of-turn text removed
    from its end — generation stops on the end-of-turn token, so the model never writes it. The end-of-turn
    text is derived from renders of probe messages (:func:`end_of_turn_candidates`), not from a list of model
    tokens. A tool-call turn that ends with a different token than a content turn (Llama 3.1's ``<|eom_id|>``
    vs ``<|eot_id|>``) cannot be told apart from a closing marker by renders; that token stays in the output.

    Raises :class:`~core.errors.TemplateRenderError` / :class:`~core.errors.RequestError`.
    """
    return sample_output_details(template, request, message).output


# ------------------------------------------------------------------------------------------------ turn header

_HEADER_PROBES = ("Alpha answer one.", "Zulu reply two!")
_content_header_cache: dict[tuple[str, str], str] = {}
_memo.register_cache("content turn headers", _content_header_cache.clear)  # see core.memo.clear_caches


def content_turn_header(template: ChatTemplate, request: ChatRequest, analysis: Any, prompt: str | None = None) -> str:
    """Improvement ``content-turn-header`` (:mod:`core.analysis.fidelity`): the text H the template writes
    between the generation prompt and a plain answer, learned by rendering two answers that share no first
    character after ``request``'s conversation: H is the common start of both outputs, whitespace after it
    dropped. "" when a render does not extend the prompt, H is blank or does not end right before the answer,
    the analysis has a content start marker (the parser already reads it), or H holds a reasoning or tool-call
    marker. Hunyuan A13B (prompt ends ``<|extra_0|>``, turns render ``助手：`` + content) -> ``"助手："``.
    Cached per template source and ``prompt`` (the request's rendered prompt; rendered when None); never
    raises."""
    if prompt is None:
        try:
            prompt = render_prompt_for(template, request)
        except Exception:  # noqa: BLE001 - no header when the template cannot render the request
            return ""
    key = (template.source, prompt)
    if key not in _content_header_cache:
        if len(_content_header_cache) > 256:
            _content_header_cache.clear()
        _content_header_cache[key] = _learn_content_header(template, request, analysis)
    return _content_header_cache[key]


def render_prompt_for(template: ChatTemplate, request: ChatRequest) -> str:
    """The prompt the request renders (generation prompt included)."""
    from .prompt import prepare_request, render_prompt

    return render_prompt(prepare_request(template, request), add_generation_prompt=True)


def _learn_content_header(template: ChatTemplate, request: ChatRequest, analysis: Any) -> str:
    if analysis.content.start:
        return ""
    outs = []
    for text in _HEADER_PROBES:
        try:
            d = sample_output_details(template, request, {"role": "assistant", "content": text})
        except Exception:  # noqa: BLE001 - a template that raises has no learnable header
            return ""
        if not d.prompt_is_prefix:
            return ""
        outs.append((d.output, text))
    (a, ta), (b, tb) = outs
    header = a[:common_prefix_len(a, b)].rstrip()
    if not header.strip() or not a[len(header):].lstrip().startswith(ta) \
            or not b[len(header):].lstrip().startswith(tb):
        return ""
    r, f = analysis.reasoning, analysis.tools.format
    markers = [r.start, r.end, f.section_start, f.per_call_start, analysis.tools.function.name_prefix]
    if any(m and m.strip() and m.strip() in header for m in markers):
        return ""
    return header
