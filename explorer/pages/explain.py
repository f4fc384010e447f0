"""Explain: where every character of a model output went, where the parse stopped, why, and a fix that was
re-parsed before it is offered (``core.explain``). The output and request settings are the Playground's; the
analysis overrides, disabled workarounds and fidelity are the session's. One click applies a fix (an override
lands on the Overrides page, a request change in the Playground settings, a fidelity in the sidebar). A
Permalink (``x`` in the query string, see ``explorer.urlstate``) reopens the same explanation."""

import html
import json

import streamlit as st

from core.explain.call_relation import CallRelation, relation_lines
from core.explain.model import part_of
from core.explain.trace_routes import REPLAY_STEPS, REPLAY_WINDOW, replay_chunk
from core.explain.present import (STOP_SEEN_ABOVE, Gap, budget_words, expected_words, finding_head, fix_expected_words,
                                  focus_points, no_fix_words, plain_paths, repair_lines, shown_evidence, window_spans)
from explorer import state, urlstate
from explorer.components import serving
from explorer.components.spans import NEW_OUTLINE, legend_html, panel_html, span_style, stop_html
from explorer.components.text import (md, md_code, show_invisible_notice, show_json, split_rule_path, visible_html,
                                       visible_json_text, visible_text)

st.title("Explain")
tpl = state.attempt(state.current)
if tpl is None:
    st.stop()

urlstate.restore_explain()      # a permalink (x=…) puts its request and output back first
state.default("in_output", state.sample_output(tpl))

MESSAGE_CLIP = 2000     # characters of a message's string shown (a huge output's content), the count of the rest said


def _apply_fix(fix: dict) -> None:
    """One click: put the fix's change where the explorer keeps it, and go where it shows. A change carries
    ``fidelity`` beside its other parts when its re-parse needed that fidelity (a request edit or a server setting
    re-parsed at improved): the session's fidelity is set too, so the click gives the message the fix promised."""
    change = fix["change"]
    st.session_state["explain_applied"] = fix["description"]
    if "fidelity" in change and len(change) > 1:
        st.session_state["fidelity"] = change["fidelity"]
        _apply_fix({**fix, "change": {k: v for k, v in change.items() if k != "fidelity"}})
        st.session_state["explain_applied"] = fix["description"] + f" — at {change['fidelity']} fidelity (switched)"
        return
    if "overrides" in change:
        ov = state.overrides_for(tpl)
        ov.update(change["overrides"])
        # provenance for the Overrides page: which explanation proposed these overrides
        st.session_state[f"ov_provenance_{tpl.digest}"] = {"source": "explain", "fix": fix["description"],
                                                           "fields": sorted(change["overrides"])}
        st.session_state["explain_goto"] = "explorer/pages/overrides.py"
    elif "fidelity" in change:
        st.session_state["fidelity"] = change["fidelity"]
    elif "request" in change:
        req = change["request"]
        if "enable_thinking" in req:
            flag = req["enable_thinking"]
            st.session_state["in_enable_thinking"] = None if flag is None else bool(flag)
        if "tools" in req:
            st.session_state["in_tools"] = json.dumps(req["tools"], indent=2, ensure_ascii=False)
        if "tool_choice" in req:
            st.session_state["in_tool_choice"] = req["tool_choice"]
        if "parallel_tool_calls" in req:
            st.session_state["in_parallel"] = bool(req["parallel_tool_calls"])
        if "reasoning_format" in req:
            st.session_state["in_reasoning_format"] = req["reasoning_format"]
        if "chat_template_kwargs" in req:
            kw = req["chat_template_kwargs"]
            st.session_state["in_kwargs"] = json.dumps(kw, ensure_ascii=False) if kw else ""


def _only_key() -> str:
    return f"explain_only_repairs_{tpl.digest}"


def _apply_triage_fix(fix: dict) -> None:
    """One click for a ranked fix of the triage: a repair is switched on alone (this page then explains at
    improved fidelity with only that repair; the Playground keeps its fidelity), a request edit lands in the
    Playground settings, a server setting puts the output it would give in the box; overrides and fidelity go
    where :func:`_apply_fix` puts them. A template patch is a download (the template is not edited in place)."""
    change = fix["change"]
    if "repairs" in change:
        if "request" in change:      # a repair together with a request setting: the setting lands as usual
            _apply_fix({**fix, "change": {"request": change["request"]}})
        st.session_state[_only_key()] = list(change["repairs"])
        st.session_state["explain_applied"] = (fix["description"] + " — the explanation below now parses at "
                                               "improved fidelity with only this repair on")
    elif "template_patch" in change:
        # the patched template becomes the current one (an edit of it, as the Edit page makes): this page re-parses
        # the output with it; the fidelity it was re-parsed at goes with it
        state.set_current(state.from_edit(tpl, _patched(change["template_patch"])))
        if change.get("fidelity"):
            st.session_state["fidelity"] = change["fidelity"]
        st.session_state["explain_applied"] = fix["description"] + " — the patched template is now the current one"
    elif "overrides" in change and len(change) == 1:
        # the override lands on the Overrides page (with its provenance), and this page shows what it gives
        _apply_fix(fix)
        st.session_state.pop("explain_goto", None)
        st.session_state["explain_applied"] = fix["description"] + " — it is on the Overrides page"
    elif "server" in change:
        st.session_state["in_output"] = change["output"]
        st.session_state["explain_applied"] = fix["description"]
        if change.get("fidelity"):   # the restored output re-parsed only at that fidelity: apply it there
            st.session_state["fidelity"] = change["fidelity"]
            st.session_state["explain_applied"] += f" — at {change['fidelity']} fidelity (switched)"
    else:
        _apply_fix(fix)


def _patched(patch: list) -> str:
    """The current template's source with a template patch's ``[old, new]`` replacements made."""
    patched = tpl.source
    for old, new in patch:
        patched = patched.replace(old, new)
    return patched


def _needs_fidelity(fix: dict) -> str:
    """What a ranked fix's line says when its re-parse needed another fidelity than this page's: the fidelity
    goes with it (its one click switches it; a downloaded template patch is to be used there). ``""`` otherwise —
    a repair switched on alone says improved in its own words."""
    want = fix["change"].get("fidelity")
    if not want or want == state.fidelity() or fix["kind"] == "fidelity":
        return ""
    if "template_patch" in fix["change"]:
        return md(f" — re-parsed at {want} fidelity: use the patched template there")
    return md(f" — re-parsed at {want} fidelity: its one click switches to {want}")


goto = st.session_state.pop("explain_goto", None)
if goto:
    st.switch_page(goto)

fits = serving.capped_text_area("Model output (shared with the Playground)", "in_output",
                                serving.policy().limits.max_text_chars, "model output", height=160)
request = state.attempt(state.request_dict)
if request is None or not fits:
    st.stop()
with st.expander("Request (edit it on the Playground)"):
    show_json(request)


@st.cache_data(max_entries=32, show_spinner="Explaining the parse…")
def _explain(source: str, name: str, request_json: str, output: str, fidelity: str, overrides_json: str,
             disabled: tuple, expect_json: str = "", only_repairs: tuple | None = None) -> dict:
    from core.isolated_ops import explain_view  # in a limited worker: no template code in the server

    return explain_view(source, name, request_json, output, fidelity, overrides_json, disabled, expect_json,
                        only_repairs)


def _expect_problem() -> str:
    """Why the expected message typed in the Reproducer box cannot be used ("" when it is empty or usable)."""
    from core.explain.reproducer import check_expected
    from core.errors import ExpectedMessageError

    raw = (st.session_state.get("explain_expect") or "").strip()
    if not raw:
        return ""
    try:
        check_expected(json.loads(raw), "the Reproducer box")
    except ValueError as e:
        return f"it is not JSON ({e})"
    except RecursionError:  # Python's JSON reader recurses once per level
        return "it nests too deeply to read as JSON"
    except ExpectedMessageError as e:
        return f"field {e.field}: {e.message}" if e.field else e.message
    return ""


def _expect_json() -> str:
    """The expected message typed in the Reproducer box, as JSON text ("" when empty or not usable, see
    :func:`_expect_problem`)."""
    raw = (st.session_state.get("explain_expect") or "").strip()
    if not raw or _expect_problem():
        return ""
    return json.dumps(json.loads(raw), ensure_ascii=False)


only = st.session_state.get(_only_key())
# the request in its own key order (a template renders a tool's parameters in it), as the command line reads it
ex = state.attempt(_explain, tpl.source, tpl.name, json.dumps(request, ensure_ascii=False),
                   st.session_state.get("in_output", ""), state.fidelity(),
                   json.dumps(state.overrides_for(tpl), sort_keys=True), tuple(state.disabled_for(tpl)),
                   _expect_json(), tuple(only) if only is not None else None)
if ex is None:
    st.stop()
if only is not None:
    st.info(md(f"Switched on alone: the repair(s) {', '.join(only)} — this page parses at improved fidelity with "
               "only these repairs on (the Playground keeps its own fidelity)."))
    st.button("Switch the repair off", key="explain_only_off", on_click=st.session_state.pop, args=(_only_key(), None))

applied = st.session_state.pop("explain_applied", None)
if applied:
    # the click re-parsed the output with the change: the message it gives now, right where the click was seen
    st.success(md_code(f"Applied: {applied}"))
    st.caption("The message now (the output re-parsed with the fix):")
    show_json(ex["message"], clip=MESSAGE_CLIP)

tg = ex.get("triage") or {}
st.markdown(md(f"Route {ex['route']} · fidelity {ex['fidelity']} · parse {ex['verdict_text']}"))
if ex.get("gives_expected") is not None:     # an expected message in the Reproducer box
    st.markdown(md_code(expected_words(ex["gives_expected"], ex.get("expected_difference"))))
if ex["entry"] == "no-parser":   # the template does not render: why, and what would (improvement transformers-dialect)
    for note in ex.get("notes") or []:
        st.warning(md(note))

# ---------------------------------------------------------------- triage: the mistake, nearest output, ranked fixes

def _no_fix_caption(tg: dict) -> str:
    """The triage's no-fix line as a caption (a sentence: its first letter capital)."""
    said = no_fix_words(tg.get("no_fix") or "", bool(tg.get("budget_hit")))
    return md_code(said[:1].upper() + said[1:])


# the model wrote nothing: the triage's one sentence and why nothing of ours helps, no fixes below
wrote_nothing = ex["answer"]["from"] == "triage" and ex["answer"]["name"] == "NONE"
if wrote_nothing:
    st.subheader("What the model did")
    st.markdown(md(tg["sentence"]))
    st.caption(_no_fix_caption(tg))
if tg.get("mistake") not in (None, "NONE"):
    st.subheader("What the model did")
    points = [ex["stop"], ex["truncated"]]
    st.markdown(f"**{md(tg['mistake_text'])}** — " + md_code(plain_paths(tg["sentence"], points)))
    if tg.get("budget_hit"):
        st.caption(md(budget_words(tg.get("searched") or 0, tg.get("budget_limit") or "",
                                   bool((ex.get("message") or {}).get("tool_calls")))))
    near = tg.get("nearest")
    if near:
        st.caption(md(f"Nearest accepted output: {len(near['edits'])} edit(s)"
                      + (f"; the repair {near['repair']} already accepts it" if near["repair"] else "")))
        st.code(visible_text(near["diff"]), language="diff", wrap_lines=True)
    st.markdown("**Fixes, ranked** (each re-parsed before it is offered)")
    if not tg.get("fixes"):
        st.caption(_no_fix_caption(tg))
    for i, fx in enumerate(tg.get("fixes") or []):
        said = "" if fx.get("gives_expected") is None else " — " + fix_expected_words(fx["gives_expected"])
        # (only with an expected message in the Reproducer box)
        st.markdown(md(f"{i + 1}. {fx['kind']}: ") + md_code(fx["description"]) + _needs_fidelity(fx) + md(said),
                    help=md(f"CLI: explain … {fx['cli']}") if fx.get("cli") else None)
        if "template_patch" in fx["change"]:
            left, right = st.columns(2)
            left.button("Use this fix", key=f"triage_fix_{i}", on_click=_apply_triage_fix, args=(fx,),
                        help="Makes the patched template the current one (an edit, as on the Edit page)")
            right.download_button("Download the patched template", _patched(fx["change"]["template_patch"]),
                                  file_name=f"patched-{tpl.name}", mime="text/plain", key=f"triage_fix_dl_{i}")
        else:
            st.button("Use this fix", key=f"triage_fix_{i}", on_click=_apply_triage_fix, args=(fx,))
        for line in repair_lines(fx["change"]):
            st.caption(md_code(line))
        with st.expander(f"The message fix {i + 1} gives"):   # as the CLI's "gives:" line, before any click
            show_json(fx["message"], clip=MESSAGE_CLIP)
    with st.expander("Evidence"):
        # the stop point has its own section below; the evidence here is what the triage adds to it
        for e in shown_evidence(tg.get("evidence") or [], ex["stop"], tg["sentence"]):
            if e != STOP_SEEN_ABOVE:
                st.markdown("- " + md_code(split_rule_path(plain_paths(e, points))[0]))
    if tg.get("relation"):
        # the template's call pieces (its own render of a call) against the output's markup, the CLI's lines; open
        # when the relation decided the mistake, closed when it only names the class the rules named
        decided = bool(tg.get("relation_decided"))
        rel_lines = relation_lines(CallRelation.from_json(tg["relation"]), decided)
        with st.expander("The template's call pieces against the output's markup", expanded=decided):
            st.markdown(md_code(rel_lines[0]))
            st.markdown("\n".join("- " + md_code(line) for line in rel_lines[1:]))
if ex["consistency"]:
    st.error(md(f"The spans do not account for the message (a bug of this tool): {ex['consistency']}"))

# ---------------------------------------------------------------- span view


def _title(sp: dict) -> str:
    parts = [sp["label"]]
    if sp.get("field") and not sp["field"].startswith("{"):
        parts.append(sp["field"])
        for path in sp["field"].split(" / "):
            if path in ex["found_by"]:
                parts.append("found by " + ex["found_by"][path])
    if sp.get("call") is not None:
        parts.append(f"tool call #{sp['call']}")
    if sp.get("repair"):
        parts.append(f"repaired: {sp['repair']}")
    if sp.get("in_prompt"):
        parts.append("in the generation prompt")
    return " · ".join(parts)


def _span_html(sp: dict) -> str:
    return (f'<span class="cte-span" data-label="{html.escape(sp["label"])}" style="{span_style(sp["label"])}" '
            f'title="{html.escape(visible_text(_title(sp)), quote=True)}">{visible_html(sp["text"])}'
            '</span>')


def _stop_html(stop: dict, kind: str) -> str:
    path = " > ".join(stop.get("path") or [])
    return stop_html(stop["words"].replace("`", "") + (f" · grammar rules: {path}" if path else ""), kind)


body = []
stop = ex["stop"]
gp_len = len(ex["generation_prompt"])
# a huge output is shown as windows around the stop point, the cut, the edits and the repairs, each stretch left out
# said with its size and exact output positions (present.window_spans, the text view's)
shown = window_spans(ex["spans"], ex["spans"][-1]["end"] if ex["spans"] else gp_len, focus_points(ex))
for sp in shown:
    if isinstance(sp, Gap):
        # on a line of its own (a window's edge is at a line break when one is near)
        after = "" if body and body[-1].endswith("\n</span>") else "\n"
        body.append(f'<span class="cte-gap" style="opacity:0.75;font-style:italic">{after}'
                    f'{html.escape(sp.words(gp_len))}\n</span>')
        continue
    if stop is not None and sp["start"] <= stop["pos"] < sp["end"]:
        cut = stop["pos"] - sp["start"]
        if cut:
            body.append(_span_html({**sp, "text": sp["text"][:cut]}))
        body.append(_stop_html(stop, "stop"))
        body.append(_span_html({**sp, "text": sp["text"][cut:]}))
        continue
    body.append(_span_html(sp))
if stop is not None and stop["pos"] >= len(ex["generation_prompt"] + ex.get("output", "")) and \
        not any(sp["start"] <= stop["pos"] < sp["end"] for sp in shown if not isinstance(sp, Gap)):
    body.append(_stop_html(stop, "stop"))
if ex["truncated"] is not None:
    body.append(_stop_html(ex["truncated"], "truncated"))
st.subheader("Where every character went")
st.html(legend_html() + panel_html("cte-spans", "".join(body)))
st.caption("Hover a span for its label, the analysis field a marker matched and the comparison that found it.")

# grammar-rule paths (tool-calls > tool-call > …) are the parser's internals: in tooltips only
if stop is not None:
    st.subheader("Where it stopped")
    st.error(md_code(f"At output position {stop['output_pos']}: {stop['words']}"))
    if stop.get("path"):
        st.caption("Hover the ? icon for the parser's grammar rules at that point.", help=md(" > ".join(stop["path"])))
if ex["truncated"] is not None:
    where = "The output is empty" if wrote_nothing else f"The output ends inside {part_of(ex['truncated']['path'])}"
    st.warning(md_code(f"{where}: {ex['truncated']['words']}"))
    if ex["truncated"].get("path"):
        st.caption("Hover the ? icon for the parser's grammar rules at that point.",
                   help=md(" > ".join(ex["truncated"]["path"])))

# ---------------------------------------------------------------- streaming replay


@st.cache_data(max_entries=16, show_spinner="Replaying the stream…")
def _replay(source: str, name: str, request_json: str, output: str, fidelity: str, overrides_json: str,
            disabled: tuple, chunk: int) -> list[dict]:
    from core.isolated_ops import explain_steps  # in a limited worker

    return explain_steps(source, name, request_json, output, fidelity, overrides_json, disabled, chunk)


# drawn only when opened (a rerun): the replay is computed in a worker and drawn step by step, and inside a
# closed expander it was paid on every visit of this page
replay_box = st.expander("Streaming replay (the same view, step by step)", key="explain_open_replay",
                         on_change="rerun")
if replay_box.open:
    with replay_box:
        state.default("in_explain_chunk", 8)
        st.number_input("characters per step", min_value=1, max_value=256, key="in_explain_chunk")
        steps = state.attempt(_replay, tpl.source, tpl.name, json.dumps(request, ensure_ascii=False),
                              st.session_state.get("in_output", ""), state.fidelity(),
                              json.dumps(state.overrides_for(tpl), sort_keys=True), tuple(state.disabled_for(tpl)),
                              int(st.session_state.get("in_explain_chunk", 8)))
        if steps:
            # a new output may have fewer steps than the slider's remembered position
            if int(st.session_state.get("in_explain_step", len(steps))) > len(steps):
                st.session_state["in_explain_step"] = len(steps)
            state.default("in_explain_step", len(steps))
            k = st.slider("step", 1, len(steps), key="in_explain_step") if len(steps) > 1 else 1
            step = steps[k - 1]
            a, b = step["new"]
            parts = []
            for sp in step["spans"]:
                for lo, hi, new in ((sp["start"], min(sp["end"], a), False), (max(sp["start"], a), min(sp["end"], b), True)):
                    if hi > lo:
                        piece = {**sp, "text": sp["text"][lo - sp["start"]:hi - sp["start"]]}
                        html_piece = _span_html(piece)
                        if new:
                            html_piece = f'<span class="cte-new" style="outline:2px solid {NEW_OUTLINE}">{html_piece}</span>'
                        parts.append(html_piece)
            held = "".join(sp["text"] for sp in step["spans"] if sp["label"] == "held back")
            st.html(panel_html("cte-stream", "".join(parts)))
            asked = int(st.session_state.get("in_explain_chunk", 8))
            width = replay_chunk(len(st.session_state.get("in_output", "")), asked)
            shown_from = min((sp["start"] for sp in step["spans"]), default=0) - len(ex["generation_prompt"])
            st.caption(md(f"step {k} of {len(steps)}: output characters {step['new'][0] - len(ex['generation_prompt'])}"
                          f"–{step['end']} new (outlined)" + (f"; {len(held)} held back" if held else "")
                          + (f"; steps of {width:,} characters, not {asked}: a replay has at most {REPLAY_STEPS} "
                             "steps" if width != asked else "")
                          + (f"; the {REPLAY_WINDOW:,} characters before the step's end are shown (from "
                             f"{shown_from:,})" if shown_from > 0 else "")))

# ---------------------------------------------------------------- why

st.subheader("Why")
if not ex["findings"]:
    st.caption("Nothing to explain: the format accounts for every character.")
for f in ex["findings"]:
    # the triage's mistake leads: a cause that agrees supports it, another is what the stop point alone suggests
    st.markdown(f"**{md_code(finding_head(f['cause'], f['role'], ex['stop'] is not None))}**")
    for e in shown_evidence(f["evidence"], ex["stop"]):
        words, path = split_rule_path(plain_paths(e, [ex["stop"], ex["truncated"]]))
        st.markdown("- " + md_code(words), help=md(f"grammar rules: {path}") if path else None)
if ex["other_fidelity_message"] is not None:
    left, right = st.columns(2)
    with left:
        st.caption(md(f"{ex['fidelity']} fidelity"))
        show_json(ex["message"], clip=MESSAGE_CLIP)
    with right:
        st.caption("the other fidelity")
        show_json(ex["other_fidelity_message"], clip=MESSAGE_CLIP)
else:
    with st.expander("Parsed message"):
        show_json(ex["message"], clip=MESSAGE_CLIP)

# ---------------------------------------------------------------- fixes

FIX_KINDS = {"override": "Analysis override", "fidelity": "Fidelity", "request": "Request setting"}


def _fix_words(fx: dict) -> str:
    """"Analysis override: tools.format.args_field = 'parameters'" (the description repeats the kind)."""
    desc = fx["description"]
    if desc.lower().startswith(fx["kind"].lower() + " "):
        desc = desc[len(fx["kind"]) + 1:]
    return f"**{md(FIX_KINDS.get(fx['kind'], fx['kind']))}**: {md_code(desc)}"


if ex["parse_clean"] and not ex["fixes"]:
    pass            # nothing to fix: no "Fixes" section at all
elif not ex["fixes"] and (tg.get("mistake") not in (None, "NONE") or wrote_nothing):
    pass            # the ranked fixes above say what helps (or that nothing of ours does); "no candidate" here
                    # contradicted a ranked fix offered a screen up
else:
    st.subheader("Fixes that re-parse clean")
    if ex["answer"]["from"] == "triage":
        st.caption("Other changes that re-parse clean, from the causes under Why: the ranked fixes above come first.")
    if not ex["fixes"]:
        st.caption("No candidate change (fidelity, analysis override, request setting) parses this output clean.")
for i, fx in enumerate(ex["fixes"]):
    said = "" if fx.get("gives_expected") is None else " — " + fix_expected_words(fx["gives_expected"])
    st.markdown(_fix_words(fx) + md(said))
    show_json(fx["message"], height=160, clip=MESSAGE_CLIP)
    st.button("Apply", key=f"explain_fix_{i}", on_click=_apply_fix, args=(fx,))

# ---------------------------------------------------------------- reproducer

st.subheader("Reproducer")
st.text_area("Expected message (OpenAI JSON): the pytest reproducer then asserts it and is marked xfail (strict) "
             "until the parser gives it; left empty, the test is a characterisation test", key="explain_expect",
             height=100)
with st.container():   # one slot, shown or not (explorer.components.serving.capped_text_area)
    show_invisible_notice(st.session_state.get("explain_expect") or "")
problem = _expect_problem()
if problem:
    st.warning(md_code(f"The expected message cannot be used ({problem}): the reproducers below pin the message "
                       "as parsed now."))
rep = ex["reproducer"]
c1, c2, c3 = st.columns(3)
c1.download_button("cases.jsonl line", rep["case"] + "\n", file_name="explain_case.jsonl",
                   mime="application/json", key="explain_dl_case")
c2.download_button("pytest test", rep["pytest"], file_name="test_explain_case.py", mime="text/x-python",
                   key="explain_dl_pytest")
c3.download_button("peg_tester snippet", rep["peg_tester"], file_name="peg_tester_case.cpp", mime="text/x-c++src",
                   key="explain_dl_cpp")
repro_box = st.expander("Show the reproducers", key="explain_open_repro", on_change="rerun")
if repro_box.open:  # three highlighted code blocks, drawn when opened (the downloads above need no drawing)
    with repro_box:
        st.code(visible_json_text(rep["case"]), language="json", wrap_lines=True)
        st.code(rep["pytest"], language="python", wrap_lines=True)
        st.code(rep["peg_tester"], language="cpp", wrap_lines=True)

# ---------------------------------------------------------------- permalink
# template, fidelity and overrides are in the URL already (urlstate.sync); x adds the request and the output, so
# the link reopens this very explanation

st.subheader("Permalink")
link, size = urlstate.explain_permalink(request, st.session_state.get("in_output", ""))
if link:
    st.code(link, language=None, wrap_lines=True)
    st.caption("Copy this link: it reopens this explanation (template, fidelity, overrides, request, output).")
else:
    st.warning(md(f"The request and output are too large for a link ({size} characters encoded, at most "
                  f"{urlstate.EXPLAIN_MAX_CHARS}): download the reproducer above (cases.jsonl line) instead."))
