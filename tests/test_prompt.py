"""Request path (core.chat.prompt): message canonicalisation, workarounds, continuation, extra context,
prompt and generation prompt against reference/analysis.jsonl's ``apply``."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from core.analysis.result import Caps
from core.chat.prompt import (canonical_message, canonical_tools, choose_variant, continuation_generation_prompt,
                              generation_prompt, message_text, prepare_request, render_prompt)
from core.chat.pipeline import build_chat_parser
from core.chat.request import ChatRequest, Continuation
from core.diff import common_prefix_len
from core.errors import RequestError
from core.jinja.hf import pinned_clock
from core.jinja.template import ChatTemplate

from .conftest import SHARED, TEMPLATES, template_source

CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _req(**kw):
    kw.setdefault("messages", [{"role": "user", "content": "Hello"}])
    return ChatRequest.from_dict(kw)


def _tmpl(src=CHATML, name="chatml"):
    return ChatTemplate(src, name)


def test_common_prefix_len():
    assert common_prefix_len("abcdef", "abcxyz") == 3
    assert common_prefix_len("abc", "abc") == 3
    assert common_prefix_len("", "abc") == 0
    assert common_prefix_len("abc", "abcd") == 3
    assert common_prefix_len("xbc", "abc") == 0


def test_canonical_message_shapes():
    m = canonical_message({"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": {"a": 1, "b": "é"}}}]})
    assert m == {"role": "assistant", "content": "",
                 "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": '{"a":1,"b":"é"}'}}]}
    m = canonical_message({"role": "tool", "content": "r", "tool_call_id": "c1", "name": "f",
                           "reasoning_content": ""})
    assert list(m) == ["role", "content", "name", "tool_call_id"]
    m = canonical_message({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "media_marker",
                                                                                     "text": "<img>"},
                                                       {"type": "text", "text": "b"}]})
    assert m["content"] == "a<img>b"
    with pytest.raises(RequestError, match="image"):
        canonical_message({"role": "user", "content": [{"type": "image", "text": ""}]})


def test_canonical_tools_fill_description():
    tools = canonical_tools([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"},
                                                               "strict": True}}])
    assert tools == [{"type": "function", "function": {"name": "f", "description": "",
                                                       "parameters": {"type": "object"}}}]
    assert canonical_tools([]) is None


def test_choose_variant():
    req_tools = _req(tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}])
    assert choose_variant({"default": "a", "tool_use": "b"}, req_tools) == "tool_use"
    assert choose_variant({"default": "a", "tool_use": "b"}, _req()) == "default"
    assert choose_variant({"default": "a"}, req_tools) == "default"


def test_developer_becomes_system_except_channel_templates():
    req = _req(messages=[{"role": "developer", "content": "d"}, {"role": "user", "content": "u"}])
    assert prepare_request(_tmpl(), req, caps=Caps()).messages[0]["role"] == "system"
    chan = _tmpl(CHATML + "{# <|channel|> #}", "chan")
    assert prepare_request(chan, req, caps=Caps()).messages[0]["role"] == "developer"


def test_system_merged_when_template_lacks_system_role():
    req = _req(messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    prep = prepare_request(_tmpl(), req, caps=Caps(supports_system_role=False))
    assert prep.messages == [{"role": "user", "content": "S\nU"}]
    only = _req(messages=[{"role": "system", "content": "S"}])
    assert prepare_request(_tmpl(), only, caps=Caps(supports_system_role=False)).messages == []


def test_object_arguments_parsed_and_bad_json_rejected():
    msgs = [{"role": "user", "content": "u"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"type": "function", "id": "c1", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
            {"role": "user", "content": "again"}]
    prep = prepare_request(_tmpl(), _req(messages=msgs), caps=Caps(supports_object_arguments=True))
    call = prep.messages[1]["tool_calls"][0]
    assert call["function"]["arguments"] == {"a": 1} and call["id"] == "c1"
    assert prep.messages[1]["content"] == ""
    prep = prepare_request(_tmpl(), _req(messages=msgs), caps=Caps(supports_object_arguments=False))
    assert prep.messages[1]["tool_calls"][0]["function"]["arguments"] == '{"a": 1}'


def test_typed_content_normalisation():
    prep = prepare_request(_tmpl(), _req(), caps=Caps(supports_string_content=False, supports_typed_content=True))
    assert prep.messages[0]["content"] == [{"type": "text", "text": "Hello"}]


def test_continuation_pops_and_resolves_auto():
    msgs = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "", "reasoning_content": "I'm"}]
    prep = prepare_request(_tmpl(), _req(messages=msgs, continue_final_message="auto"), caps=Caps())
    assert prep.continuation == Continuation.REASONING
    assert prep.add_generation_prompt is False and len(prep.messages) == 1
    assert prep.continue_reasoning == "I'm" and prep.has_continuation
    msgs[1]["content"] = "Hello, "
    prep = prepare_request(_tmpl(), _req(messages=msgs, continue_final_message="auto"), caps=Caps())
    assert prep.continuation == Continuation.CONTENT and prep.continue_content == "Hello, "


def test_continuation_generation_prompt_rebuild():
    msgs = [{"role": "user", "content": "u"},
            {"role": "assistant", "content": "Hello, ", "reasoning_content": "I'm thinking"}]
    prep = prepare_request(_tmpl(), _req(messages=msgs, continue_final_message="content"), caps=Caps())
    gp = "<|im_start|>assistant\n<think>\n"
    assert continuation_generation_prompt(gp, prep, "<think>\n", "\n</think>\n\n") == \
        "<|im_start|>assistant\n<think>\nI'm thinking\n</think>\n\nHello, "
    assert continuation_generation_prompt("<|im_start|>assistant\n", prep, "", "") == \
        "<|im_start|>assistant\nHello, "
    prep = prepare_request(_tmpl(), _req(messages=msgs, continue_final_message="reasoning"), caps=Caps())
    assert continuation_generation_prompt(gp, prep, "<think>\n", "\n</think>\n\n") == \
        "<|im_start|>assistant\n<think>\nI'm thinking"


def test_message_text_joins_parts():
    assert message_text({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}) == "a\n\nb"
    assert message_text({"content": None}) == ""


def test_extra_context_dates_and_kwargs_override_enable_thinking():
    src = "{{ date_string }}|{{ datetime }}|{{ enable_thinking }}|{{ flag }}"
    with pinned_clock(dt.datetime(2025, 3, 7, 12, 0)):
        prep = prepare_request(_tmpl(src, "ctx"), _req(chat_template_kwargs={"enable_thinking": False,
                                                                            "flag": "on"}), caps=Caps())
        assert render_prompt(prep) == "07 Mar 2025|Mar 07 2025|False|on"


def test_enable_thinking_kwarg_is_the_parsers_flag_too():
    """llama.cpp's server reads a boolean ``enable_thinking`` template kwarg into the request's flag, so the parser
    expects what the render wrote (DeepSeek V4 with the kwarg off: the prompt closes the reasoning, no `</think>`
    is owed in the content); a string is refused, other values only reach the template."""
    msgs = [{"role": "user", "content": "Hi"}]
    assert ChatRequest.from_dict({"messages": msgs, "chat_template_kwargs": {"enable_thinking": False}}).enable_thinking \
        is False
    assert ChatRequest.from_dict({"messages": msgs, "enable_thinking": False,
                                  "chat_template_kwargs": {"enable_thinking": True}}).enable_thinking is True
    assert ChatRequest.from_dict({"messages": msgs, "chat_template_kwargs": {"enable_thinking": 0}}).enable_thinking
    with pytest.raises(RequestError, match="chat_template_kwargs.enable_thinking"):
        ChatRequest.from_dict({"messages": msgs, "chat_template_kwargs": {"enable_thinking": "false"}})
    t = ChatTemplate(template_source("deepseek-ai-DeepSeek-V4.jinja"), "deepseek-ai-DeepSeek-V4.jinja")
    req = ChatRequest.from_dict({"messages": msgs, "chat_template_kwargs": {"enable_thinking": False}})
    msg = build_chat_parser(t, req).parser.parse("Hello there.", False)
    assert (msg.content, msg.reasoning_content) == ("Hello there.", "")


def test_preserve_reasoning_and_reasoning_effort_bind_companions():
    src = "{{ preserve_thinking }} {{ clear_thinking }} {{ drop_thinking }} {{ reasoning_strength }}"
    prep = prepare_request(_tmpl(src, "ctx"), _req(chat_template_kwargs={"preserve_reasoning": True,
                                                                        "reasoning_effort": "high"}), caps=Caps())
    assert render_prompt(prep) == "True False False high"


def test_stepfun_trims_message_text():
    prep = prepare_request(ChatTemplate(template_source("StepFun3.5-Flash.jinja"), "StepFun3.5-Flash.jinja"),
                           _req(messages=[{"role": "user", "content": "  Hi  "}]), caps=Caps())
    assert prep.messages[0]["content"] == "Hi"
    prep = prepare_request(_tmpl(), _req(messages=[{"role": "user", "content": "  Hi  "}]), caps=Caps())
    assert prep.messages[0]["content"] == "  Hi  "


def test_enable_thinking_kwarg_changes_generation_prompt():
    t = ChatTemplate(template_source("Qwen-Qwen3-0.6B.jinja"), "Qwen-Qwen3-0.6B.jinja")
    on = generation_prompt(prepare_request(t, _req(), caps=Caps()))
    off = generation_prompt(prepare_request(t, _req(chat_template_kwargs={"enable_thinking": False}), caps=Caps()))
    assert on == "<|im_start|>assistant\n"
    assert off == "<|im_start|>assistant\n<think>\n\n</think>\n\n"


def _reference_rows():
    with open(SHARED / "reference" / "analysis.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_generation_prompt_and_prompt_match_reference_apply():
    """Every template llama.cpp applied: our generation prompt equals reference ``apply.generation_prompt``
    (user "Hello", the one reference tool, caps as the reference found them), rendering as llama.cpp's engine
    does; the prompt too, except templates that print the current time."""
    tools = json.loads((SHARED / "tools" / "oracle" / "tools.json").read_text())
    gp_ok = prompt_ok = total = 0
    render_fail, mismatches = [], []
    for row in _reference_rows():
        if "apply" not in row:
            continue
        total += 1
        t = ChatTemplate((TEMPLATES / row["template"]).read_text(encoding="utf-8"), row["template"])
        prep = prepare_request(t, _req(tools=tools), caps=Caps(**row["analysis"]["caps"]))
        try:
            gp = generation_prompt(prep)
            prompt = render_prompt(prep)
        except Exception:
            render_fail.append(row["template"])
            continue
        gp_ok += gp == row["apply"]["generation_prompt"]
        prompt_ok += prompt == row["apply"]["prompt"]
        if gp != row["apply"]["generation_prompt"]:
            mismatches.append(row["template"])
    assert not mismatches, mismatches
    assert not render_fail, render_fail
    assert gp_ok == total
    assert prompt_ok == total  # the clock is pinned to the reference's (conftest.REFERENCE_CLOCK)
