"""Playground: parse a model output with the parser built for the current template and request settings,
one-shot and as a streaming replay (a slider over token steps: deltas so far and the partial message).

The output can be pasted or generated from the template itself (an assistant message with reasoning,
content and tool calls, rendered). Settings (tools JSON, tool_choice, parallel calls, reasoning_format,
enable_thinking) are shared with the Grammar and Overrides pages."""

import json

import streamlit as st

from explorer import state
from explorer.components import marker_table as mt
from explorer.components import serving
from explorer.components.diff_view import WINDOW, show_text
from explorer.components.provenance import banner
from explorer.components.text import literal, md, show_json

CLIP = 2000  # characters of a string shown in a JSON view (the whole text is in the windowed view below it)
DELTAS_SHOWN = 200

st.title("Playground")
tpl = state.attempt(state.current)
if tpl is None:
    st.stop()
banner(tpl)

# ---- inputs (all in session state: nothing typed is lost when switching pages or templates)
state.default("in_tools", json.dumps(state.default_tools(), indent=2, ensure_ascii=False))
state.default("in_messages", json.dumps(state.DEFAULT_MESSAGES, indent=2, ensure_ascii=False))
state.default("in_tool_choice", "auto")
state.default("in_parallel", False)
state.default("in_reasoning_format", "auto")
state.default("in_enable_thinking", None)   # template default: unset, as the CLI leaves it
state.default("in_kwargs", "")
state.default("in_partial", False)
state.default("in_output", "")

# A new template gets its bundled sample, unless the user wrote something of their own.
if st.session_state.get("output_owner") != tpl.digest:
    current_text = st.session_state.get("in_output", "")
    if not current_text.strip() or current_text == st.session_state.get("output_autofilled"):
        sample = state.sample_output(tpl)
        st.session_state["in_output"] = sample
        st.session_state["output_autofilled"] = sample
    st.session_state["output_owner"] = tpl.digest


def _generate_sample() -> None:
    try:
        req = state.request_dict()
        msg = state.sample_message(req.get("tools"), reasoning=st.session_state.get("in_gen_reasoning", True),
                                   content=st.session_state.get("in_gen_content", True),
                                   calls=int(st.session_state.get("in_gen_calls", 1)))
        text = state.rendered_sample(state.current(), req, msg)
        st.session_state["in_output"] = text
        st.session_state["output_autofilled"] = text
    except Exception as e:  # noqa: BLE001 - shown below
        st.session_state["playground_error"] = e


@st.fragment
def replay_view(output: str, partial: bool, markers: list[str]) -> None:
    """The streaming replay (a fragment: moving the slider redraws only this part). The deltas of every step
    come from one cached streaming run (:func:`explorer.state.replay`); the partial message at a step is
    what its deltas add up to."""
    state.fragment_started()   # a spec for __main__, and page code for the background imports (explorer.state)
    from core.chat.conformance import accumulate_deltas

    request = state.request_dict()
    rp = state.attempt(state.replay, tpl, request, output, partial)  # in a worker: it can be stopped
    if rp is None:
        return
    n = len(rp.pieces)
    # a new output, template or request starts the replay at its end (the slider kept the old step, so a
    # changed output showed a stale half-way state that looked like a parser bug)
    # hash() of the session's own string objects is cached by Python: no re-hashing of a 1 MB output per redraw
    replay_of = hash((tpl.digest, output, partial, json.dumps(request, sort_keys=True)))
    if st.session_state.get("stream_replay_of") != replay_of:
        st.session_state["stream_replay_of"] = replay_of
        st.session_state["in_stream_step"] = n
    if st.session_state.get("in_stream_step", 0) > n:
        st.session_state["in_stream_step"] = n
    state.default("in_stream_step", n)
    step = st.slider("Step (tokens fed)", 1, n, key="in_stream_step") if n > 1 else 1
    fed = "".join(rp.pieces[:step])
    deltas = [d for ds in rp.deltas[:step] for d in ds]
    token = rp.pieces[step - 1] if step < n else "(finish)"
    st.caption(md(f"Step {step} of {n}: token {literal(token[:80])}; {len(deltas)} deltas so far"
                  + (f"; {rp.held_back} steps held back (would have retracted text)" if rp.held_back else "")))
    st.markdown("**Text fed so far**" + (" (its end)" if len(fed) > WINDOW else ""))
    show_text(fed, max_height="8rem", markers=markers, start=max(0, len(fed) - WINDOW))
    partial_msg = {k: v for k, v in accumulate_deltas(deltas).items() if v}
    if step == n and rp.truncated:
        # issue 10: the deltas of a call cut off at the end are not taken back; the finish reports it and a
        # client drops it (core.chat.repairs.settled), so the message at the finish is the parsed message
        kept = rp.truncated[-1][1]
        if len(partial_msg.get("tool_calls") or []) > kept:
            partial_msg["tool_calls"] = partial_msg["tool_calls"][:kept]
            if not partial_msg["tool_calls"]:
                del partial_msg["tool_calls"]
        names = ", ".join(name or "?" for name, _, _ in rp.truncated)
        how = ("was rejected: complete, but it does not fit the tools"
               if all(why == "rejected" for _, _, why in rp.truncated) else "was cut off")
        st.caption(md(f"Finish: the last call ({names}) {how} (repair truncated-call); its streamed deltas "
                      "stay, a client drops the call" + (" — kept, the output is marked cut off" if partial else "")
                      + "."))
    c1, c2 = st.columns(2)
    with c1:
        st.markdown("**Deltas so far**" + (f" (the last {DELTAS_SHOWN})" if len(deltas) > DELTAS_SHOWN else ""))
        show_json(deltas[-DELTAS_SHOWN:], clip=CLIP, height=240, rows=True)   # a delta per line
    with c2:
        st.markdown("**Partial message**")
        show_json(partial_msg, clip=CLIP)


settings, main = st.columns([1, 2], gap="large")
with settings:
    st.subheader("Request")
    st.selectbox("tool_choice", ["auto", "required", "none"], key="in_tool_choice")
    st.selectbox("reasoning_format", ["auto", "none", "deepseek", "deepseek-legacy"], key="in_reasoning_format")
    st.toggle("parallel_tool_calls", key="in_parallel")
    state.sync_thinking_widget()
    st.radio("enable_thinking", [c.value for c in state.Thinking], key=state.THINKING_WIDGET, horizontal=True,
             on_change=state.thinking_chosen,
             help="template default: the request leaves enable_thinking unset, as a request without it does for "
                  "the command line — llama.cpp renders with true; at improved fidelity the repair "
                  "template-default-thinking renders with the template's own default")
    cap = serving.policy().limits.max_text_chars  # demo mode caps pastes
    fits = serving.capped_text_area("tools (JSON list, OpenAI shape; empty = no tools)", "in_tools", cap,
                                    "tools JSON", height=220)
    with st.expander("messages (JSON)", expanded=not serving.text_over_cap(
            st.session_state.get("in_messages") or "", cap, "messages JSON") is None):
        fits &= serving.capped_text_area("messages", "in_messages", cap, "messages JSON", height=160,
                                         label_visibility="collapsed")
    with st.expander("chat_template_kwargs (JSON)", expanded=bool((st.session_state.get("in_kwargs") or "").strip())):
        fits &= serving.capped_text_area("chat_template_kwargs (JSON object; empty = none)", "in_kwargs", cap,
                                         "chat_template_kwargs JSON", height=80, label_visibility="collapsed")
    with st.expander("Generate a sample from the template", expanded=False):
        state.default("in_gen_reasoning", True)
        state.default("in_gen_content", True)
        state.default("in_gen_calls", 1)
        st.checkbox("with reasoning", key="in_gen_reasoning")
        st.checkbox("with content", key="in_gen_content")
        st.number_input("tool calls", min_value=0, max_value=4, key="in_gen_calls")
        st.button("Render a sample output", on_click=_generate_sample,
                  help="Renders an assistant message with the template and keeps what follows the generation "
                       "prompt, without the end-of-turn text.")

err = st.session_state.pop("playground_error", None)

with main:
    st.subheader("Model output")
    with st.container():  # one slot, shown or not: the box below keeps its place (and what is typed in it)
        if err is not None:
            state.show_error(err, "Could not render a sample: ")
    fits &= serving.capped_text_area("Text the model generated after the prompt", "in_output", cap, "model output",
                                     height=200)
    st.checkbox("output is cut off (partial)", key="in_partial")
    if not fits:
        st.stop()  # what was typed stays in its box; nothing over the cap is parsed

    request = state.attempt(state.request_dict)
    bundle = state.attempt(state.parser_bundle, tpl, request) if request is not None else None
    if bundle is None:
        st.stop()

    route_txt = (f"special handler {bundle.route.handler}" if getattr(bundle.route, "kind", "") == "specialized"
                 else "auto-parser")
    st.caption(md(f"Parser: {route_txt} · format {bundle.format}"))
    for note in getattr(bundle, "notes", None) or []:
        st.warning(md(note))

    output = st.session_state.get("in_output", "")
    partial = bool(st.session_state.get("in_partial"))
    if not output:
        st.info("Nothing to parse: paste what the model generated after the prompt, or render a sample from "
                "the template (left).")
        st.stop()
    try:
        msg = state.parsed_message(tpl, request, output, partial)
        repairs_fired = state.parsed_repairs(tpl, request, output, partial)
    except Exception as e:  # noqa: BLE001 - parsers should not raise; show it if one does
        state.show_error(e, "The parser raised: ")
        st.stop()
    markers = mt.known_markers(bundle.report.analysis if getattr(bundle, "report", None) is not None else {},
                               bundle.parser.preserved_tokens or ())

    tab_msg, tab_stream, tab_prompt = st.tabs(["Parsed message", "Streaming replay", "Prompt"])
    with tab_msg:
        # issue 10: a rescued parse says so (core.chat.repairs.FiredRepair: rule name, span of the output)
        for r in repairs_fired:
            why = f" ({r.why})" if getattr(r, "why", "") else ""   # truncated-call: cut / rejected
            st.badge(f"repair {r.name}{why} [{r.start}, {r.end})", icon=":material/build:", color="orange")
        show_json(msg, clip=CLIP)
        for field in ("reasoning_content", "content"):
            if msg.get(field):
                st.markdown(f"**{field}**")
                show_text(msg[field], max_height="10rem", markers=markers, key=f"in_pg_window_{field}")

    with tab_prompt:
        st.markdown("**Generation prompt** (prepended to the output when parsing)")
        show_text(bundle.generation_prompt, max_height="6rem", markers=markers)
        st.markdown("**Full prompt**")
        show_text(bundle.prompt, markers=markers, key="in_pg_window_prompt")

    with tab_stream:
        replay_view(output, partial, markers)
