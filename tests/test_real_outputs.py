"""The sets of real outputs (core.chat.realset), each a directory of tests/data: every case at both fidelities,
one-shot and streamed at chunk sizes 1, 3, 17, whole and "several calls in one delta". No word is lost on any case
at either fidelity; the rates per set, fidelity and split are pinned exactly (:data:`PASS`), so a change that makes
a case worse (or better: then raise the figure) is seen. docs/realset-baseline.md says where each set comes from:

- ``real_outputs``: the evaluation set; holdout cases (by hash) were not looked at while the repairs were written
  (docs/fidelity-lossless.md).
- ``real_outputs_fresh``: batch 1 of kept-aside outputs (SGLang's detector tests, ollama's parser tests), dev since
  it was measured kept aside (llama.cpp 53, improved 71 then); repairs are written from it.
- ``real_outputs_kept``: the second kept-aside batch (transformers, lmdeploy, vendors' docs and model cards, SGLang
  and FunctionGemma notebooks, runs quoted in bug reports), dev since its kept-aside rate was reported (llama.cpp
  13, improved 23 then; "Second kept-aside split").
- ``real_outputs_kept3``: the third kept-aside batch, recorded runs printed by Unsloth's executed notebooks
  (transformers generate), a recorded format study and raw outputs quoted in public bug reports, a recorded
  tool-calling benchmark and Google's and Meta's cookbook notebooks, collected while repairs were written from the
  earlier sets, from pages no earlier set (nor the triage sets) used. Nobody writes repairs from it either.
- ``real_outputs_kept4``: the fourth kept-aside batch, recorded runs again from pages and outputs no earlier set (nor
  the triage sets) used: raw generations of open models in the Berkeley Function-Calling Leaderboard's published
  result files (GLM-4 chat, Granite 20B function-calling, Hermes 2 Pro / Theta), NVIDIA's executed Nemotron Super
  cookbooks, a NousResearch notebook, a Braintrust cookbook, unused files of the tool-calling benchmark and of
  Unsloth's notebooks, and one bug report; half of it expects a tool call. Nobody writes repairs from it.
- ``real_outputs_kept5``: the fifth kept-aside batch, recorded runs from pages and outputs no earlier set (nor the
  triage sets) used: gpt-oss-20b's multi-turn tool-calling trials served by llama.cpp (raw harmony text), another run
  of the Berkeley Function-Calling Leaderboard's result files (2024-07-25) and the Groq answers printed by
  llama-cookbook's Tool_Calling_101 notebook; more than half of it expects a tool call. Nobody writes repairs from
  it.
- ``real_outputs_kept6``: the sixth kept-aside batch, outputs quoted by vLLM's own parser tests from test files no
  earlier set used (eighteen families), each with the message the test asserts; two in three expect a tool call.
- ``real_outputs_kept7``: the seventh kept-aside batch, outputs quoted by SGLang's, lmdeploy's, ollama's and
  TensorRT-LLM's parser tests; development data for the reasoning and tool-call repairs since.
- ``real_outputs_kept8``: the eighth kept-aside batch, outputs quoted by SGLang's per-detector unit tests and vLLM's
  Gemma 4 tool-parser and Kimi K3 / Step-3.5 reasoning-parser tests (eleven families, test files no earlier set
  used); four in five expect a tool call. Nobody writes repairs from it.
- ``real_outputs_kept9``: the ninth kept-aside batch, outputs fed to their parsers by mlx-lm's, TensorRT-LLM's and
  lmdeploy's own parser tests from test files no earlier set used (fifteen families), each with the message the
  test asserts; all but one expect a tool call. Development data for the tool-call repairs since its first
  measure.
- ``real_outputs_kept10``: the tenth kept-aside batch, outputs fed to their parsers by vLLM's (Hy3, Nemotron Nano v2,
  Poolside, Gemma 4 bare calls), ollama's (GLM-5.2, Qwen3-VL, Command R, Qwen 3.8, Muse Glimmer, Laguna, Apertus 1.5,
  Granite thinking, DeepSeek) and TensorRT-LLM's (DeepSeek-R1 reasoning) parser tests from test files no earlier set
  used (thirteen families), each with the message the test asserts; three in five expect a tool call. Nobody writes
  repairs from it.
- ``real_outputs_kept11``: the eleventh kept-aside batch, outputs fed to their parsers by SGLang's (DeepSeek V3 / V4,
  MiniMax-M3, Spark 2.5, Apertus, InternLM2, GigaChat 3, Muse Glimmer), lmdeploy's (DeepSeek V4), ollama's (bare
  Qwen3-Coder calls, Qwen 3.5 calls inside the thinking) and vLLM's (MiniMax-M3, DeepSeek V4, Kimi K2.5, Gemma 4 and
  MiniMax-M1 reasoning, sanitized MiniMax-M2 calls) parser tests from test files no earlier set used (fourteen
  families), each with the message the test asserts; seven in twelve expect a tool call. Nobody writes repairs from
  it.
- ``real_outputs_reports2``: outputs quoted in public bug reports, the rows of the fourteenth triage batch
  (``tests/data/triage/kept12.jsonl``) whose report says what the right message is, each with that message; kept
  aside with the batch. Nobody writes repairs from it.
- ``real_outputs_reports3``: outputs quoted in public reports on agents and clients, the rows of the sixteenth
  triage batch (``tests/data/triage/kept14.jsonl``) whose report says what the right message is, each with that
  message; kept aside with the batch. Nobody writes repairs from it.
- ``real_outputs_kept12``: the twelfth kept-aside batch, outputs fed to their parsers by SGLang's (Kimi K3 tool and
  reasoning, Poolside, MiniMax-M2 nullable parameters, Qwen3-Coder), vLLM's (Apertus and sanitized MiniMax-M2
  reasoning), lmdeploy's (Muse Glimmer) and ollama's (Qwen3-VL thinking, Cogito) parser tests from test files no
  earlier set used (eight families), each with the message the test asserts; about half expect a tool call. Nobody
  writes repairs from it.
- ``real_outputs_kept13``: the thirteenth kept-aside batch, outputs fed to their parsers by vLLM's (MiniCPM5 XML,
  Qwen 3.6 and shared Qwen3 XML / Coder, GLM-4.7, Nemotron JSON, Qwen2.5-Coder and Hy v4 tool parsers; MiniMax-M2
  append-think, Gemma 4 reasoning with calls, Granite thinking, Hy v4 and Hunyuan reasoning parsers) and lmdeploy's
  (Kimi K2.6) parser tests from test files no earlier set used (twelve families), each with the message the test
  asserts; three in five expect a tool call. Nobody writes repairs from it.
- ``real_outputs_kept14``: the fourteenth kept-aside batch, outputs fed to their parsers by SGLang's (Cohere Command 4,
  Hunyuan), ollama's (Laguna JSON in content, Qwen3-VL think toggle) and Xinference's (Ling 3, Kimi K3 reasoning and
  tools, GLM-5, MiniMax, MiniMax-M3, DeepSeek V4, MiniCPM5) parser tests from test files no earlier set used (eleven
  families), each with the message the test asserts; seven in ten expect a tool call. Nobody writes repairs from
  it.
- ``real_outputs_kept15``: the fifteenth kept-aside batch, outputs fed to their parsers by Xinference's (DeepSeek
  V3.1, Qwen, Llama 3.1, Gemma 4, streaming partial markers), SGLang's (GLM-4.7 stream chunks and schema types,
  DeepSeek V4 streaming robustness, Gemma 4 string delimiters, MiniCPM5 finish(), Qwen3-Coder numeric precision),
  vLLM's (GLM reasoning) and lmdeploy's (Qwen3 consumed prefix) parser tests from test files no earlier set used, each
  family with its model's own template (ten families), each with the message the test asserts; six in seven expect
  a tool call. Nobody writes repairs from it.
- ``real_outputs_kept16``: the sixteenth kept-aside batch, outputs fed to their parsers by dynamo's (the per-family
  tool-call fixture table, Kimi K2, GLM-4.7 and DSML parser tests, Gemma 4 and MiniMax append-think reasoning
  tests), mistral.rs's (Qwen, Gemma 4, Llama, Mistral Nemo, Hy3, Hunyuan) and LocalAI's (GLM-4.5) parser tests,
  projects no earlier set mined, each family with its model's own template (eighteen families), each with the
  message the test asserts; four in five expect a tool call. Nobody writes repairs from it.
- ``real_outputs_kept17``: the seventeenth kept-aside batch, outputs that model makers' and libraries' own documents
  give with the message they parse to (MiniMax-M2's tool-calling guide, Hermes-Function-Calling's README,
  transformers' tool-use and response-parsing guides) and one public report (vLLM, Qwen3-Coder), each family with its
  model's own template (five families); no test file of any project. Nobody writes repairs from it.
- ``real_outputs_kept18``: the eighteenth kept-aside batch, outputs fed to their parsers by Python training, agent
  and serving libraries' own tests (LLaMA-Factory's tool extractors, Qwen-Agent's Nous function-call prompt,
  llama-stack's Llama tool utilities, aphrodite-engine's tool and reasoning parsers), projects no earlier set mined,
  each family with its model's own template (fifteen families), each with the message the test asserts; three in
  four expect a tool call. Nobody writes repairs from it.
- ``real_outputs_kept19``: the nineteenth kept-aside batch, outputs fed to their parsers by the MLX ecosystem's
  serving projects' tests (vllm-mlx's MiniMax, Gemma 4, Qwen3 XML and Harmony parsers; mlx-omni-server's GLM-4.5,
  Qwen3 MoE XML, Llama 3 and Mistral parsers; Rapid-MLX's Gemma 4, MiniMax and DeepSeek V3 / V3.1 parsers), projects
  no earlier set mined for parser tests, each family with its model's own template (nine families), each with the
  message the test asserts; 49 in 50 expect a tool call. Development data since
  the round after its first measure.
- ``real_outputs_kept20``: the twentieth kept-aside batch, outputs fed to their parsers by openai/harmony's own tests
  (gpt-oss completion text parsed into messages) and by big serving engines' test files no earlier set used: SGLang's
  unit detector tests (gpt-oss, DeepSeek V3.1 / V3.2 strict DSML, GLM-4.7, MiniMax-M2, Kimi K2), lmdeploy's
  required-tool-choice tests (Qwen3, DeepSeek V3.2 / V4) and vLLM's Gemma 4 enforcement test, each family with its
  model's own template (nine families), each with the message the test asserts; five in six expect a tool call.
  Development data since the round after its first measure.
- ``real_outputs_kept21``: the twenty-first kept-aside batch, outputs fed to their parsers by small local servers'
  own tests (exo's gpt-oss, DeepSeek V3.2 DSML, Kimi K2 and MiniMax-M2 / Qwen3-Coder parsers; TabbyAPI's Qwen3-Coder
  XML, GLM-4.5 and Qwen3 reasoning parsers), projects no earlier set mined for parser tests, each family with its
  model's own template (seven families), each with the message the test asserts; 19 in 27 expect a tool call.
  Development data since the round after its first measure (docs/realset-baseline.md "kept20–kept25 as development
  data").
- ``real_outputs_kept22``: the twenty-second kept-aside batch, outputs fed to their parsers by model gateways' and
  serving engines' own tests no earlier set mined: the SMG gateway's Rust tool-parser tests (MiniMax M2 / M3, GLM-4.7,
  DeepSeek V3.2 DSML, Qwen3-Coder XML), SGLang's Rust router tests (Kimi K2, GLM-4.5, Qwen3-Coder, DeepSeek V3) and
  xllm's GLM-4.7 detector test, each family with its model's own template (eight families), each with the message
  the test asserts; 49 in 50 expect a tool call. Development data since
  the round after its first measure.
- ``real_outputs_kept23``: the twenty-third kept-aside batch, outputs fed to their parsers by OpenVINO Model Server's
  C++ output-parser tests (Qwen3-Coder, Qwen3, gpt-oss Harmony, Llama 3.1, Mistral 7B v0.3, Devstral, Gemma 4,
  MiniCPM5, LFM2.5) and FastDeploy's Python tool and reasoning parser tests (DeepSeek V3.1 / V3, Qwen3), projects no
  earlier set mined, each family with its model's own template (eleven families), each with the message the test
  asserts; 36 in 50 expect a tool call. Development data since
  the round after its first measure.
- ``real_outputs_kept24``: the twenty-fourth kept-aside batch, outputs fed to their parsers by the SMG gateway's and
  SGLang's Rust router's test files no earlier set used (Mistral, gpt-oss, MiniMax M2, Kimi K2, Llama 3.1 / 3.2,
  GLM-4.5, Qwen2.5, DeepSeek V3.1 tool parsers; smg's Qwen3 reasoning parser), each family with its model's own
  template (ten families), each with the message the test asserts; 44 in 50 expect a tool call.
  Development data since the round after its first measure.
- ``real_outputs_kept25``: the twenty-fifth kept-aside batch, outputs fed to their parsers by vllm-ascend's
  platform-patch unit tests (vLLM's GLM-4.5 / GLM-4.7, MiniMax M2 and DeepSeek V4 tool parsers as it patches them, its
  own MiniMax M3 tool and reasoning parsers, DeepSeek V4's thinking defaults), a project no earlier set mined, each
  family with its model's own template (five families), each with the message the test asserts; 19 in 27 expect a
  tool call (the pool held no more). Development data since
  the round after its first measure.
- ``real_outputs_kept26``: the twenty-sixth kept-aside batch, outputs fed to their parsers by ms-swift's agent-template
  and template-alignment tests (MiniCPM5's argument types, Kimi K3's XTML tool section, DeepSeek-V4-Flash-0731's DSML
  round trip) and litellm's Ollama chat tests (Qwen3, DeepSeek-R1 `<think>` in content), projects no earlier set
  mined, each family with its model's own template (five families), each with the message the test asserts; 7 in 9
  expect a tool call (the pool held no more: chat-ui, text-generation-inference and the BFCL handlers gave none).
  Nobody writes repairs from it.
- ``real_outputs_kept27``: the twenty-seventh kept-aside batch, outputs fed to their rollout parsers by training and
  RL frameworks' tests (AReaL's SGLang-backed Qwen3 call parsing, rllm's Qwen, Llama 3.1 / 3.2, renderer and tinker
  parsers, ROLL's Qwen3.5 and Qwen3-Coder parsers), projects no earlier set mined, each family with its model's own
  template (five families), each with the message the test asserts; 11 in 17 expect a tool call (the pool held no
  more). Nobody writes repairs from it.
- ``real_outputs_kept28``: the twenty-eighth kept-aside batch, outputs the model makers' own repositories feed to
  their own parsers (openai/harmony's C++ port tests: gpt-oss messages parsed from text; MiniMax-M1's Portuguese
  function-call guide), each family with its model's own template (two families), each with the message the test or
  guide states; 1 in 4 expects a tool call (the pool held no more: mistral-common's parser tests feed token ids,
  llama-models' tool utilities formats no template writes, gpt-oss's tests assert status codes). Nobody writes repairs
  from it.
- ``real_outputs_kept29``: the twenty-ninth kept-aside batch, outputs on-device and C++/Java runtimes feed to their
  parsers in their own tests (openvino.genai's Phi-4 and DeepSeek-R1 reasoning parsers and Llama-3 JSON tool parser in
  Python, C++ and JavaScript; LiteRT-LM's Qwen3, Gemma 4 and MiniCPM5 data processors; MNN Chat's gpt-oss result
  processor), projects no earlier set mined, each family with its model's own template (seven families), each with
  the message the test asserts; 5 in 17 expect a tool call (the pool held no more: Triton's tool-call tests run a real
  model, onnxruntime-genai, gpt4all and llamafile hold no parser test). Nobody writes repairs from it.
- ``real_outputs_kept30``: the thirtieth kept-aside batch, outputs Python agent and app frameworks feed to their
  reasoning parsers in their own tests (autogen's `parse_r1_content` and its R1-family OpenAI client, smolagents'
  DeepSeek think-tag removal), one family with its model's own template, each with the message the test asserts; none
  expects a tool call (5 cases: the pool held no more; the frameworks' other parsers are model-less `<think>`
  strippers and JSON extractors, or read already-parsed API objects). Nobody writes repairs from it."""

from __future__ import annotations

import json
from functools import lru_cache

import pytest

from core.chat.realset import load_cases, rate_table, run_case, split_of

from .conftest import ROOT, TEMPLATES

DATA = ROOT / "tests" / "data"
# right cases per set (its directory under tests/data), fidelity and split; real_outputs improved holdout 81 -> 85:
# the 4 Jamba calls, read once improvement transformers-dialect renders its template; the lossless contract: real_outputs
# improved dev 167 -> 171, holdout 85 -> 87 (the 3 Magistral fixtures expect current vLLM's message; the 4 Phi-4-mini
# cases on vLLM's Phi-4-mini template, a family-wide data decision: dev +1, holdout +2, holdout reasons not read),
# real_outputs_kept improved 36 -> 39 (Gemma 3's ```tool_code fence read as markup of the calls; SmolLM3 cases on
# the model's own template), real_outputs_fresh improved 92 -> 94 (Qwen3-Coder markup indented as a block,
# tag-whitespace's indented variant, tried after the template's layout); the kept4 repairs: real_outputs_kept4 improved 53 -> 62
# (the 9 GLM-4 chat calls, read by improvement metadata-call-turns; kept4 is dev data from then on), and kept5 (kept
# aside, measured, not read) improved 56 -> 60: its 4 GLM-4 chat calls;
# the reasoning repairs (kept7 as development data):
# real_outputs_kept7 improved 36 -> 46 (where reasoning starts and ends: template-default-thinking 3,
# reasoning-blocks-interleaved + the Apertus workaround 3, harmony-bare-header 2, call-ends-reasoning 1,
# bare-answer-after-reasoning 1; docs/realset-baseline.md "kept7 as development data");
# the tool-call repairs (the tool-call
# class, same data): consecutive-call-blocks 2, repeated-prompt-tail 2, undeclared-arguments in Kimi K3,
# mistyped-value-as-string in DSML 2, unclosed-final-call 2: 46 -> 54
# the tool-call repairs from kept6 (development data since its first measure): real_outputs_kept6 improved
# 50 -> 60: well-known-call-blocks 3 (ERNIE 4.5's <tool_call> blocks on a template that renders no tools),
# content-between-calls in JSON call blocks 1 (Granite 4), cut-marker-text 1 and cut-call-own-text 1 (MiniMax-M3),
# glued-arguments 2 (FunctionGemma), think-block-calls 1 (MiniMax-M1), free-object-elements with
# leading-zero-integer 1 (MiniMax-M3)
# the character audit (docs/fidelity-lossless.md "To the character"): the MiniMax-M3 output cut inside its
# call marker comes back whole as content (cut-marker-text, and unparsed-characters behind it)
# the repairs from kept8's misses (development data since): real_outputs_kept8 improved
# reasoning-start-repeated in the Kimi K3 format 2 (kept8-vllm-kimik3-xtml, -split-open), content-between-calls
# in the MiniCPM5 format 2 (kept8-sgl-minicpm5-single, -interleaved), json-calls-in-call-markers 1
# (kept8-sgl-lfm2-json), quoted-number 1 (kept8-sgl-glm45-type-coercion): 49 -> 55; content-between-calls in
# the Qwen3-Coder handler: real_outputs_kept6 improved 66 -> 67 (kept6-vllm-qwen3xml-surrounding-text)
PASS = {
    "real_outputs": {("llama.cpp", "dev"): 95, ("llama.cpp", "holdout"): 45,
                     # improved dev 171 -> 170: xlam-think-tag expects vLLM's xLAM tool-parser reading (no
                     # reasoning parser) of a leading think block, which leading-think-block reads as reasoning
                     ("improved", "dev"): 170, ("improved", "holdout"): 87},
    "real_outputs_fresh": {("llama.cpp", "dev"): 53, ("improved", "dev"): 94},
    "real_outputs_kept": {("llama.cpp", "dev"): 13, ("improved", "dev"): 40},
    "real_outputs_kept3": {("llama.cpp", "kept3"): 65, ("improved", "kept3"): 89},
    "real_outputs_kept4": {("llama.cpp", "kept4"): 42, ("improved", "kept4"): 62},
    "real_outputs_kept5": {("llama.cpp", "kept5"): 48, ("improved", "kept5"): 60},
    "real_outputs_kept6": {("llama.cpp", "kept6"): 35, ("improved", "kept6"): 67},
    # kept7 improved 55 -> 56: nullable-null (kept7-sgl-minimaxm2-anyof-null, an explicit null for anyOf [string, null])
    "real_outputs_kept7": {("llama.cpp", "kept7"): 27, ("improved", "kept7"): 56},
    "real_outputs_kept8": {("llama.cpp", "kept8"): 26, ("improved", "kept8"): 55},
    # kept9 improved 46 -> 57 (kept9 as development data): json-arguments-body 4 and tag-whitespace in DSML 2
    # (DeepSeek V3.2 / V4 trt-dsv32-*, trt-dsv4-*), section-opener-repeated 2 (trt-dsv3-multiple,
    # trt-dsv31-multiple), call-marker-whitespace between Kimi K2 calls 1 (trt-kimi-multiple), schema-type-alias 1
    # (mlx-minimax-temperature), json-call-in-tags in GLM 1 (mlx-glm47-json)
    "real_outputs_kept9": {("llama.cpp", "kept9"): 27, ("improved", "kept9"): 57},
    "real_outputs_reports": {("llama.cpp", "dev"): 4, ("improved", "dev"): 4},
    # kept aside, first measure 27 (docs/realset-baseline.md "Tenth kept-aside batch"); 27 -> 28 after the kept9
    # repairs merged (written without reading it)
    # 28 -> 32 (kept10 as development data): call-opener-dropped 2 (vllm-gemma4-bare-call-after-thought-channel,
    # vllm-gemma4-colon-prefixed-tool-call), standalone-json-call 2 (ollama-laguna-standalone-json-tool-call,
    # ollama-laguna-streaming-standalone-json-tool-call)
    # llama.cpp 18 -> 23, improved 32 -> 35: TensorRT-LLM's deepseek-r1 fixtures relabelled to the R1 template whose
    # generation prompt opens <think> (trtllm-deepseek-r1-reasoning-0..4; -4 right at llama.cpp only, listed below)
    # llama.cpp 23 -> 26, improved 35 -> 38: Nemotron Nano v2's requests turn thinking off with the template's own
    # /no_think (its chat_template_kwargs are not read by it): vllm-nemotron-nano-v2-extract-tool-calls-returns-content-
    # without-tool-call, -extract-tool-calls-from-nemotron-array, -streaming-reconstructs-tool-call
    # improved 38 -> 39: call-list-unbracketed (vllm-nemotron-nano-v2-extract-tool-calls-wraps-single-object)
    # and, side by side with those, +6 at improved (39 -> 45): +5 with tag-whitespace on Command
    # R+'s "Action: ```json" section start (kept10-ollama-commandr-single-tool-call, -multiple-tool-calls,
    # -content-before-action, -streaming-token-by-token) and nullable-null in the Muse Glimmer parameters
    # (kept10-ollama-glimmer-atem-value-types-and-whitespace); +1 with spaced-typed-value (Poolside's ` 420 `
    # integer, kept10-vllm-poolside-non-string-arg-still-deserialized)
    "real_outputs_kept10": {("llama.cpp", "kept10"): 26, ("improved", "kept10"): 45},
    # kept aside with the fourteenth triage batch, measured once, not read
    "real_outputs_reports2": {("llama.cpp", "reports2"): 1, ("improved", "reports2"): 2},
    # kept aside, first measure 24 / 38 (docs/realset-baseline.md "Eleventh kept-aside batch"); +1 at improved when
    # the loss check read Spark 2.5's three texts joined around two calls (a fix of the contract, not a repair);
    # development data since: +3 with thought-label-omitted (Gemma 4's <|channel> without its label:
    # kept11-vllm-gemma4-reasoning-reasoning, -complete-reasoning, -no-content), +2 with content-between-calls
    # widened to JSON call sections (Apertus's second <|tools_prefix|> block after text:
    # kept11-sglang-apertus-multiple-blocks-trailing-text, -second-block-buffered); +1 with call-section-omitted
    # (DeepSeek V4's invoke after the content with no tool_calls section:
    # kept11-sglang-dsv4-preamble-before-bare-invoke)
    "real_outputs_kept11": {("llama.cpp", "kept11"): 24, ("improved", "kept11"): 45},
    # kept aside with the sixteenth triage batch, measured once, not read
    "real_outputs_reports3": {("llama.cpp", "reports3"): 0, ("improved", "reports3"): 5},
    # kept aside, first measure 19 / 25 (docs/realset-baseline.md "Twelfth kept-aside batch"); development data
    # since: +3 with drifted-closing-tag (Qwen3-Coder's misspelled </parameter…> closers before the next tag:
    # kept12-sglang-qwen3coder-drifted-end-marker-parameter1, -parameter-function, -bare)
    "real_outputs_kept12": {("llama.cpp", "kept12"): 19, ("improved", "kept12"): 28},
    # kept aside, first measure 14 / 21 (docs/realset-baseline.md "Thirteenth kept-aside batch"); development data
    # since: +5 with args-separator-omitted (Hy v4's call without <tool_sep:opensource> after the name:
    # kept13-vllm-hy-v4-value-coercion-s-beijing, -s-empty, -i-3, -i-minus-7, -b-true); +4 with tag-attribute-space
    # (MiniCPM5's <functionname=…> / <paramĠname=…>: kept13-vllm-minicpm5-tokenizer-space-marker,
    # -collapsed-function-and-param-tags, -collapsed-param-tags-tokenizer-space-function, -collapsed-tags-current-weather)
    # +1 when improvement python-literal-values stopped reading a number as a Python literal for a string-or-null
    # parameter (kept13-vllm-qwen3coder-shared-anyof-string-null-keeps-string)
    "real_outputs_kept13": {("llama.cpp", "kept13"): 14, ("improved", "kept13"): 31},
    # kept aside, first measure 12 / 25 (docs/realset-baseline.md "Fourteenth kept-aside batch"); development data
    # since: +1 with args-separator-omitted (kept14-sglang-hunyuan-hy4-format-without-tool-separator); +5 with
    # action-after-text (Cohere's action block after text, or text after it: kept14-sglang-cohere4-parallel-calls-
    # leading-text, -streaming-text-then-block, -stream-leading-text-complete-call, -stream-trailing-text-preserved,
    # -stream-two-calls-one-action-block); +1 when call-ends-reasoning's look-ahead read the first call alone, not
    # waiting on the text after it (kept14-xinference-glm5-streaming-text-after-processed-call)
    "real_outputs_kept14": {("llama.cpp", "kept14"): 12, ("improved", "kept14"): 32},
    # kept aside, first measure 29 / 40 (docs/realset-baseline.md "Fifteenth kept-aside batch"); 41 on the round of
    # repairs written without it (call-section-omitted reads kept15-sglang-dsv4-prose-and-bare-invoke); development
    # data since: +2 with union-typed-value (GLM-4.7's string-or-integer 7 and string-or-object {…}:
    # kept15-sglang-glm47-field-types-string-or-integer-7, -string-or-object-object); +4 with string-opener-omitted
    # (Gemma 4's string value without its opening <|"|>: kept15-sglang-gemma4-omitted-opening-delimiter,
    # -with-comma, -in-nested-object, -in-array)
    "real_outputs_kept15": {("llama.cpp", "kept15"): 29, ("improved", "kept15"): 47},
    # kept aside, first measure 39 / 49 (docs/realset-baseline.md "Sixteenth kept-aside batch")
    "real_outputs_kept16": {("llama.cpp", "kept16"): 39, ("improved", "kept16"): 49},
    # kept aside, first measure 2 / 11 (docs/realset-baseline.md "Seventeenth kept-aside batch"); development data
    # since: +1 with python-dict-call (Hermes 2 Pro's call object as a Python dict literal, a recorded run:
    # kept17-hermes-fc-readme-inference-example-call)
    "real_outputs_kept17": {("llama.cpp", "kept17"): 2, ("improved", "kept17"): 12},
    # kept aside, first measure 21 / 28 (docs/realset-baseline.md "Eighteenth kept-aside batch")
    "real_outputs_kept18": {("llama.cpp", "kept18"): 21, ("improved", "kept18"): 28},
    # kept aside, first measure 15 / 33 (docs/realset-baseline.md "Nineteenth kept-aside batch"); development data
    # since: +2 with section-per-call (MiniMax-M2's calls one <minimax:tool_call> section each:
    # kept19-vllmmlx-minimax-multiple-tool-calls, kept19-rapidmlx-minimax-multiple-blocks); +1 with
    # calls-in-one-block (two Gemma 4 calls in one <|tool_call> block: kept19-vllmmlx-gemma4-multiple-calls-one-block)
    "real_outputs_kept19": {("llama.cpp", "kept19"): 15, ("improved", "kept19"): 36},
    # kept aside, first measure 21 / 30 (docs/realset-baseline.md "Twentieth kept-aside batch"); 31 on the round of
    # repairs written without it (section-per-call reads MiniMax-M2's two call blocks); development data since: +2
    # with repeated-turn-header keeping Harmony's role-header space (kept20-harmony-py-constrain-after-space-call,
    # -constrain-adjacent-call), +1 with it and message-closer-at-end
    # (kept20-harmony-rs-recipient-in-role-constrain-adjacent-end)
    "real_outputs_kept20": {("llama.cpp", "kept20"): 21, ("improved", "kept20"): 34},
    # kept aside, first measure 8 / 17 (docs/realset-baseline.md "Twenty-first kept-aside batch"); the same on the
    # round of repairs written without it
    "real_outputs_kept21": {("llama.cpp", "kept21"): 8, ("improved", "kept21"): 17},
    # kept aside, first measure 16 / 40 (docs/realset-baseline.md "Twenty-second kept-aside batch"); development
    # data since: +4 with section-opener-whitespace (Kimi K2's line break after <|tool_calls_section_begin|>:
    # kept22-sglrouter-kimik2-multiple-tools, -with-whitespace, -streaming, -sequential-indices)
    "real_outputs_kept22": {("llama.cpp", "kept22"): 16, ("improved", "kept22"): 44},
    # kept aside, first measure 22 / 39 (docs/realset-baseline.md "Twenty-third kept-aside batch"); development data
    # since: +1 with message-closer-at-end (kept23-ovms-harmony-final-end), +2 with trailing-eos-token in the Devstral
    # handler (kept23-ovms-devstral-call-after-prose, -array-argument), +2 with marker-space-omitted
    # (kept23-ovms-mistral-single-call, -three-calls)
    "real_outputs_kept23": {("llama.cpp", "kept23"): 22, ("improved", "kept23"): 44},
    # kept aside, first measure 21 / 37 (docs/realset-baseline.md "Twenty-fourth kept-aside batch"); development data
    # since: +4 with section-opener-whitespace (kept24-smg-kimik2-multiline-arguments, -streaming-multiline-arguments,
    # -function-index-extraction, -namespace-extraction)
    "real_outputs_kept24": {("llama.cpp", "kept24"): 21, ("improved", "kept24"): 41},
    # kept aside, first measure 20 / 24 (docs/realset-baseline.md "Twenty-fifth kept-aside batch"); development data
    # since, unchanged by the round written from it
    "real_outputs_kept25": {("llama.cpp", "kept25"): 20, ("improved", "kept25"): 24},
    # kept aside, first measure 6 / 7 (docs/realset-baseline.md "Twenty-sixth kept-aside batch")
    "real_outputs_kept26": {("llama.cpp", "kept26"): 6, ("improved", "kept26"): 7},
    # kept aside, first measure 6 / 16 (docs/realset-baseline.md "Twenty-seventh kept-aside batch")
    "real_outputs_kept27": {("llama.cpp", "kept27"): 6, ("improved", "kept27"): 16},
    # kept aside, first measure 0 / 1 (docs/realset-baseline.md "Twenty-eighth kept-aside batch"); 0 / 3 after the
    # repairs written from kept20–kept25 without it (message-closer-at-end reads the `<|end|>` closing two Harmony
    # final messages)
    "real_outputs_kept28": {("llama.cpp", "kept28"): 0, ("improved", "kept28"): 3},
    # kept aside, first measure 3 / 9 (docs/realset-baseline.md "Twenty-ninth kept-aside batch")
    "real_outputs_kept29": {("llama.cpp", "kept29"): 3, ("improved", "kept29"): 9},
    # kept aside, first measure 0 / 2 (docs/realset-baseline.md "Thirtieth kept-aside batch")
    "real_outputs_kept30": {("llama.cpp", "kept30"): 0, ("improved", "kept30"): 2},
}
# per set, in the order the sets were collected (a set shares no output with an earlier one): cases, families,
# splits, and whether every case marked "both" is exactly one right at llama.cpp fidelity
SETS = {
    "real_outputs": (263, 34, {"dev", "holdout"}, False),
    "real_outputs_fresh": (94, 15, {"dev"}, True),
    "real_outputs_kept": (41, 18, {"dev"}, True),
    "real_outputs_kept3": (90, 20, {"kept3"}, True),
    "real_outputs_kept4": (65, 14, {"kept4"}, True),
    "real_outputs_kept5": (60, 10, {"kept5"}, True),
    "real_outputs_kept6": (81, 18, {"kept6"}, True),
    "real_outputs_kept7": (62, 14, {"kept7"}, True),
    "real_outputs_kept8": (60, 11, {"kept8"}, True),
    "real_outputs_kept9": (60, 15, {"kept9"}, True),
    "real_outputs_reports": (5, 4, {"dev"}, True),
    "real_outputs_kept10": (60, 13, {"kept10"}, True),
    "real_outputs_reports2": (5, 5, {"reports2"}, True),
    "real_outputs_kept11": (60, 14, {"kept11"}, True),
    "real_outputs_reports3": (9, 3, {"reports3"}, True),
    "real_outputs_kept12": (40, 8, {"kept12"}, True),
    "real_outputs_kept13": (50, 12, {"kept13"}, True),
    "real_outputs_kept14": (50, 11, {"kept14"}, True),
    "real_outputs_kept15": (50, 10, {"kept15"}, True),
    "real_outputs_kept16": (50, 18, {"kept16"}, True),
    "real_outputs_kept17": (13, 5, {"kept17"}, True),
    "real_outputs_kept18": (33, 15, {"kept18"}, True),
    "real_outputs_kept19": (50, 9, {"kept19"}, True),
    "real_outputs_kept20": (42, 9, {"kept20"}, True),
    "real_outputs_kept21": (27, 7, {"kept21"}, True),
    "real_outputs_kept22": (50, 8, {"kept22"}, True),
    "real_outputs_kept23": (50, 11, {"kept23"}, True),
    "real_outputs_kept24": (50, 10, {"kept24"}, True),
    "real_outputs_kept25": (27, 5, {"kept25"}, True),
    "real_outputs_kept26": (9, 5, {"kept26"}, True),
    "real_outputs_kept27": (17, 5, {"kept27"}, True),
    "real_outputs_kept28": (4, 2, {"kept28"}, True),
    "real_outputs_kept29": (17, 7, {"kept29"}, True),
    "real_outputs_kept30": (5, 1, {"kept30"}, True),
}
# cases right at llama.cpp fidelity that improved answers otherwise on purpose, each with the rule and why
DELIBERATELY_OTHER = {
    "seed-no-tools": "reasoning-end-without-start: Seed-OSS with thinking on reasons from its first token, so an "
                     "answer with no end marker is reasoning (vLLM's seed_oss reasoning parser, q3-without-think); "
                     "the expected message comes from vLLM's tool-parser test, which runs without a reasoning parser "
                     "(docs/fidelity-reasoning.md)",
    "kept4-bfcl-hermes-2-pro-llama-3-70b-parallel-function-71":
        "missing-closing-tags: a 27-call degenerate loop where three calls lack </tool_call> before the next "
        "<tool_call>; vLLM's hermes parser (the expected message) gives the whole text back as content, improved "
        "reads every call (issue 25 class 2: an inner closer missing before the next opener)",
    "kept4-bfcl-hermes-2-theta-llama-3-70b-parallel-multiple-function-83":
        "stream-consistent-final: the stream emits the first call (its </tool_call> replaced by <|im_start|>) before "
        "the final parse rejects the rest, so improved keeps that call (a streaming client already has it) and gives "
        "the text after it as content, each character once; vLLM's hermes parser gives the whole text as content "
        "(issue 25 class 5: a call a streaming client may already run is not taken back)",
    "kept10-trtllm-deepseek-r1-reasoning-4":
        "reasoning-start-repeated: after the prompt's <think>\\n the output writes <think> again; TensorRT-LLM's "
        "deepseek-r1 parser keeps the literal <think> inside the reasoning (as llama.cpp does), improved reads it as "
        "the block's marker, as vLLM's DeepSeek-R1 reasoning parser drops it (test_deepseekr1_reasoning_parser.py, "
        "the repair's source; docs/realset-baseline.md)",
    # the twelfth kept-aside batch (first measure): engines' policies that differ from the one the repair follows
    "kept12-sglang-kimik3-stream-end-drops-truncated-marker":
        "cut-marker-text: the output ends in a cut <|open|> (Kimi K3's marker opener); SGLang's detector drops it at "
        "the end of the stream (as llama.cpp's held-back tail does), improved gives the tail back as content so no "
        "character is lost (docs/fidelity-lossless.md)",
    "kept12-ollama-qwen3vl-thinking-simple-trip-thinking":
        "reasoning-start-repeated: after the prompt's <think> the output writes <think> again; ollama's Qwen3-VL "
        "thinking parser keeps it inside the reasoning (as llama.cpp does), improved reads it as the block's marker, as "
        "vLLM's DeepSeek-R1 reasoning parser drops it (the repair's source; docs/fidelity-reasoning.md)",
    "kept12-ollama-qwen3vl-thinking-nested-thinking":
        "reasoning-end-unmatched: a second </think> after the reasoning closed; ollama's Qwen3-VL thinking parser "
        "gives it as content (as llama.cpp does), improved drops it as markup, as current vLLM does (PR 30391, "
        "test_minimax_m2_reasoning_parser.py; docs/fidelity-reasoning.md)",
    "kept12-ollama-qwen3vl-thinking-interleaved-thinking":
        "reasoning-start-repeated and reasoning-end-unmatched: ollama keeps the repeated <think> in the reasoning and "
        "the second </think> in the content (as llama.cpp does); improved drops both as markup, as vLLM's reasoning "
        "parsers do (docs/fidelity-reasoning.md)",
    # the twenty-fourth kept-aside batch (first measure)
    "kept24-smg-reasoning-qwen3-initial-state":
        "reasoning-end-without-start: Qwen3 with thinking on and a text with no reasoning marker at all; smg's Qwen3 "
        "reasoning parser (which needs <think>) gives it as content (as llama.cpp does), improved reads it as "
        "reasoning from its first character, as vLLM's deepseek_r1 / seed_oss reasoning parsers and SGLang's "
        "force_reasoning do (the repair's sources, q3-without-think; docs/fidelity-reasoning.md)",
    # the twenty-sixth kept-aside batch (first measure)
    "kept26-litellm-ollama-chat-qwen3-no-tool-calls":
        "reasoning-end-without-start: Qwen3 with thinking left unset (on, as its template defaults) and a text with no "
        "reasoning marker at all; litellm's Ollama chat config gives it as content (Ollama had already split any "
        "thinking off; as llama.cpp does), improved reads it as reasoning from its first character, as vLLM's "
        "deepseek_r1 / seed_oss reasoning parsers and SGLang's force_reasoning do (the repair's sources, "
        "q3-without-think; docs/fidelity-reasoning.md)",
    # the twenty-seventh kept-aside batch (first measure)
    "kept27-roll-qwen35-literal-eos-marker-in-content":
        "trailing-end-of-turn: the text ends in <|im_end|> and a line break; ROLL keeps it as content because the "
        "sampled token ids do not end with the eos token (the model wrote the marker as text), as llama.cpp keeps "
        "it; improved, which has the text and no token ids, drops an end-of-turn token the output ends with (vLLM "
        "and SGLang skip special tokens, so their parsers never see it: the repair's source; docs/fidelity.md)",
}
# words the lossless check finds lost, per set and fidelity, where a kept-aside batch found a loss on its first
# measure (nobody writes repairs from a kept-aside batch; the loss is reported, pinned exactly, and goes when fixed):
FIDELITIES = ["llama.cpp", "improved"]


@lru_cache(maxsize=None)
def _cases(directory: str) -> tuple:
    return tuple(load_cases(str(DATA / directory)))


@lru_cache(maxsize=None)
def _results(directory: str, fidelity: str) -> tuple:
    return tuple(run_case(c, str(TEMPLATES), fidelity) for c in _cases(directory))


@pytest.mark.parametrize("directory", list(SETS))
def test_the_set_is_cited_new_and_split_as_said(directory):
    cases = _cases(directory)
    count, families, splits, _ = SETS[directory]
    assert len(cases) == count and len({c.family for c in cases}) == families
    assert {c.split for c in cases} == splits
    assert all(c.source.startswith("https://") for c in cases)
    assert all((TEMPLATES / c.template).is_file() for c in cases)
    assert all(c.fidelity in ("both", "improved") for c in cases)
    earlier = {c.output for d in list(SETS)[:list(SETS).index(directory)] for c in _cases(d)}
    assert [c.id for c in cases if c.output in earlier] == []


def _page(url: str) -> str:
    """The page a source URL names, whatever commit it is pinned at."""
    head, _, tail = url.partition("/blob/")
    return head + "/" + tail.partition("/")[2] if tail else url


# triage batches built later from these sets' own rows (tests/test_triage.py traces each row back): not earlier sources
TRIAGE_FROM_REAL_OUTPUTS = {"kept6.jsonl", "kept7.jsonl", "kept8.jsonl", "kept9.jsonl", "kept10.jsonl",
                            "kept11.jsonl", "kept13.jsonl", "kept15.jsonl",
                            "kept16.jsonl", "kept18.jsonl", "kept19.jsonl", "kept20.jsonl",
                            "kept21.jsonl", "kept22.jsonl", "kept23.jsonl", "kept24.jsonl", "kept25.jsonl",
                            "kept26.jsonl", "kept28.jsonl",
                            "kept29.jsonl", "kept30.jsonl", "kept31.jsonl", "kept32.jsonl",
                            "kept33.jsonl", "kept34.jsonl"}
# real-output sets built from a triage batch's own rows (the same reports, with the reporter's message): that batch
# is not an earlier source of the set
REAL_OUTPUTS_FROM_TRIAGE = {"real_outputs_reports2": {"kept12.jsonl"}, "real_outputs_reports3": {"kept14.jsonl"}}


@pytest.mark.parametrize("directory", ["real_outputs_kept3", "real_outputs_kept4", "real_outputs_kept5",
                                       "real_outputs_kept6", "real_outputs_kept7", "real_outputs_kept8",
                                       "real_outputs_kept9", "real_outputs_reports", "real_outputs_kept10",
                                       "real_outputs_reports2", "real_outputs_kept11", "real_outputs_reports3",
                                       "real_outputs_kept12", "real_outputs_kept13",
                                       "real_outputs_kept14", "real_outputs_kept15",
                                       "real_outputs_kept16", "real_outputs_kept17",
                                       "real_outputs_kept18", "real_outputs_kept19",
                                       "real_outputs_kept20", "real_outputs_kept21",
                                       "real_outputs_kept22", "real_outputs_kept23",
                                       "real_outputs_kept24", "real_outputs_kept25",
                                       "real_outputs_kept26", "real_outputs_kept27", "real_outputs_kept28",
                                       "real_outputs_kept29", "real_outputs_kept30"])
def test_a_kept_batch_comes_from_pages_and_outputs_no_earlier_set_used(directory):
    cases = _cases(directory)
    earlier_sets = list(SETS)[:list(SETS).index(directory)]
    sources = {c.source for d in earlier_sets for c in _cases(d)}
    outputs = {c.output for d in earlier_sets for c in _cases(d)}
    for path in sorted((DATA / "triage").glob("*.jsonl")):
        if path.name in TRIAGE_FROM_REAL_OUTPUTS | REAL_OUTPUTS_FROM_TRIAGE.get(directory, set()):
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            sources.add(row["source"])
            outputs.add(row["input"])
    pages = {_page(s).partition("#")[0] for s in sources}
    assert [c.id for c in cases if c.output in outputs] == []
    assert [c.id for c in cases if _page(c.source).partition("#")[0] in pages] == []
    assert len({c.output for c in cases}) == len(cases)


def test_the_split_of_a_case_is_stable():
    assert split_of("https://example.org/a", "x") == split_of("https://example.org/a", "x")


@pytest.mark.parametrize("directory", [d for d, (_, _, splits, _) in SETS.items() if len(splits) == 1])
def test_every_line_of_a_set_with_one_split_names_it(directory):
    [split] = SETS[directory][2]
    for path in sorted((DATA / directory).glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            assert json.loads(line)["split"] == split, path.name


@pytest.mark.parametrize("fidelity", FIDELITIES)
@pytest.mark.parametrize("directory", list(SETS))
def test_no_word_lost_on_any_real_output(directory, fidelity):
    assert {r.case.id: r.lost for r in _results(directory, fidelity) if r.lost} == {}


@pytest.mark.parametrize("directory,fidelity,split", [(d, f, s) for d, pins in PASS.items() for f, s in pins])
def test_rates(directory, fidelity, split):
    rows = [r for r in _results(directory, fidelity) if r.case.split == split]
    assert sum(r.ok for r in rows) == PASS[directory][(fidelity, split)], \
        [(r.case.id, r.reason) for r in rows if not r.ok]


@pytest.mark.parametrize("directory", list(SETS))
def test_improved_is_never_worse_but_where_listed(directory):
    """A case right at llama.cpp fidelity is right at improved too, except the listed cases where a repair follows
    another peer's policy on purpose."""
    one = {r.case.id: r.ok for r in _results(directory, "llama.cpp")}
    better = {r.case.id: r.ok for r in _results(directory, "improved")}
    assert sorted(cid for cid, ok in one.items() if ok and not better[cid]) == \
        sorted(cid for cid in DELIBERATELY_OTHER if cid in one)


@pytest.mark.parametrize("directory", [d for d, spec in SETS.items() if spec[3]])
def test_cases_marked_both_are_the_ones_right_at_llama_cpp_fidelity(directory):
    assert {r.case.id for r in _results(directory, "llama.cpp") if r.ok} == \
        {c.id for c in _cases(directory) if c.fidelity == "both"}


def test_rate_table_lists_every_family():
    results = [r for f in FIDELITIES for r in _results("real_outputs", f)]
    table = rate_table(results)
    assert all(f"| {r.case.family} |" in table for r in results) and "| **all** |" in table
