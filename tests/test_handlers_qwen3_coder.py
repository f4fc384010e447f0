"""Qwen3-Coder family handler (Qwen3-Coder, Qwen3.5, Nemotron 3 Nano, StepFun): formats beyond the reference
cases, streaming, grammar switches, robustness."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from core.chat.base import TriggerType
from core.chat.formats import family_by_name, qwen3_coder

from .test_handlers_golden import PYTHON, SPECIAL, SPECIAL_OPT, args, bundle, stream_check, stream_robust, template

CALL = "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>"


def test_detect():
    detect = family_by_name("qwen3-coder").detect
    assert detect("<tool_call> <function= <parameter=")
    assert not detect("<tool_call> <function= <parameter= '<tool_call><function=' ~ tool_call.name ~ '>'")


def test_nemotron_and_stepfun_parse_reasoning_and_call():
    for name in ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", "StepFun3.5-Flash.jinja"):
        b = bundle(name, tools=[SPECIAL])
        msg = stream_check(b.parser, "Plan it.\n</think>\n\n" + CALL)
        assert msg.reasoning_content.strip() == "Plan it."
        assert msg.tool_calls[0].name == "special_function" and args(msg) == {"arg1": 1}


def test_prefix_tool_name_never_reported_early():
    b = bundle("Qwen3.5-4B.jinja", tools=[SPECIAL, SPECIAL_OPT], enable_thinking=False)
    text = ("<tool_call>\n<function=special_function_with_opt>\n<parameter=arg1>\n1\n</parameter>\n"
            "<parameter=arg2>\n2\n</parameter>\n</function>\n</tool_call>")
    for i in range(len(text) + 1):
        names = [t.name for t in b.parser.parse(text[:i], True).tool_calls]
        assert "special_function" not in names
    msg = stream_check(b.parser, text)
    assert args(msg) == {"arg1": 1, "arg2": 2}


def test_string_argument_streams_as_json_text():
    b = bundle("Qwen3-Coder.jinja", tools=[PYTHON])
    text = '<tool_call>\n<function=python>\n<parameter=code>\nprint("a\\tb")\nx = 1\n</parameter>\n</function>\n</tool_call>'
    msg = stream_check(b.parser, text)
    assert args(msg) == {"code": 'print("a\\tb")\nx = 1'}


def test_triggers_and_grammar_switches():
    coder = bundle("Qwen3-Coder.jinja", tools=[SPECIAL]).parser
    assert coder.grammar_lazy and [t.value for t in coder.grammar_triggers] == ["<tool_call>",
                                                                              "<function=special_function>"]
    assert all(t.type == TriggerType.WORD for t in coder.grammar_triggers)
    qwen35 = bundle("Qwen3.5-4B.jinja", tools=[SPECIAL]).parser
    assert [t.value for t in qwen35.grammar_triggers] == ["<tool_call>"]
    required = bundle("Qwen3.5-4B.jinja", tools=[SPECIAL], tool_choice="required").parser
    assert required.grammar and not required.grammar_lazy and required.grammar_triggers == []
    assert "root ::=" in required.grammar
    none = bundle("Qwen3.5-4B.jinja", tools=[SPECIAL], tool_choice="none").parser
    assert none.grammar is None
    msg = none.parse("thinking\n</think>\n\n" + CALL)
    assert msg.tool_calls == [] and "<tool_call>" in msg.content


def test_required_tool_call_missing_gives_content():
    b = bundle("Qwen3.5-4B.jinja", tools=[SPECIAL], tool_choice="required", enable_thinking=False)
    msg = b.parser.parse("just text")
    assert msg.content == "just text" and msg.tool_calls == []


def test_reasoning_format_none_keeps_tags_in_content():
    b = bundle("Qwen3.5-4B.jinja", reasoning_format="none")
    msg = stream_check(b.parser, "hm\n</think>\n\nHi")
    assert msg.reasoning_content == "" and msg.content == "<think>\nhm\n</think>\n\nHi"


def test_continuation_prefill_is_parsed():
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "reasoning_content": "I am"}]
    b = bundle("Qwen3.5-4B.jinja", messages=msgs, continue_final_message="auto")
    assert b.generation_prompt == "<|im_start|>assistant\n<think>\nI am"
    assert b.prompt.endswith(b.generation_prompt)
    msg = b.parser.parse(" done\n</think>\n\nAnswer")
    assert msg.reasoning_content.strip() == "I am done" and msg.content.strip() == "Answer"


def test_parallel_off_keeps_one_call():
    b = bundle("Qwen3.5-4B.jinja", tools=[SPECIAL], enable_thinking=False)
    msg = b.parser.parse(CALL + "\n" + CALL)
    assert len(msg.tool_calls) == 1
    b = bundle("Qwen3.5-4B.jinja", tools=[SPECIAL], enable_thinking=False, parallel_tool_calls=True)
    assert len(b.parser.parse(CALL + "\n" + CALL).tool_calls) == 2


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["<tool_call>\n", "<function=special_function>\n", "<parameter=arg1>\n",
                                  "\n</parameter>\n", "</function>\n", "</tool_call>", "</think>", "1", "x", "\n",
                                  "{", "<"]), max_size=12))
def test_garbage_never_raises_and_never_retracts(pieces):
    b = _QWEN35_TOOLS()
    stream_robust(b.parser, "".join(pieces))


_cache: dict = {}


def _QWEN35_TOOLS():  # noqa: N802 - cached bundle for the property test
    if "b" not in _cache:
        _cache["b"] = bundle("Qwen3.5-4B.jinja", tools=[SPECIAL])
    return _cache["b"]


def test_markup_indented_as_a_block_is_read_at_improved_and_a_value_keeps_its_own_indentation():
    """SGLang's qwen3coder fixture (batch-1 case fresh-sgl-qwen3coder-indented) indents every tag by 8 spaces;
    tag-whitespace's indented variant reads it (values stripped, as SGLang / vLLM strip them) only where the
    template's layout fails, so a code value under an unindented tag keeps its indentation (reference ref-0008)."""
    from core.chat.pipeline import build_chat_parser
    from core.chat.request import ChatRequest

    def parser(fidelity, disabled=()):
        req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Hello"}], "tools": [PYTHON]})
        return build_chat_parser(template("Qwen-Qwen3-Coder-30B-A3B-Instruct.jinja"), req, fidelity=fidelity,
                                 disabled_repairs=disabled).parser
    indented = ("Sure.<tool_call>\n        <function=python>\n        <parameter=code>\n        print(1)\n"
                "        </parameter>\n        </function>\n        </tool_call>")
    msg = parser("improved").parse(indented)   # streamed: the fresh-sgl-qwen3coder-indented* real-output cases
    assert msg.content == "Sure." and args(msg) == {"code": "print(1)"}
    assert "tag-whitespace" in {r.name for r in msg.repairs}
    for off in (parser("llama.cpp"), parser("improved", ["tag-whitespace"])):
        assert off.parse(indented).tool_calls == []
    own = "<tool_call>\n<function=python>\n<parameter=code>\n    print(1)\n</parameter>\n</function>\n</tool_call>"
    assert args(parser("improved").parse(own)) == {"code": "    print(1)"}
