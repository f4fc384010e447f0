"""Repair ``trailing-end-of-turn`` (:data:`core.chat.repairs.TRAILING_END_OF_TURN`): the end-of-turn and stop
tokens an output may end with that are markup, not content — where the one-shot parse cuts them
(:func:`turn_end_cut`) and how much of a streamed tail to hold back (:func:`turn_end_hold`). A module of its own
because the parser, the stream and the lossless check all read it, and none of them may import the others."""

from __future__ import annotations

from typing import Any, Iterable

FORMAT_STOP_TOKENS: tuple[tuple[str, str], ...] = (
    ("<start_function_call>", "<start_function_response>"),
)
"""(a preserved token that identifies a call format, a stop token of the models of that format that no template
renders after the assistant turn): FunctionGemma stops at <start_function_response>, where the tool's answer
would begin (Google's FunctionGemma docs; its LiteRT metadata lists it beside <end_of_turn> as a stop token)."""

def turn_end_tokens(parser: Any) -> tuple[str, ...]:
    """Repair ``trailing-end-of-turn``: the tokens an output of ``parser`` may end with that are not content,
    longest first — the leading markers of each end-of-turn text the template writes after an assistant turn
    (:func:`core.chat.samples.end_of_turn_candidates`, from the ``turn_end_source`` the pipeline set at
    ``improved``), the parser's stop strings and the call format's stop tokens (:data:`FORMAT_STOP_TOKENS`),
    minus the parser's preserved tokens (markup its grammar reads). Computed once per parser; () when the repair
    is off."""
    cached = getattr(parser, "_turn_end_tokens", None)
    if cached is not None:
        return cached
    source = getattr(parser, "turn_end_source", None)
    if source is None:
        return ()
    from ..diff import SegmentKind, segmentize_markers
    from .samples import end_of_turn_candidates

    template, request, caps = source
    try:
        texts = end_of_turn_candidates(template, request, caps=caps)
    except Exception:   # a template that fails on the probe turns: only the stop strings below
        texts = []
    found: list[str] = []
    for text in texts:
        for seg in segmentize_markers(text.lstrip()):
            if seg.kind is not SegmentKind.MARKER:
                break
            found.append(seg.value)
    found += list(getattr(parser, "additional_stops", None) or [])
    preserved = set(getattr(parser, "preserved_tokens", None) or [])
    found += [stop for marker, stop in FORMAT_STOP_TOKENS if marker in preserved]
    out = tuple(sorted({t for t in found if len(t) >= 3 and t == t.strip() and not any(c.isspace() for c in t)
                        and t not in preserved}, key=lambda t: (-len(t), t)))
    try:
        parser._turn_end_tokens = out
    except AttributeError:
        pass
    return out


def turn_end_cut(tokens: Iterable[str], output: str) -> int:
    """Where the content of ``output`` ends under repair ``trailing-end-of-turn``: the start of the token of
    ``tokens`` that ends it (trailing whitespace allowed), else ``len(output)``."""
    s = output.rstrip()
    for t in tokens:
        if s.endswith(t):
            return len(s) - len(t)
    return len(output)


def turn_end_hold(tokens: Iterable[str], text: str) -> int:
    """How many trailing characters of a streamed field's ``text`` to hold back under ``trailing-end-of-turn``:
    the longest tail that is a start of one of ``tokens``, or such a token followed by whitespace only."""
    best = 0
    s = text.rstrip()
    for t in tokens:
        if s.endswith(t):
            best = max(best, len(text) - len(s) + len(t))
        for k in range(min(len(t) - 1, len(text)), best, -1):
            if text.endswith(t[:k]):
                best = k
                break
    return best
