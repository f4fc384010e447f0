"""Plain-word meanings of the analysis' mode names (``core.analysis.result``'s enums), for the front page's
glossary and for tooltips wherever a mode name is shown (Overview and Edit metrics, Corpus columns)."""

from __future__ import annotations

from typing import Any

# (group, name) -> meaning; group is the metric it belongs to
MODES: dict[tuple[str, str], str] = {
    ("Reasoning", "NONE"): "The template shows no reasoning: everything the model writes before a call is content.",
    ("Reasoning", "TAG_BASED"): "Reasoning sits between a start and an end marker (e.g. <think> … </think>); "
                                "the start may be written by the generation prompt, so only the end appears.",
    ("Reasoning", "TOOLS_ONLY"): "Reasoning is written only in assistant turns that carry tool calls "
                                 "(Command R7B's <|START_THINKING|>).",
    ("Content", "PLAIN"): "The answer is plain text, no markers around it.",
    ("Content", "ALWAYS_WRAPPED"): "The answer always sits between markers (e.g. <|START_RESPONSE|> … "
                                   "<|END_RESPONSE|>).",
    ("Content", "WRAPPED_WITH_REASONING"): "The answer is wrapped in markers only when reasoning is present "
                                           "(Granite 3.3's <response>); set by a workaround, never by the analysis.",
    ("Tool calls", "NONE"): "The template renders no tool calls, so none can be parsed.",
    ("Tool calls", "JSON_NATIVE"): "Each call is a JSON object ({\"name\": …, \"arguments\": {…}}), possibly "
                                   "inside a section marker such as [TOOL_CALLS].",
    ("Tool calls", "TAG_WITH_JSON"): "Each call is marked by tags around the function name, with JSON arguments "
                                     "(<function=get_weather>{…}</function>).",
    ("Tool calls", "TAG_WITH_TAGGED"): "The name and every argument are tags (<parameter=city>Paris</parameter>), "
                                       "values as text.",
    ("Tool calls", "PYTHONIC"): "Calls written as Python (get_weather(city=\"Paris\")); found at improved fidelity "
                                "only.",
}

# what an Overrides mode field holds: its glossary group (the tooltip lists that group's modes), or the words
CALL_ID_POSITIONS = ("Where a tool call's id is written: NONE (not written), PRE_FUNC_NAME (before the function "
                     "name), BETWEEN_FUNC_AND_ARGS (between the name and the arguments), POST_ARGS (after the "
                     "arguments).")
FIELD_GROUPS = {"reasoning.mode": "Reasoning", "content.mode": "Content", "tools.format.mode": "Tool calls"}

TERMS: dict[str, str] = {
    "fidelity": "llama.cpp: exactly what llama.cpp finds and parses (the reference). improved: this tool's named, "
                "documented repairs on top.",
    "marker": "A fixed piece of text the template writes around reasoning, content or calls (<think>, "
              "<tool_call>); the parser uses it to split the model's output.",
    "generation prompt": "The text the template appends for the assistant's turn; the model continues after it, "
                         "so the parser reads it first.",
    "route": "auto-parser: llama.cpp builds the parser from this analysis. special handler: llama.cpp parses "
             "this family with hand-written code.",
    "comparison": "Two renders of the template that differ in one thing (with or without reasoning, one call or "
                  "two); what differs between them is where a marker is found.",
}


def mode_help(group: str, mode: Any = None) -> str:
    """Tooltip text for a metric of ``group`` ("Reasoning", "Content", "Tool calls"): the shown mode's meaning
    first, then the others of the group."""
    value = getattr(mode, "value", mode)
    lines = [f"**{value}**: {MODES[(group, value)]}"] if (group, value) in MODES else []
    lines += [f"{n}: {m}" for (g, n), m in MODES.items() if g == group and n != value]
    return "\n\n".join(lines)


def column_help(group: str) -> str:
    """One-line tooltip for a table column of ``group``'s modes."""
    return "; ".join(f"{n}: {m}" for (g, n), m in MODES.items() if g == group)


def field_help(path: str, mode: Any = None) -> str:
    """Tooltip for an analysis mode field (``reasoning.mode``, ``tools.call_id.pos``, …) showing ``mode``."""
    return mode_help(FIELD_GROUPS[path], mode) if path in FIELD_GROUPS else CALL_ID_POSITIONS
