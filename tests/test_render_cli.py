"""``python -m core render``: the text a template renders for a request's conversation, as the Edit page's live
render shows it. A template author's first step had no command (lint, compare and export rendered internally,
`grammar --json` printed only the generation prompt)."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import ROOT, TEMPLATES

QWEN25 = str(TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja")
REQUEST = "assets/requests/req.json"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core", "render", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_render_prints_the_prompt_for_the_request() -> None:
    p = _run(QWEN25, "--request", REQUEST)
    assert p.returncode == 0, p.stderr
    tool = json.loads((ROOT / REQUEST).read_text(encoding="utf-8"))["tools"][0]
    assert p.stdout.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                               "assistant.\n\n# Tools\n")
    assert "<tools>\n" + json.dumps(tool) + "\n</tools>" in p.stdout    # tojson of the tool, as the template writes
    assert p.stdout.endswith("<|im_start|>user\nWhat is the weather like in New York and in Beijing?<|im_end|>\n"
                             "<|im_start|>assistant\n")
    q = _run(QWEN25, "--request", REQUEST, "--no-generation-prompt")
    assert q.returncode == 0 and q.stdout + "<|im_start|>assistant\n" == p.stdout


def test_render_without_request_is_one_user_message() -> None:
    p = _run(QWEN25)
    assert p.returncode == 0, p.stderr
    assert p.stdout.endswith("<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n")
    assert "# Tools" not in p.stdout


def test_a_template_that_raises_is_one_line_naming_it_and_the_line(tmp_path) -> None:
    # Qwen2.5's template concatenates content with +: typed content parts (a list) raise a TypeError in it
    req = tmp_path / "typed.json"
    req.write_text(json.dumps({"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}),
                   encoding="utf-8")
    p = _run(QWEN25, "--request", str(req))
    err = p.stderr.strip()
    assert p.returncode == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("error: Qwen-Qwen2.5-7B-Instruct.jinja: Render error at line ") and "TypeError" in err


def test_a_tool_name_with_bidi_characters_is_printed_escaped(tmp_path) -> None:
    # the name of CVE-2021-42574's "Trojan Source" class: a right-to-left override inside an identifier
    req = json.loads((ROOT / REQUEST).read_text(encoding="utf-8"))
    req["tools"][0]["function"]["name"] = "get_weather\u202e"
    path = tmp_path / "bidi.json"
    path.write_text(json.dumps(req, ensure_ascii=False), encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "core", "render", str(TEMPLATES / "Qwen-Qwen3-Coder-30B-A3B-Instruct.jinja"),
                        "--request", str(path)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "<name>get_weather\\u202e</name>" in p.stdout and "\u202e" not in p.stdout


def test_render_passes_the_requests_chat_template_kwargs_as_a_server_does(tmp_path) -> None:
    # DeepSeek V3.1 reads its thinking switch from chat_template_kwargs {"thinking": …}: the render (the labelling
    # guide's step 0) must show the prompt explain parses against, not the template's default
    dsv31 = str(TEMPLATES / "deepseek-ai-DeepSeek-V3.1.jinja")
    ends = {}
    for thinking in (False, True):
        req = tmp_path / f"thinking-{thinking}.json"
        req.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}],
                                   "chat_template_kwargs": {"thinking": thinking}}), encoding="utf-8")
        p = _run(dsv31, "--request", str(req))
        assert p.returncode == 0, p.stderr
        ends[thinking] = p.stdout
    assert ends[False].endswith("<｜User｜>hi<｜Assistant｜><think></think>"), ends[False][-60:]
    assert ends[True].endswith("<｜User｜>hi<｜Assistant｜><think>")


def test_a_template_written_for_llama_cpps_engine_renders_in_its_dialect(tmp_path) -> None:
    # Kimi-K2-Instruct.jinja (as llama.cpp vendors it) queues call ids with list.append, which transformers'
    # sandbox refuses: the error says so and names the dialect that renders it; --dialect llama.cpp renders it
    kimi = str(TEMPLATES / "Kimi-K2-Instruct.jinja")
    req = tmp_path / "call.json"
    req.write_text(json.dumps({
        "messages": [{"role": "user", "content": "hi"},
                     {"role": "assistant", "content": "", "tool_calls": [{"id": "functions.get_weather:0",
                      "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}}}}],
        "add_generation_prompt": False}), encoding="utf-8")
    p = _run(kimi, "--request", str(req))
    err = p.stderr.strip()
    assert p.returncode == 2 and len(err.splitlines()) == 1, err
    assert "'append' of 'list' object is not allowed" in err and err.endswith("add --dialect llama.cpp")
    q = _run(kimi, "--request", str(req), "--dialect", "llama.cpp")
    assert q.returncode == 0, q.stderr
    assert q.stdout.endswith("<|im_assistant|>assistant<|im_middle|><|tool_calls_section_begin|><|tool_call_begin|>"
                             "functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}"
                             "<|tool_call_end|><|tool_calls_section_end|><|im_end|>")
