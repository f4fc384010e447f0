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

    template, request, caps, llama_engine = source
    try:
        texts = end_of_turn_candidates(template, request, caps=caps, llama_engine=llama_engine)
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


RUN_MAX = 256
"""The longest trailing run the repair reads: one or a few stop tokens and a line break are a few dozen characters;
a longer run is the model's text, and bounding the backward scan keeps the one-shot cut and every streaming step
linear (each looks at most this far back)."""


def _run_start(tokens: tuple[str, ...], text: str, partial: bool) -> int:
    """The start of ``text``'s trailing run — a token of ``tokens``, then tokens and whitespace to the end (with
    ``partial``, also a start of a token at the very end, alone or after such a run) — within the last
    :data:`RUN_MAX` characters; ``len(text)`` when there is none."""
    n = len(text)
    lo = max(0, n - RUN_MAX)
    j = n
    if partial:
        for t in tokens:
            for k in range(min(len(t) - 1, n - lo), n - j, -1):
                if text.endswith(t[:k]):
                    j = n - k
                    break
    start = n if j == n else j      # a token's start alone is held, and cut by nothing
    while True:
        k = j
        while k > lo and text[k - 1].isspace():
            k -= 1
        t = next((t for t in tokens if k - len(t) >= lo and text.startswith(t, k - len(t))), None)
        if t is None:
            return start
        j = start = k - len(t)


def turn_end_cut(tokens: Iterable[str], output: str) -> int:
    """Where the content of ``output`` ends under repair ``trailing-end-of-turn``: the start of the trailing run of
    ``tokens`` (one or more, whitespace between and after them allowed, within :data:`RUN_MAX`), else
    ``len(output)``."""
    return _run_start(tuple(tokens), output, False)


def turn_end_hold(tokens: Iterable[str], text: str) -> int:
    """How many trailing characters of a streamed field's ``text`` to hold back under ``trailing-end-of-turn``:
    the trailing run :func:`turn_end_cut` would cut, with a start of a token after it — the same scan, so what the
    stream releases is what the one-shot parse keeps."""
    return len(text) - _run_start(tuple(tokens), text, True)
