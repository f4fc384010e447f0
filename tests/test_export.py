"""Issue 13: response_template export proven by transformers' parser; the per-template conformance suite.

A representative subset (the full-corpus figure comes from `python -m core export --batch`, in docs/export.md)."""

import json
import pathlib
import subprocess
import sys

import pytest

from core.export.response_template import Flavour, export_response_template
from core.export.suite import check_suite_ours, generate_suite, write_suite
from core.export.tokenizer_config import merge_tokenizer_config
from core.export.consumers import TRANSFORMERS_MIN
from core.export.verify import CheckStatus, reference_cases, transformers_available, verify
from core.jinja.template import ChatTemplate

SHARED = pathlib.Path(__file__).resolve().parents[1].parent / "shared"
TEMPLATES = SHARED / "templates"
CASES = SHARED / "reference" / "cases.jsonl"
pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates not present")
needs_transformers = pytest.mark.skipif(not transformers_available(),
                                        reason=f"transformers >= {TRANSFORMERS_MIN} not installed")


def load(name):
    return ChatTemplate((TEMPLATES / name).read_text(encoding="utf-8"), name)


# one per family / format: JSON_NATIVE (Qwen3, Hermes, Llama 3.1, Mistral), TAG_WITH_TAGGED (Qwen3-Coder, GLM),
# TAG_WITH_JSON + call ids (Kimi K2), forced-open reasoning (DeepSeek R1 distill)
AGREEING = ["Qwen-Qwen3-0.6B.jinja", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
            "meta-llama-Llama-3.1-8B-Instruct.jinja", "mistralai-Mistral-Nemo-Instruct-2407.jinja",
            "Qwen3-Coder.jinja", "GLM-4.6.jinja", "Kimi-K2-Instruct.jinja",
            # a repeated content opener (ref-0340), text after the reasoning opener, synthesized reasoning,
            # Python-literal object values
            "CohereForAI-c4ai-command-r-plus-tool_use.jinja", "Apriel-1.6-15b-Thinker-fixed.jinja",
            "Qwen-QwQ-32B.jinja", "ByteDance-Seed-OSS.jinja"]


@needs_transformers
@pytest.mark.parametrize("name", AGREEING)
def test_export_agrees_with_transformers(name):
    t = load(name)
    res = export_response_template(t)
    assert res.exportable, res.reasons
    v = verify(res.response_template, t, cases=reference_cases(str(CASES), name))
    assert v.agrees, v.first_disagreement.to_json() if v.first_disagreement else v.count_summary()
    assert v.count(CheckStatus.AGREE) >= 5


# exports whose opener does not start with one literal: the literal text after a run goes into an alternation
# (core/export/linear.py) so the regex module's partial search stays linear — transformers still parses the same
REQUIRED_LITERAL_HIDDEN = [("hfjs-meetkai-functionary-medium-v2.2.jinja", "improved"),
                           ("meetkai-functionary-medium-v3.2.jinja", "llama.cpp"),
                           ("upstage-Solar-Open-100B.jinja", "llama.cpp"),
                           ("openai-gpt-oss-120b.jinja", "llama.cpp"), ("Kimi-K2-Instruct.jinja", "llama.cpp")]


@needs_transformers
@pytest.mark.parametrize("name, fidelity", REQUIRED_LITERAL_HIDDEN)
def test_export_with_a_hidden_required_literal_agrees_with_transformers(name, fidelity):
    t = load(name)
    res = export_response_template(t, fidelity=fidelity)
    assert res.exportable, res.reasons
    assert "|(?!))" in res.response_template["fields"]["tool_calls"]["open_pattern"]
    v = verify(res.response_template, t, fidelity=fidelity, cases=reference_cases(str(CASES), name))
    assert v.agrees, v.first_disagreement.to_json() if v.first_disagreement else v.count_summary()
    assert v.count(CheckStatus.AGREE) >= 7


def test_qwen3_maps_markers_and_anchor():
    rt = export_response_template(load("Qwen-Qwen3-0.6B.jinja")).response_template
    assert rt["start_anchor_pattern"] == r"<\|im_start\|>assistant(?:\s*</think>)?"
    assert rt["fields"]["reasoning_content"] == {"open": "<think>", "close": "</think>", "content": "text"}
    assert rt["fields"]["tool_calls"]["content"] == "json"
    assert rt["fields"]["tool_calls"]["transform"]["function"]["arguments"] == "{content.arguments}"


def test_vllm_flavour_uses_thinking_and_only_its_fields():
    rt = export_response_template(load("Qwen-Qwen3-0.6B.jinja"), flavour=Flavour.VLLM).response_template
    assert set(rt["fields"]) <= {"thinking", "content", "tool_calls"} and "thinking" in rt["fields"]
    assert set(rt["defaults"]) == {"role"}


def test_kimi_call_id_is_captured():
    rt = export_response_template(load("Kimi-K2-Instruct.jinja")).response_template
    assert "(?P<id>" in rt["fields"]["tool_calls"]["open_pattern"]
    assert rt["fields"]["tool_calls"]["transform"]["id"] == "{id}"


def test_repeated_opener_field_only_for_transformers():
    t = load("CohereForAI-c4ai-command-r-plus-tool_use.jinja")
    rt = export_response_template(t).response_template
    assert rt["fields"]["repeated_opener"] == {"open_pattern": r"\A\s{0,1000}+<\|CHATBOT_TOKEN\|>", "close_pattern": "",
                                              "content": "text"}
    vllm = export_response_template(t, flavour=Flavour.VLLM)
    assert vllm.exportable and "repeated_opener" not in vllm.response_template["fields"]


@needs_transformers
def test_repeated_opener_is_dropped_from_the_message():
    from transformers.utils.chat_parsing import parse_response

    res = export_response_template(load("CohereForAI-c4ai-command-r-plus-tool_use.jinja"))
    msg = parse_response("<|CHATBOT_TOKEN|>Hello!<|END_OF_TURN_TOKEN|>", res.response_template,
                         prefix="x" + res.generation_prompt)
    assert msg == {"role": "assistant", "content": "Hello!"}


def test_text_after_the_reasoning_opener_is_part_of_the_opener():
    rt = export_response_template(load("Apriel-1.6-15b-Thinker-fixed.jinja")).response_template
    assert rt["start_anchor_pattern"].startswith("(?=<\\|begin_assistant\\|>")
    assert rt["fields"]["reasoning_content"]["open_pattern"] == \
        r"<\|begin_assistant\|>(?:\s{0,1000}+Here\ are\ my\ reasoning\ steps:)?"


def test_python_literal_values_get_a_value_parser():
    seed = export_response_template(load("ByteDance-Seed-OSS.jinja")).response_template
    assert seed["fields"]["tool_calls"]["content_args"]["value_parser"]["args"]["string_delims"] == [["'", "'"]]
    coder = export_response_template(load("Qwen3-Coder.jinja")).response_template  # JSON object values
    assert "value_parser" not in coder["fields"]["tool_calls"]["content_args"]


def test_pythonic_call_lists_export_at_improved():
    rt = export_response_template(load("vllm-tool_chat_template_llama3.2_pythonic.jinja"),
                                  fidelity="improved").response_template
    assert rt["fields"]["tool_calls"]["content"] == "python-call-list"
    assert "probe text" in export_response_template(load("vllm-tool_chat_template_llama3.2_pythonic.jinja")).reasons[0]
    res = export_response_template(load("hfjs-openbmb-MiniCPM3-4B.jinja"), fidelity="improved")
    assert not res.exportable and "bracketed list" in res.reasons[0]


def test_unexpressible_template_gives_reason_not_template():
    res = export_response_template(load("Apertus-8B-Instruct.jinja"))
    assert res.response_template is None
    assert res.reasons and "keyed by the function name" in res.reasons[0]
    vllm = export_response_template(load("openai-gpt-oss-120b.jinja"), flavour="vllm")
    assert vllm.response_template is None and "harmony" in vllm.reasons[0]


@needs_transformers
def test_forced_open_reasoning_prefix_opens_the_region():
    name = "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.llamacpp-edit.jinja"
    t = load(name)
    res = export_response_template(t)
    assert res.generation_prompt.endswith("<think>\n")
    from transformers.utils.chat_parsing import parse_response

    msg = parse_response("Let me think.\n</think>\n\nHi!", res.response_template,
                         prefix="<｜User｜>Hello" + res.generation_prompt)
    assert msg["reasoning_content"] == "Let me think." and msg["content"] == "Hi!"


def test_suite_cases_pass_with_our_parser():
    t = load("Qwen-Qwen3-0.6B.jinja")
    suite = generate_suite(t)
    ids = {c["id"] for c in suite.cases}
    assert {"suite-plain_content", "suite-parallel_calls", "suite-marker_in_argument",
            "suite-truncated_in_reasoning", "suite-truncated_in_second_call"} <= ids
    assert all(why is None for why in check_suite_ours(suite, t).values())


def test_suite_synthesizes_reasoning_a_template_drops():
    t = load("Qwen-QwQ-32B.jinja")
    suite = generate_suite(t)
    plain = next(c for c in suite.cases if c["id"] == "suite-plain_content")
    assert plain["note"].startswith("reasoning synthesized")
    assert plain["input"].endswith("</think>\n\nParis is sunny today, 21 °C.")
    assert plain["expect"]["reasoning_content"] and len(suite.cases) == 11
    assert all(why is None for why in check_suite_ours(suite, t).values())


@pytest.mark.parametrize("fidelity", ["llama.cpp", "improved"])
def test_suite_reasoning_case_from_the_field_the_template_reads(fidelity):
    # gpt-oss renders message.thinking in its analysis channel (never reasoning_content): the case is its own render
    t = load("openai-gpt-oss-120b.jinja")
    suite = generate_suite(t, fidelity=fidelity)
    case = next(c for c in suite.cases if c["id"] == "suite-reasoning_and_content")
    assert case["note"].startswith("reasoning given as message.thinking")
    reasoning = case["expect"]["reasoning_content"]
    assert case["input"] == (f"<|channel|>analysis<|message|>{reasoning}<|end|><|start|>assistant<|channel|>final"
                             "<|message|>It is sunny.")
    assert case["expect"]["content"] == "It is sunny."
    cut = next(c for c in suite.cases if c["id"] == "suite-truncated_in_reasoning")
    assert cut["is_partial"] and case["input"].startswith(cut["input"])
    assert all(why is None for why in check_suite_ours(suite, t).values())


def test_suite_reasoning_case_solar_open():
    # Solar Open renders message.reasoning as its own turn; read at improved (reasoning-field, reasoning-turn-header)
    t = load("upstage-Solar-Open-100B.jinja")
    suite = generate_suite(t, fidelity="improved")
    case = next(c for c in suite.cases if c["id"] == "suite-reasoning_and_content")
    assert case["note"].startswith("reasoning given as message.reasoning")
    assert case["input"].startswith("<|think|>") and case["input"].endswith("<|end|><|begin|>assistant<|content|>It is sunny.")
    assert all(why is None for why in check_suite_ours(suite, t).values())


def test_suite_skips_what_the_template_cannot_represent():
    suite = generate_suite(load("meta-llama-Llama-3.1-8B-Instruct.jinja"))
    assert "parallel_calls" in suite.skipped and "single tool-calls" in suite.skipped["parallel_calls"]


def test_suite_skips_content_a_template_writes_as_reasoning():
    # gpt-oss renders the text beside a call in its analysis channel, exactly as it renders that text as reasoning
    t = load("openai-gpt-oss-120b.jinja")
    suite = generate_suite(t, fidelity="improved")
    assert "writes content beside a call exactly as it writes the same text as reasoning" in \
        suite.skipped["call_after_text"]
    assert "suite-one_call" in {c["id"] for c in suite.cases}
    assert all(why is None for why in check_suite_ours(suite, t).values())
    # Qwen3 renders content beside a call outside <think>: the case stays
    assert "call_after_text" not in generate_suite(load("Qwen-Qwen3-0.6B.jinja")).skipped


def test_written_suite_runs_green_from_a_clean_directory(tmp_path):
    t = load("Qwen3-Coder.jinja")
    paths = write_suite(generate_suite(t), t, str(tmp_path / "suite"))
    rows = [json.loads(line) for line in open(paths["cases"], encoding="utf-8")]
    assert rows and all(set(r) >= {"id", "template", "messages", "tools", "input", "is_partial", "expect"} for r in rows)
    root = pathlib.Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_suite.py"],
                       cwd=tmp_path / "suite", capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stdout[-800:]
    assert f"{len(rows)} passed" in p.stdout
    if transformers_available():  # truncated outputs and the marker inside a string are skipped, the rest agrees
        p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "test_suite.py"],
                           cwd=tmp_path / "suite", capture_output=True, text=True, timeout=120,
                           env={"SUITE_BACKEND": "transformers", "PATH": "/usr/bin:/bin"})
        assert p.returncode == 0, p.stdout[-800:]
        skipped = sum(r["is_partial"] or r["id"] == "suite-marker_in_argument" for r in rows)
        assert skipped == 2 and f"{len(rows) - skipped} passed, {skipped} skipped" in p.stdout
        assert "limit of the format" in p.stdout


@needs_transformers
def test_verify_does_not_print_the_no_torch_notice():
    p = subprocess.run([sys.executable, "-m", "core", "export", str(TEMPLATES / "Qwen-Qwen3-0.6B.jinja"), "--verify"],
                       capture_output=True, text=True, timeout=120, cwd=pathlib.Path(__file__).resolve().parents[1])
    assert p.returncode == 0 and p.stderr.startswith("verification: agree")
    assert "PyTorch" not in p.stderr


def test_export_without_verify_says_it_was_not_verified():
    """The README calls the export "verified by transformers' own parser" and the engine lines say "serves", but
    a plain ``export`` runs nothing through transformers: a template whose generation prompt lost its ``<think>``
    exported a reasoning field that never opens, with no word that it went unchecked. Stderr now says so."""
    p = subprocess.run([sys.executable, "-m", "core", "export", str(TEMPLATES / "Qwen-Qwen3-0.6B.jinja")],
                       capture_output=True, text=True, timeout=120, cwd=pathlib.Path(__file__).resolve().parents[1])
    assert p.returncode == 0, p.stderr
    assert p.stderr.splitlines()[0] == ("verification: not run (--verify checks this response_template with "
                                        "transformers' own parser, transformers >= 5.25, before printing it)")
    assert json.loads(p.stdout)["fields"]["reasoning_content"]["open"] == "<think>"


def test_one_minimum_transformers_everywhere():
    """The docs said transformers 5.13 in one place and the engine line 5.25: the proof has only run on 5.25, so that
    is the one minimum, in the test extra, the engine line and what a missing or older transformers is told."""
    from core.export.consumers import FLAGS, Consumer

    root = pathlib.Path(__file__).resolve().parents[1]
    assert TRANSFORMERS_MIN == "5.25"
    assert '"transformers>=5.25"' in (root / "pyproject.toml").read_text(encoding="utf-8")
    assert FLAGS[Consumer.TRANSFORMERS] == "tokenizer.parse_response(...) (transformers >= 5.25)"
    docs = (root / "docs" / "export.md").read_text(encoding="utf-8")
    assert "transformers ≥ 5.25" in docs and "5.13)" in docs and "≥ 5.13" not in docs


@pytest.mark.parametrize("installed, why", [
    (None, "verification needs transformers >= 5.25 (pip install 'transformers>=5.25'; no torch needed); "
           "transformers is not installed"),
    ("5.13.0", "verification needs transformers >= 5.25 (pip install 'transformers>=5.25'; no torch needed); "
               "transformers 5.13.0 is installed, older than the release the export is proven on"),
    ("5.9.1.dev0", "verification needs transformers >= 5.25 (pip install 'transformers>=5.25'; no torch needed); "
                   "transformers 5.9.1.dev0 is installed, older than the release the export is proven on"),
])
def test_verify_without_a_new_enough_transformers_names_the_minimum(monkeypatch, installed, why):
    """With transformers missing or older than the proof's release, verify stops with one line naming the minimum
    and what is installed (it named 5.13, and an older transformers whose chat_parsing imported ran the proof)."""
    import core.export.verify as v
    from core.errors import DependencyError
    from core.jinja.template import ChatTemplate

    monkeypatch.setattr(v, "transformers_version", lambda: installed)
    assert not v.transformers_available() and not v.transformers_installed()
    assert v.transformers_missing() == why.removeprefix("verification ")
    t = ChatTemplate((TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8"), "Qwen-Qwen3-0.6B.jinja")
    with pytest.raises(DependencyError) as e:
        v.verify({}, t)
    assert str(e.value) == why and isinstance(e.value, RuntimeError)


def test_a_release_at_or_past_the_minimum_is_new_enough(monkeypatch):
    import core.export.verify as v

    for found in ("5.25.0", "5.25", "5.30.1", "6.0.0rc1", "10.0"):
        monkeypatch.setattr(v, "transformers_version", lambda: found)
        assert v.transformers_missing() == "", found


@needs_transformers
def test_cases_for_no_template_of_that_name_are_said_so(tmp_path):
    """Reference cases name their template by file name: an author verifying an edited copy (`my-edit.jinja`)
    with `--cases ../shared/reference/cases.jsonl` got a lower count and no word that none of the file's cases
    had run. The template under its own name runs its cases and says nothing."""
    src = TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja"
    copy = tmp_path / "my-edit.jinja"
    copy.write_text(src.read_text(encoding="utf-8"), encoding="utf-8")
    cases = str(CASES)
    root = pathlib.Path(__file__).resolve().parents[1]
    runs = [subprocess.run([sys.executable, "-m", "core", "export", str(t), "--verify", "--cases", cases],
                           capture_output=True, text=True, timeout=120, cwd=root) for t in (copy, src)]
    assert [p.returncode for p in runs] == [0, 0], [p.stderr for p in runs]
    assert runs[0].stderr.splitlines()[0] == (f"note: no case of {cases} is for my-edit.jinja (cases are matched by "
                                              "the template's file name, as each row's \"template\" gives it); "
                                              "only the round trip is checked")
    assert not runs[1].stderr.startswith("note:")
    counts = [int(p.stderr.split("verification: agree ")[1].split(",")[0]) for p in runs]
    assert counts[1] > counts[0], counts


def test_suite_files_write_bidi_characters_as_json_escapes(tmp_path):
    """`suite` wrote a template named with U+202E (Trojan Source's right-to-left override) raw into every row of
    cases.jsonl, so `cat` or a diff of the file showed the line reordered. The JSON files now carry JSON's own
    escape (the same value read back); template.jinja stays the template's exact text."""
    name = "evil`\u202e](javascript:alert(1)).jinja"
    template = ChatTemplate((TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8"), name)
    paths = write_suite(generate_suite(template), template, str(tmp_path / "suite"))
    for kind, path in paths.items():
        if kind != "template" and pathlib.Path(path).exists():
            assert "\u202e" not in pathlib.Path(path).read_text(encoding="utf-8"), kind
    rows = [json.loads(line) for line in pathlib.Path(paths["cases"]).read_text(encoding="utf-8").splitlines()]
    assert rows and {r["template"] for r in rows} == {name}


def test_a_reasoning_opener_the_anchor_consumes_is_not_said_to_open_reasoning():
    """DeepSeek R1 distill's template with `<think>\\n` dropped from its generation prompt (an author's edit): the
    analysis takes `<｜Assistant｜>` for the reasoning start, and the start_anchor ends on that same marker. The
    export's note said "it is left after the start_anchor, so the prefix opens the reasoning region", which is
    false; it now says the anchor consumes it. The unedited template keeps the note, true there."""
    src = (TEMPLATES / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.llamacpp-edit.jinja").read_text(encoding="utf-8")
    edited = src.replace("{{'<｜Assistant｜><think>\\n'}}", "{{'<｜Assistant｜>'}}")
    assert edited != src
    notes = {name: [n for n in export_response_template(ChatTemplate(text, name)).notes if "reasoning" in n]
             for name, text in (("edited.jinja", edited), ("original.jinja", src))}
    assert notes["edited.jinja"] == ["the reasoning opener '<｜Assistant｜>' is also the start_anchor, which the "
                                     "prompt ends with: the prefix never opens the reasoning region (was the "
                                     "assistant marker taken for a reasoning opener? check reasoning.start)"]
    assert notes["original.jinja"] == ["the generation prompt opens reasoning ('<think>'): it is left after the "
                                       "start_anchor, so the prefix opens the reasoning region"]


def test_tokenizer_config_merge_keeps_other_keys():
    out = merge_tokenizer_config({"eos_token": "<|im_end|>", "response_template": {"old": 1}}, {"version": 1})
    assert out == {"eos_token": "<|im_end|>", "response_template": {"version": 1}}
    with pytest.raises(ValueError, match="tokenizer_config"):
        merge_tokenizer_config([], {"version": 1})


def test_cli_refuses_unexportable_with_one_line():
    p = subprocess.run([sys.executable, "-m", "core", "export", str(TEMPLATES / "Apertus-8B-Instruct.jinja")],
                       capture_output=True, text=True, timeout=120, cwd=pathlib.Path(__file__).resolve().parents[1])
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.strip().splitlines()[-1].startswith("error: Apertus-8B-Instruct.jinja: cannot be exported")


def test_cli_bad_tokenizer_config_is_one_line(tmp_path):
    bad = tmp_path / "tokenizer_config.json"
    bad.write_text("[1]", encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "core", "export", str(TEMPLATES / "Qwen3-Coder.jinja"), "--format",
                        "tokenizer-config", "--tokenizer-config", str(bad)], capture_output=True, text=True,
                       timeout=120, cwd=pathlib.Path(__file__).resolve().parents[1])
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines()[-1] == f"error: {bad}: tokenizer_config: expected a JSON object, got list"


def test_content_turn_header_exports_as_a_field_for_transformers_only():
    # improvement content-turn-header: Hunyuan A13B's answers start with '助手：'
    from core.export.response_template import CONTENT_HEADER_FIELD

    t = load("vllm-tool_chat_template_hunyuan_a13b.jinja")
    res = export_response_template(t, fidelity="improved")
    assert res.response_template["fields"][CONTENT_HEADER_FIELD]["open_pattern"] == r"\A\s{0,1000}+助手："
    assert CONTENT_HEADER_FIELD not in (export_response_template(t).response_template or {}).get("fields", {})
    vllm = export_response_template(t, fidelity="improved", flavour="vllm")
    assert vllm.response_template is None and "header" in vllm.reasons[0]


@pytest.mark.parametrize("content, why", [(None, "No such file or directory"),
                                          ('{"id":\n', "line 1 is not JSON (Expecting value)"),
                                          ("[1]\n", "line 1 is not a JSON object"),
                                          ('{"id": "x", "template": "Qwen3-Coder.jinja"}\n',
                                           "line 1 has no messages, input")])
def test_cli_bad_cases_file_is_one_line(tmp_path, content, why):
    # a missing --cases file was skipped silently (exit 0, no reference case checked); one that is not JSON
    # ended in "internal error in export: JSONDecodeError"
    cases = tmp_path / "cases.jsonl"
    if content is not None:
        cases.write_text(content, encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "core", "export", str(TEMPLATES / "Qwen3-Coder.jinja"), "--verify",
                        "--cases", str(cases)], capture_output=True, text=True, timeout=120,
                       cwd=pathlib.Path(__file__).resolve().parents[1])
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines()[-1].startswith(f"error: {cases}: {why}")


def test_written_suite_refuses_an_unknown_backend(tmp_path):
    # SUITE_BACKEND=bogus ran our parser and reported green; a backend that is not importable skipped every case
    t = load("Qwen3-Coder.jinja")
    write_suite(generate_suite(t), t, str(tmp_path / "suite"))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_suite.py"],
                       cwd=tmp_path / "suite", capture_output=True, text=True, timeout=120,
                       env={"SUITE_BACKEND": "bogus", "PATH": "/usr/bin:/bin"})
    assert p.returncode != 0 and "passed" not in p.stdout
    assert "SUITE_BACKEND='bogus': expected 'ours' or 'transformers'" in p.stdout


def test_cli_tokenizer_config_without_its_format_is_an_error(tmp_path):
    # the file was silently ignored and the bare response_template printed
    base = tmp_path / "tokenizer_config.json"
    base.write_text('{"eos_token": "<|im_end|>"}', encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "core", "export", str(TEMPLATES / "Qwen3-Coder.jinja"),
                        "--tokenizer-config", str(base)], capture_output=True, text=True, timeout=120,
                       cwd=pathlib.Path(__file__).resolve().parents[1])
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines()[-1] == ("error: --tokenizer-config is merged into only with --format "
                                                 "tokenizer-config (got --format response-template)")


def test_cli_suite_output_that_cannot_be_a_directory_is_a_one_line_error(tmp_path, capsys):
    # `suite -o EXISTING_FILE` printed "error: [Errno 17] File exists: '…'"
    from core.cli import main

    existing = tmp_path / "out.txt"
    existing.write_text("keep me", encoding="utf-8")
    template = str(TEMPLATES / "Qwen3-Coder.jinja")
    assert main(["suite", template, "-o", str(existing)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: -o {existing}: exists and is not a directory (the suite is a folder of files: " \
                  "cases.jsonl, test_suite.py, …)\n"
    assert existing.read_text(encoding="utf-8") == "keep me"
    # a parent that is a file: the write fails, named without the errno
    assert main(["suite", template, "-o", str(existing / "suite")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: -o {existing / 'suite'}: cannot write the suite ({existing / 'suite'}: Not a directory)\n"
    # the other verbs' paths: an OSError becomes "PATH: reason" too
    assert main(["repairs", "--suite", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'missing'}: No such file or directory\n"


def test_gbnf_export_is_the_grammar_for_the_sample_request_and_says_so():
    # the GBNF constrains calls to the sample request's tools; nothing said so, and additional stops were left out
    from core.chat.pipeline import build_chat_parser
    from core.chat.request import ChatRequest
    from core.chat.roundtrip import round_trip_request
    from core.export.gbnf import export_gbnf

    t = load("Qwen-Qwen3-0.6B.jinja")
    out = export_gbnf(t)
    p = build_chat_parser(t, ChatRequest.from_dict(round_trip_request()), fidelity="llama.cpp").parser
    assert out.startswith(p.grammar) and 'tool-0 ::=' in out
    tail = out[len(p.grammar):].strip().splitlines()
    assert tail[:2] == ["# lazy: true", '# trigger word: "<tool_call>\\n"']
    assert tail[-1].startswith("# request: the explorer's sample tools (get_weather, book_table), tool_choice auto;")
    assert "python -m core grammar TEMPLATE --request" in tail[-1]


@needs_transformers
def test_python_literal_booleans_stay_raw_text_in_transformers_and_the_export_says_so():
    # a documented limit (docs/export.md, the mapping): {'window': True} is not JSON even with ' delimiters
    from transformers.utils.chat_parsing import parse_response

    res = export_response_template(load("ByteDance-Seed-OSS.jinja"), fidelity="improved")
    assert any("True, False or None" in n for n in res.notes)
    tools = [{"type": "function", "function": {"name": "book", "parameters": {
        "type": "object", "properties": {"options": {"type": "object"}}}}}]
    out = ("<seed:tool_call>\n<function=book>\n<parameter=options>{}</parameter>\n</function>\n"
           "</seed:tool_call>")
    def args(value):
        msg = parse_response(out.format(value), res.response_template, prefix="<seed:bos>assistant\n", tools=tools)
        return msg["tool_calls"][0]["function"]["arguments"]["options"]
    assert args("{'a': 1}") == {"a": 1}
    assert args("{'window': True}") == "{'window': True}"


@needs_transformers
@pytest.mark.parametrize("name", ["Mistral-Small-3.2-24B-Instruct-2506.jinja", "mistral-common-v3.jinja"])
def test_empty_generation_prompt_anchors_after_a_tool_result_too(name):
    # the anchor was the last [/INST] only: after a tool result the prompt ends with [/TOOL_RESULTS], so the
    # previous turn's call and the result were parsed as this message (transformers raised on the JSON region)
    from transformers.utils.chat_parsing import parse_response

    from core.export.response_template import _tool_result_prompt

    t = load(name)
    rt = export_response_template(t).response_template
    prefix = _tool_result_prompt(t, "llama.cpp")
    assert prefix.rstrip().endswith("[/TOOL_RESULTS]") and "[TOOL_CALLS]" in prefix
    assert parse_response("It is sunny in Paris.", rt, prefix=prefix) == {"role": "assistant",
                                                                          "content": "It is sunny in Paris."}
    user_turn = parse_response("Hi.", rt, prefix="[INST]Hello[/INST]")
    assert user_turn == {"role": "assistant", "content": "Hi."}


@needs_transformers
@pytest.mark.parametrize("name, output, expect", [
    # Gemma 4 goes on in the model turn after <tool_response|> (no new <|turn>model); this one opens the thought
    # channel there, which must stay for the parser
    ("vllm-tool_chat_template_gemma4.jinja", "Checked.<channel|>It is sunny.",
     {"role": "assistant", "reasoning_content": "Checked.", "content": "It is sunny."}),
    # DeepSeek V3.2 ends the prompt after tool results with </function_results>\n\n<think>
    ("deepseek-ai-DeepSeek-V3.2.jinja", "Checked.</think>It is sunny.",
     {"role": "assistant", "reasoning_content": "Checked.", "content": "It is sunny."})])
def test_anchor_after_a_tool_result_keeps_the_reasoning_opener(name, output, expect):
    from transformers.utils.chat_parsing import parse_response

    from core.export.response_template import _tool_result_prompt

    t = load(name)
    prefix = _tool_result_prompt(t, "llama.cpp")
    assert parse_response(output, export_response_template(t).response_template, prefix=prefix) == expect


@pytest.mark.parametrize("extra, message", [
    (["--batch", "."], "export takes TEMPLATE or --batch DIR, not both"),
    (["--format", "gbnf", "--verify"], "--format gbnf takes neither --verify nor --for"),
    (["--format", "gbnf", "--for", "vllm"], "--format gbnf takes neither --verify nor --for")])
def test_cli_options_that_would_be_ignored_are_errors(extra, message):
    # the template was silently ignored beside --batch (the whole folder ran); --verify / --for beside gbnf did
    # nothing
    p = subprocess.run([sys.executable, "-m", "core", "export", str(TEMPLATES / "Qwen3-Coder.jinja"), *extra],
                       capture_output=True, text=True, timeout=120, cwd=pathlib.Path(__file__).resolve().parents[1])
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines()[-1].startswith(f"error: {message}")


@needs_transformers
def test_functionary_v2_2_exports_with_call_turn_header():
    # improvement call-turn-header: every call is its own '<|from|>assistant\n<|recipient|>NAME' turn; the first
    # may follow the generation prompt directly (its header is the prompt's)
    from core.export.verify import _parse_theirs, _quiet_transformers

    t = load("hfjs-meetkai-functionary-medium-v2.2.jinja")
    assert "probe text" in export_response_template(t).reasons[0]  # llama.cpp's analysis
    res = export_response_template(t, fidelity="improved")
    assert res.exportable, res.reasons
    prefix = "<|from|>user\n<|recipient|>all\n<|content|>Weather?\n<|from|>assistant\n<|recipient|>"
    call = '<|content|>{"city":"Paris","days":3}'
    with _quiet_transformers():
        for out, content, names in [("get_weather\n" + call, None, ["get_weather"]),
                                    ("all\n<|content|>Sure.\n<|from|>assistant\n<|recipient|>get_weather\n" + call
                                     + "\n<|from|>assistant\n<|recipient|>book_table\n<|content|>{}",
                                     "Sure.", ["get_weather", "book_table"]),
                                    ("all\n<|content|>Paris is sunny.", "Paris is sunny.", [])]:
            one, streamed = _parse_theirs(res.response_template, prefix, out, [])
            assert one == streamed and one.get("content") == content
            assert [c["function"]["name"] for c in one.get("tool_calls", [])] == names


def test_a_handler_family_whose_analysis_misses_its_reasoning_and_calls_is_refused():
    # K2 Horizon (b11549): the generic analysis sees content only; the handler parses reasoning and tool calls
    import pathlib
    from core.export.response_template import export_response_template
    from core.export.cli import _load

    path = pathlib.Path(__file__).resolve().parent / "data" / "b11549" / "IFM-K2-Horizon.jinja"
    res = export_response_template(_load(str(path)))
    assert res.response_template is None
    assert res.reasons == ["special handler k2-horizon: the handler parses reasoning and tool calls, but the generic "
                           "analysis (the export's source for this family) finds none; the export would drop them"]


def test_cli_cases_from_a_pipe_are_read_once():
    """`export --verify --cases <(cat cases.jsonl)`: the file was read twice (checked, then read for the
    template's rows), and a pipe is empty the second time, so the verification silently left out every
    reference case (Qwen2.5: "agree 7" instead of "agree 10"). Read once, a pipe gives what the file gives."""
    ref = pathlib.Path(TEMPLATES).parent / "reference" / "cases.jsonl"
    args = [sys.executable, "-m", "core", "export", str(TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja"), "--verify",
            "--cases"]
    root = pathlib.Path(__file__).resolve().parents[1]
    from_file = subprocess.run([*args, str(ref)], capture_output=True, text=True, timeout=120, cwd=root)
    piped = subprocess.run([*args, "/dev/stdin"], input=ref.read_text(encoding="utf-8"), capture_output=True,
                           text=True, timeout=120, cwd=root)
    line = next(x for x in from_file.stderr.splitlines() if x.startswith("verification:"))
    assert line.startswith("verification: agree 10,"), line
    assert line in piped.stderr.splitlines(), piped.stderr
