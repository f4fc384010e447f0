"""Display of lint findings and template comparisons (results of core.lint / core.compare), as text."""

from __future__ import annotations

import json
from typing import Any, Callable

import pandas as pd
import streamlit as st

from .text import md, show_table


def shown_text(value: Any) -> str:
    """JSON text of ``value`` with invisible / bidi characters and control characters made visible (plain spaces
    and line breaks kept, so it reads as JSON)."""
    from core.lint.model import visible

    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)
    return "\n".join(visible(line, None, spaces=False) for line in text.split("\n"))

# Compare's field table in the page's left half: fixed column shares (Streamlit sizes a static table to its
# longest unbreakable cell, and the B column ran off the page), every cell wrapping, anywhere if it must
FIELDS_TABLE_CSS = ("<style>.st-key-cte_fields_table table{table-layout:fixed;width:100%}"
                    ".st-key-cte_fields_table tr>:nth-child(1){width:38%}"
                    ".st-key-cte_fields_table tr>:nth-child(2){width:10%}"
                    ".st-key-cte_fields_table td [data-testid=stMarkdownContainer],.st-key-cte_fields_table td p"
                    "{width:auto !important;overflow-wrap:anywhere !important;white-space:normal !important}</style>")

# what each finding kind checks, in plain words (the metric labels are the ids' first part)
KIND_HELP = {
    "render": "Conversation shapes (system turn, tool results, images, …) that make the template raise.",
    "roundtrip": "An assistant message rendered and parsed back loses something (content, reasoning, a call, its id).",
    "prefix": "A conversation extended by one turn does not start with its previous render (breaks prompt caches "
              "and training masks).",
    "divergence": "transformers-style and llama.cpp-compatible renders of the same conversation differ.",
    "probe": "One of the analysis' probe renders raised.",
    "marker": "Marker hygiene: a marker that is a prefix of another, ordinary text, an instruction, or generated.",
    "time": "The output depends on the date.",
}

SEVERITY_ICON = {"error": ":material/error:", "warning": ":material/warning:", "info": ":material/info:"}


def findings_frame(report: Any) -> pd.DataFrame:
    """One row per finding: severity, id, title, hint."""
    return pd.DataFrame([{"severity": f.severity.value, "id": f.id, "title": f.title, "hint": f.hint}
                         for f in report.findings], columns=["severity", "id", "title", "hint"])


def show_findings(report: Any, *, key: str = "lint") -> None:
    """Metrics by kind, the findings table and each finding's evidence (plain text, whitespace visible)."""
    kinds = report.by_kind()
    cols = st.columns(len(kinds))
    for c, (k, n) in zip(cols, kinds.items()):
        c.metric(k, n, help=KIND_HELP.get(k))
    if report.error:
        from ..visitor import shown

        st.warning(md(shown(report.error)))
    if not report.findings:
        st.success(f"No findings ({report.shapes} conversation shapes rendered).")
        return
    show_table(findings_frame(report), hide_index=True)   # wraps: a hint is a sentence, never cut off
    for f in report.findings:
        with st.expander(f"{f.severity.value} · {f.id}", icon=SEVERITY_ICON.get(f.severity.value)):
            st.markdown(md(f.title))
            for name, text in f.evidence.items():
                st.caption(md(name))
                st.code(text, language=None, wrap_lines=True)
            st.caption(md("Hint: " + f.hint))


def _as_visitor(visitor: str | None, fn: Callable[..., Any], *args: Any) -> Any:
    from core.serving import set_visitor

    set_visitor(visitor)
    return fn(*args)


def corpus_lint(paths: list[str], fidelity: str, progress: Callable[[float, str], None]) -> dict[str, dict[str, Any]]:
    """Lint ``paths`` two at a time, each in a limited worker (:func:`core.isolated_ops.lint_file`); template
    name → row of lint columns (``lint_errors``, ``lint_warnings``, ``lint_info``, ``lint_kinds``, ``lint_ids``).
    ``progress(fraction, text)`` is called as templates finish."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from core.isolated_ops import lint_file
    from core.serving import current_visitor

    visitor = current_visitor()  # the pool's threads work for this run's visitor (its share of the workers)
    reports = []
    with ThreadPoolExecutor(2) as pool:  # the threads only wait on their workers' pipes
        futures = [pool.submit(_as_visitor, visitor, lint_file, p, fidelity) for p in paths]
        for done, f in enumerate(as_completed(futures), 1):
            reports.append(f.result())
            progress(done / len(paths), f"Lint {done}/{len(paths)} · {reports[-1].template}")
    out = {}
    for r in reports:
        sev = [f.severity.value for f in r.findings]
        out[r.template] = {"lint_errors": sev.count("error"), "lint_warnings": sev.count("warning"),
                           "lint_info": sev.count("info"),
                           "lint_kinds": ", ".join(k for k, n in r.by_kind().items() if n),
                           "lint_ids": getattr(r, "error", "") or " ".join(f.id for f in r.findings)}
    return out


def show_comparison(c: Any) -> None:
    """A :class:`core.compare.TemplateComparison`: verdict, fields, render diffs, lint delta, parses."""
    from core.diff import DiffSplit

    from .diff_view import show_diff

    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Parser changes", "yes" if c.parser_changes else "no")
    m2.metric("Analysis fields", len(c.fields))
    m3.metric("Renders differ", len(c.renders))
    m4.metric("Lint +/−", f"+{len(c.lint_added)} / −{len(c.lint_removed)}")
    if c.identical:
        st.info("The two templates are identical.")
    st.subheader("Analysis fields that differ")
    if c.fields:
        # whether the parser changes comes right after the field (it was the fourth column, cut off in the
        # page's left half); values without spaces (marker strings) break anywhere instead of pushing B off
        with st.container(key="cte_fields_table"):
            st.html(FIELDS_TABLE_CSS)
            show_table(pd.DataFrame([{"field": f.path, "changes the parser": "yes" if f.parser else "no (order only)",
                                    "A": shown_text(json.dumps(f.a, ensure_ascii=False)),
                                    "B": shown_text(json.dumps(f.b, ensure_ascii=False))}
                                   for f in c.fields]), hide_index=True)
    else:
        st.caption("None.")
    st.subheader("Comparisons whose renders differ")
    for r in c.renders:
        with st.expander(f"{r.id}: {r.title}"):
            if r.same_diff:   # two equal diffs said nothing: where the renders do differ comes first
                st.caption("The same diff on both sides: the renders differ in the text around it.")
                for part, x, y in r.around():
                    for side, text in (("A", x), ("B", y)):
                        st.caption(f"{part} of {side}")
                        st.code(shown_text(text), language=None, wrap_lines=True)
            for side, split, err in (("A", r.a, r.error_a), ("B", r.b, r.error_b)):
                st.caption(side)
                if split is None:
                    st.code(shown_text(err or ""), language=None, wrap_lines=True)
                else:
                    show_diff(DiffSplit(**split))
    if not c.renders:
        st.caption("None.")
    st.subheader("Lint findings")
    st.markdown(md("Added in B: " + (", ".join(c.lint_added) or "none")))
    st.markdown(md("Removed in B: " + (", ".join(c.lint_removed) or "none")))
    st.subheader("The same outputs, parsed by both")
    for p in c.parses:
        label = (f"output of {p.source.value.upper()} ({p.message} message, thinking "
                 f"{'on' if p.enable_thinking else 'off'}) · " + ("same" if p.same else "DIFFERENT"))
        with st.expander(label, expanded=not p.same):
            st.code(shown_text(p.output), language=None, wrap_lines=True)
            a, b = st.columns(2)
            a.caption("parsed by A")
            a.code(shown_text(p.parsed_a), language="json", wrap_lines=True)
            b.caption("parsed by B")
            b.code(shown_text(p.parsed_b), language="json", wrap_lines=True)
