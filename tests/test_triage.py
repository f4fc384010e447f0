"""Triage that fixes (issue 26) scored on sets of real failing outputs from public reports (tests/data/triage: the
raw output exactly as the report quotes it, its URL, the true cause and a working fix written by hand and checked
with apply_fix before explain ran on it). Exact scores per set and split (:data:`SCORES`): a change that moves a
case either way fails here and must be looked at (docs/explain.md says where each set comes from).

- ``cases.jsonl``: a holdout (sha256 of the URL, first byte % 4 == 0) is scored separately; cases marked
  ``"split": "dev"`` are dev whatever their hash. The holdout's four first-round misses were fixed by class rules
  written after reading them: its count is no longer an untouched measure.
- ``fresh.jsonl``: the second batch, kept aside and scored once (10/16 cause, 11/16 fix, 2/2 nearest); the classes
  behind its six misses were then fixed by rules written from them, so it is dev now ("Second batch, now dev").
- ``kept.jsonl``: the third batch, kept aside and scored once (3/6 cause, 4/6 fix, 1/2 nearest, Gemma 3's explain
  raising TemplateRenderError); the classes behind its three misses were then fixed by general rules, so its rows
  say ``"split": "dev"`` ("Third batch: kept.jsonl").
- ``kept2.jsonl``: the fourth batch, kept aside and scored once (4/12 cause, 11/12 fix, 3/5 nearest); the classes
  behind its misses were then fixed by general rules, so its rows say ``"split": "dev"`` ("Fourth batch:
  kept2.jsonl"). Each case carries a note on its cause.
- ``kept3.jsonl``: the fifth batch, collected from reports no earlier set used after the rules of core/explain were
  written, its causes and fixes committed before explain ran on it, kept aside and scored once (4/11 cause, 7/11
  fix, 3/3 nearest); the classes behind its seven misses were then fixed by general rules, so its rows say
  ``"split": "dev"`` ("Fifth batch: kept3.jsonl").
- ``kept4.jsonl``: the sixth batch, collected the same way from reports no earlier set used, its causes and fixes
  committed before explain ran on it, kept aside and scored (6/12 cause, 8/12 fix, 1/1 nearest, on first run and
  again on the rules written from kept3); the classes behind its misses were then fixed by structural rules, so its
  rows say ``"split": "dev"`` ("Sixth batch: kept4.jsonl"). One report (hermes-agent#8965) gives two rows: the same
  text read against the two templates of the models it names, with a different true cause for each.
- ``kept5.jsonl``: the seventh batch, picked by a query rule fixed before reading and committed before explain ran,
  scored once (0/1 cause, 0/1 fix) as split ``"kept5"``; the class behind its miss (spaces a decoder put around
  special tokens) was then fixed by a structural rule, so its row says ``"split": "dev"`` ("Seventh batch:
  kept5.jsonl"). The rule found four eligible new reports; three parse clean (cause ``NONE``) and the cap of a third
  ``NONE`` rows leaves one row — a data point, not a rate.
- ``kept6.jsonl``: the eighth batch: 40 recorded real outputs from ``tests/data/real_outputs*/`` that our parser at
  ``llama.cpp`` fidelity reads differently from the message their source's engine read, picked by a rule committed
  before explain ran (``scripts/triage_queue.py kept6``), labelled and committed before the triage ran, scored on
  first run (23/40 cause, 37/40 fix, 10/17 nearest), then again on the eighth round's rules, written without it
  (25/40, 36/40, 10/17); the classes behind its misses were then fixed by the ninth round's structural rules, so its
  rows say ``"split": "dev"`` ("Eighth batch: kept6.jsonl", "Ninth round of rules").
- ``kept7.jsonl``: the ninth batch, first split ``"kept7"``: the 35 rows of ``tests/data/real_outputs_kept7/`` (engines' own
  parser-test outputs) that our parser at ``llama.cpp`` fidelity reads differently from the engine's message, picked
  by a rule committed before explain ran (``scripts/triage_queue.py kept7``), labelled and committed before the
  triage ran, scored once with the rules as they stood (19/35 cause, 27/35 fix, 1/13 nearest), then once on the
  ninth round of rules, written without it and frozen before it was run (20/35, 27/35, 4/13; ``python
  scripts/triage_kept7_score.py`` prints it row by row); the classes behind its misses were then fixed by the tenth
  round's structural rules, so its rows say ``"split": "dev"`` ("Ninth batch: kept7.jsonl", "Tenth round of
  rules"); eight rows labelled "none helps" before the reasoning and tool-call repairs existed were relabelled with
  the repair or fidelity fix that now verifies ("Eleventh round of rules").
- ``kept8.jsonl``: the tenth batch, first split ``"kept8"``: 40 rows of ``tests/data/real_outputs_kept6/`` (vLLM's own
  parser-test outputs) that our parser at ``llama.cpp`` fidelity reads differently from the engine's message, the
  first 40 of the queue of a rule committed before explain ran (``scripts/triage_queue.py kept8``), labelled and
  committed before the triage ran, scored on the ninth round of rules and again on the tenth, written without it
  (23/40 cause, 28/40 fix, 3/9 nearest both times); the classes behind its misses were then fixed by the eleventh
  round's structural rules, so its rows say ``"split": "dev"`` ("Tenth batch: kept8.jsonl", "Eleventh round of
  rules").
- ``kept9.jsonl``: the eleventh batch, first split ``"kept9"``: the whole failing queue (34 rows) of
  ``tests/data/real_outputs_kept8/`` (SGLang's per-detector and vLLM's Gemma 4 / Kimi K3 / Step-3.5 parser-test
  outputs), picked by a rule committed before explain ran (``scripts/triage_queue.py kept9``), labelled and committed
  before the triage ran, scored once (23/34 cause, 25/34 fix, 14/16 nearest) and again on the eleventh round of
  rules, written without it (24/34, 25/34, 14/16; ``python scripts/triage_kept7_score.py --set kept9.jsonl``); the
  classes behind its misses were then fixed by the twelfth round's structural rules, so its rows say ``"split":
  "dev"`` ("Eleventh batch: kept9.jsonl", "Twelfth round of rules").
- ``kept10.jsonl``: the twelfth batch, first split ``"kept10"``: the whole failing queue (33 rows) of
  ``tests/data/real_outputs_kept9/`` (mlx-lm's, TensorRT-LLM's and lmdeploy's own tool-parser tests), by a rule
  committed before explain ran (``scripts/triage_queue.py kept10``), labelled and committed before the triage ran,
  scored once on the tenth round of rules (24/33 cause, 32/33 fix, 11/17 nearest) and again on the eleventh, written
  without it (25/33, 29/33, 17/17); the classes behind its misses were then fixed by the twelfth round's structural
  rules, so its rows say ``"split": "dev"``; four MiniMax-M2 rows labelled "none helps" were relabelled with the fix
  that now gives the engine's message ("Twelfth batch: kept10.jsonl", "Twelfth round of rules").
- ``kept11.jsonl``: the thirteenth batch, first split ``"kept11"``: the first 40 of the 42 failing rows of
  ``tests/data/real_outputs_kept10/`` (vLLM's, ollama's and TensorRT-LLM's parser tests from files no earlier set
  used), by a rule committed before explain ran (``scripts/triage_queue.py kept11``), labelled and committed before
  the triage ran, scored once (14/40 cause, 19/40 fix, 6/13 nearest) and again on the twelfth round of rules, written
  without it (16/40, 20/40, 6/13; ``python scripts/triage_kept7_score.py --set kept11.jsonl``); the classes behind
  its misses were then fixed by the thirteenth round's structural rules, so its rows say ``"split": "dev"``
  ("Thirteenth batch: kept11.jsonl", "Thirteenth round of rules").
- ``kept12.jsonl``: the fourteenth batch, first split ``"kept12"``: six failing outputs quoted in public bug reports
  (ollama, Qwen3-VL, llama-box, vLLM ×2, SGLang), picked by a query rule committed before any report was read,
  labelled and committed before explain or the triage ran, scored once (3/6 cause, 3/6 fix, 2/4 nearest) and again
  on the twelfth round (the same); the classes behind its misses were then fixed by the thirteenth round's
  structural rules, so its rows say ``"split": "dev"`` ("Fourteenth batch: kept12.jsonl", "Thirteenth round of
  rules").
- ``kept13.jsonl``: the fifteenth batch, first split ``"kept13"``: the whole failing queue (36 rows) of
  ``tests/data/real_outputs_kept11/`` (SGLang's, lmdeploy's, ollama's and vLLM's parser tests from files no earlier
  set used), by a rule committed before explain ran (``scripts/triage_queue.py kept13``), labelled and committed
  before the triage ran, scored once (19/36 cause, 32/36 fix, 3/9 nearest) and again on the thirteenth round of
  rules, written without it (the same; ``python scripts/triage_kept7_score.py --set kept13.jsonl``); its false
  statements were then corrected by the fourteenth round's structural rules, so its rows say ``"split": "dev"``
  ("Fifteenth batch: kept13.jsonl", "Fourteenth round of rules").
- ``kept14.jsonl``: the sixteenth batch, first split ``"kept14"``: eleven failing outputs quoted in public reports on
  agents and clients (ollama, Cline, Roo Code ×2, NemoClaw, opencode ×2, Open Interpreter, crush, Kilo Code,
  ollama-vscode), picked by a query rule committed before any report was read (two amendments, each committed
  before any row), labelled and committed before explain or the triage ran, scored once (7/11 cause, 11/11 fix, 4/6
  nearest) and again on the thirteenth round (the same; ``python scripts/triage_kept7_score.py --set
  kept14.jsonl``); its false statements and its gap were then corrected by the fourteenth round's structural rules,
  so its rows say ``"split": "dev"`` ("Sixteenth batch: kept14.jsonl", "Fourteenth round of rules").
- ``kept15.jsonl``: the seventeenth batch, first split ``"kept15"``: the first 30 of the 36 failing rows of
  ``tests/data/real_outputs_kept13/`` (vLLM's and lmdeploy's parser tests from files no earlier set used), by a rule
  committed before explain ran (``scripts/triage_queue.py kept15``), labelled and committed before the triage ran,
  scored once (9/30 cause, 15/30 fix, 7/10 nearest; ``python scripts/triage_kept7_score.py --set kept15.jsonl``)
  ("Seventeenth batch: kept15.jsonl"); labelled again by a second labeller ("Two labellers"), then relabelled by the
  labelling guide where its steps decide otherwise, so its rows say ``"split": "dev"`` ("Fifteenth round: the
  labelling guide"; kept16 to kept18 the same).
- ``kept16.jsonl``: the eighteenth batch, first split ``"kept16"``, now dev: the first 30 of the 38 failing rows of
  ``tests/data/real_outputs_kept14/`` (SGLang's, ollama's and Xinference's parser tests from files no earlier set
  used), by a rule committed before explain ran (``scripts/triage_queue.py kept16``), labelled and committed before
  the triage ran, scored once (22/30 cause, 25/30 fix, 3/10 nearest; ``python scripts/triage_kept7_score.py --set
  kept16.jsonl``; "Eighteenth batch: kept16.jsonl").
- ``kept17.jsonl``: the nineteenth batch, first split ``"kept17"``, now dev: six failing outputs quoted in public
  reports on clients and agents (Agent Zero, goose, Cherry Studio, opencode, Foundry Local, Memoh), picked by a query
  rule committed before any report was read (one amendment, committed before any row), checked against every held file
  (``scripts/triage_batch_check.py``), labelled and committed before explain or the triage ran, scored once (5/6
  cause, 6/6 fix, 0/1 nearest; ``python scripts/triage_kept7_score.py --set kept17.jsonl``) ("Nineteenth batch:
  kept17.jsonl").
- ``kept18.jsonl``: the twentieth batch, first split ``"kept18"``, now dev: the whole failing queue (21 rows) of
  ``tests/data/real_outputs_kept15/`` (Xinference's, SGLang's and lmdeploy's parser tests from files no earlier set
  used, each family on its model's own template), by a rule committed before explain ran (``scripts/triage_queue.py
  kept18``), labelled and committed before the triage ran (``python scripts/triage_kept7_score.py --set
  kept18.jsonl``; "Twentieth batch: kept18.jsonl"), scored once (13/21 cause, 18/21 fix, 6/14
  nearest).
- ``kept19.jsonl``: the twenty-first batch, first split ``"kept19"``, now dev: the whole failing queue (11 rows) of
  ``tests/data/real_outputs_kept16/`` (dynamo's, mistral.rs's and LocalAI's parser tests, projects no earlier set
  mined, each family on its model's own template), by a rule committed before explain ran (``scripts/triage_queue.py
  kept19``), labelled by the labelling guide's decision order and committed before the triage ran (``python
  scripts/triage_kept7_score.py --set kept19.jsonl``; "Twenty-first batch: kept19.jsonl"), scored once (9/11 cause,
  11/11 fix, 8/8 nearest); labelled again by a second labeller by the guide, then development data of the sixteenth
  round of rules, so its rows say ``"split": "dev"`` ("Sixteenth round of rules"; kept20 to kept22 the same).
- ``kept20.jsonl``: the twenty-second batch, first split ``"kept20"``, now dev: the failing queue of
  ``tests/data/real_outputs_kept17/`` (model makers' and libraries' own documents and one report, each family on its
  model's own template; 11 rows, the fourth ``NONE`` skipped by the third-of-the-batch cap: 10), by a rule committed
  before explain ran (``scripts/triage_queue.py kept20``), labelled by the labelling guide's decision order and
  committed before the triage ran, scored once (6/10 cause, 6/10 fix, 3/7 nearest; ``python
  scripts/triage_kept7_score.py --set kept20.jsonl``; "Twenty-second batch: kept20.jsonl").
- ``kept21.jsonl``: the twenty-third batch, first split ``"kept21"``, now dev: the whole failing queue of
  ``tests/data/real_outputs_kept18/`` (Python training, agent and serving libraries' parser tests, each family on its
  model's own template; 12 rows), by a rule committed before explain ran (``scripts/triage_queue.py kept21``),
  labelled by the labelling guide's decision order and committed before the triage ran, scored once (4/12 cause,
  10/12 fix, 6/8 nearest; ``python scripts/triage_kept7_score.py --set kept21.jsonl``; "Twenty-third batch:
  kept21.jsonl").
- ``kept22.jsonl``: the twenty-fourth batch, first split ``"kept22"``, now dev: the failing queue of
  ``tests/data/real_outputs_kept19/`` (the MLX ecosystem's parser tests: vllm-mlx's, mlx-omni-server's and
  Rapid-MLX's, each family on its model's own template; 35 rows, the first 30 by the rule's size), by a rule committed
  before explain ran (``scripts/triage_queue.py kept22``), labelled by the labelling guide's decision order (two rows
  with its new cause ``REPEATED_PROMPT_TAIL``) and committed before the triage ran, scored once (20/30 cause, 27/30
  fix, 13/18 nearest; ``python scripts/triage_kept7_score.py --set kept22.jsonl``; "Twenty-fourth batch:
  kept22.jsonl").
- ``kept23.jsonl``: the twenty-fifth batch, kept aside (split ``"kept23"``) and dev since the seventeenth round of
  rules, written from its misses (its rows say ``"split": "dev"``): the whole failing queue of
  ``tests/data/real_outputs_kept20/`` (openai/harmony's tests and the big engines' test files no set cited: SGLang's
  unit detectors, lmdeploy's required tool choice, vLLM's Gemma 4 enforcement; each family on its model's own
  template; 21 rows), by a rule committed before explain ran (``scripts/triage_queue.py kept23``), labelled by the
  labelling guide's decision order and committed before the triage ran, scored once (14/21 cause, 18/21 fix, 7/15
  nearest; ``python scripts/triage_kept7_score.py --set kept23.jsonl``; "Twenty-fifth batch: kept23.jsonl (was
  kept aside, now dev)").
- ``kept24.jsonl``: the twenty-sixth batch, kept aside (split ``"kept24"``) and dev since the seventeenth round of
  rules (its rows say ``"split": "dev"``): the whole failing queue of
  ``tests/data/real_outputs_kept21/`` (small local servers' parser tests: exo's and TabbyAPI's, each family on its
  model's own template; 19 rows), by a rule committed before explain ran (``scripts/triage_queue.py kept24``),
  labelled by the labelling guide's decision order and committed before the triage ran, scored once (17/19 cause,
  19/19 fix, 6/11 nearest; ``python scripts/triage_kept7_score.py --set kept24.jsonl``; "Twenty-sixth batch:
  kept24.jsonl (was kept aside, now dev)").
- ``kept25.jsonl``: the twenty-seventh batch, kept aside (split ``"kept25"``) and dev since the eighteenth round of
  rules, written from its misses (its rows say ``"split": "dev"``): the failing queue of
  ``tests/data/real_outputs_kept22/`` (model gateways' and engines' Rust and C++ parser tests: the SMG gateway's, SGLang's
  Rust router's and xllm's, each family on its model's own template; its first 30 of 34 rows), by a rule committed
  before explain ran (``scripts/triage_queue.py kept25``), labelled by the labelling guide's decision order and
  committed before the triage ran, scored once (26/30 cause, 29/30 fix, 11/12 nearest; ``python
  scripts/triage_kept7_score.py --set kept25.jsonl``; "Twenty-seventh batch: kept25.jsonl (was kept aside, now
  dev)").
- ``kept26.jsonl``: the twenty-eighth batch, kept aside (split ``"kept26"``) and dev since the eighteenth round of
  rules (its rows say ``"split": "dev"``): the whole failing queue of
  ``tests/data/real_outputs_kept23/`` (OpenVINO Model Server's C++ output-parser tests and FastDeploy's tool and
  reasoning parser tests, each family on its model's own template; 28 rows), by a rule committed before explain ran
  (``scripts/triage_queue.py kept26``), labelled by the labelling guide's decision order and committed before the
  triage ran, scored once (14/28 cause, 20/28 fix, 14/17 nearest; 22/28 fix after two hand fixes ``apply_fix``
  cannot show were corrected; ``python scripts/triage_kept7_score.py --set kept26.jsonl``; "Twenty-eighth batch:
  kept26.jsonl (was kept aside, now dev)").
- ``kept27.jsonl``: the twenty-ninth batch, kept aside (split ``"kept27"``) and dev since the eighteenth round of
  rules (its rows say ``"split": "dev"``): failing outputs quoted in recent public
  reports on the newest families whose templates we hold, picked by a query rule committed before any report was read
  (two amendments, each committed before any row), checked against every held file (``scripts/triage_batch_check.py``),
  labelled by the labelling guide's decision order and committed before explain or the triage ran; one row
  (google/adk-python#5024, DeepSeek-V3's own call markup left as text), scored once (1/1 cause, 1/1 fix, 0/0 nearest;
  ``python scripts/triage_kept7_score.py --set kept27.jsonl``; "Twenty-ninth batch: kept27.jsonl (was kept aside, public
  reports, now dev)").
- ``kept28.jsonl``: the thirtieth batch, kept aside (split ``"kept28"``) and dev since the nineteenth round of
  rules (its rows say ``"split": "dev"``): the whole failing queue of
  ``tests/data/real_outputs_kept24/`` (the SMG gateway's and SGLang's Rust router's test files no earlier set used,
  each family on its model's own template; 29 rows), by a rule committed before explain ran (``scripts/triage_queue.py
  kept28``), labelled by the labelling guide's decision order and committed before the triage ran, scored once (21/29
  cause, 27/29 fix, 22/24 nearest; ``python scripts/triage_kept7_score.py --set kept28.jsonl``; "Thirtieth batch:
  kept28.jsonl (was kept aside, now dev)").
- ``kept29.jsonl``: the thirty-first batch, kept aside (split ``"kept29"``) and dev since the nineteenth round of
  rules (its rows say ``"split": "dev"``): the whole failing queue of
  ``tests/data/real_outputs_kept25/`` (vllm-ascend's platform-patch parser tests: GLM-4.5, MiniMax M2 / M3, DeepSeek V4,
  each family on its model's own template; 7 rows), by a rule committed before explain ran (``scripts/triage_queue.py
  kept29``), labelled by the labelling guide's decision order and committed before the triage ran, scored once (6/7
  cause, 7/7 fix, 3/3 nearest; ``python scripts/triage_kept7_score.py --set kept29.jsonl``; "Thirty-first batch:
  kept29.jsonl (was kept aside, now dev)").
- ``kept30.jsonl``: the thirty-second batch, kept aside (split ``"kept30"``) and dev since the twentieth round of
  rules (its rows say ``"split": "dev"``): the whole failing queue of
  ``tests/data/real_outputs_kept26/`` (ms-swift's agent-template and template tests: Kimi K3, DeepSeek-V4-Flash-0731,
  MiniCPM5, each family on its model's own template; 3 rows), by a rule committed before explain ran
  (``scripts/triage_queue.py kept30``), labelled by the labelling guide's decision order and committed before the
  triage ran, scored once (3/3 cause, 3/3 fix, 2/2 nearest; ``python scripts/triage_kept7_score.py --set
  kept30.jsonl``; "Thirty-second batch: kept30.jsonl (was kept aside, now
  dev)").
- ``kept31.jsonl``: the thirty-third batch, kept aside (split ``"kept31"``) and dev since the twentieth round of
  rules (its rows say ``"split": "dev"``): the whole failing queue of
  ``tests/data/real_outputs_kept27/`` (training and RL frameworks' rollout parser tests: AReaL, rllm, ROLL on Qwen3,
  Qwen3.5, Qwen3-Coder, Llama 3.1 / 3.2, each family on its model's own template; 11 rows), by a rule committed before
  explain ran (``scripts/triage_queue.py kept31``), labelled by the labelling guide's decision order and committed
  before the triage ran, scored once (11/11 cause, 11/11 fix, 7/7 nearest; ``python scripts/triage_kept7_score.py
  --set kept31.jsonl``; "Thirty-third batch: kept31.jsonl (was kept aside, now dev)").
- ``kept32.jsonl``: the thirty-fourth batch, kept aside (split ``"kept32"``) and dev since the twentieth round of
  rules (its rows say ``"split": "dev"``): the whole failing queue of
  ``tests/data/real_outputs_kept28/`` (the model makers' own repositories: openai/harmony's C++ port parser tests for
  gpt-oss, MiniMax-M1's Portuguese function-call guide, each family on its model's own template; 4 rows), by a rule
  committed before explain ran (``scripts/triage_queue.py kept32``), labelled by the labelling guide's decision order
  and committed before the triage ran, scored once (3/4 cause, 4/4 fix, 0/0 nearest; ``python
  scripts/triage_kept7_score.py --set kept32.jsonl``; "Thirty-fourth batch: kept32.jsonl (was kept aside, now dev)").
- ``kept33.jsonl``: the thirty-fifth batch, split ``"kept33"``, kept aside: the whole failing queue of
  ``tests/data/real_outputs_kept29/`` (on-device and C++/Java runtimes' parser tests: openvino.genai's Phi-4 and
  DeepSeek-R1 reasoning parsers and Llama-3 JSON parser, LiteRT-LM's Qwen3 and MiniCPM5 data processors, MNN Chat's
  gpt-oss result processor, each family on its model's own template; 14 rows), by a rule committed before explain ran
  (``scripts/triage_queue.py kept33``), labelled by the labelling guide's decision order and committed before the
  triage ran, scored once (4/14 cause, 7/14 fix, 2/4 nearest; ``python scripts/triage_kept7_score.py --set
  kept33.jsonl``; "Thirty-fifth batch: kept33.jsonl (kept aside)").
- ``kept34.jsonl``: the thirty-sixth batch, split ``"kept34"``, kept aside: the whole failing queue of
  ``tests/data/real_outputs_kept30/`` (Python agent frameworks' reasoning-parser tests: autogen's R1 parsers and
  smolagents' DeepSeek think-tag removal, on DeepSeek R1's own template; 5 rows), by a rule committed before explain
  ran (``scripts/triage_queue.py kept34``), labelled by the labelling guide's decision order and committed before the
  triage ran, scored once (4/5 cause, 5/5 fix, 0/0 nearest; ``python scripts/triage_kept7_score.py --set
  kept34.jsonl``; "Thirty-sixth batch: kept34.jsonl (kept aside)")."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os

import pytest

from core.chat.request import ChatRequest
from core.explain.explain import explain
from core.explain.model import Setup as _Setup
from core.explain.model import build_bundle as _build
from core.explain.nearest import Edit, _context
from core.explain.triage import MAX_EDITS, Mistake, TriageFixKind, _why_none, apply_fix, edit_mistake, triage
from core.jinja.template import ChatTemplate

from .conftest import ROOT, TEMPLATES

# (cause, fix verified, nearest found, nearest within 3 edits) per set (its file in tests/data/triage) and split
SCORES = {
    # the nineteenth round: localharness-104 relabelled FIELD_ALIAS -> OMITTED_MARKER by the guide's step 4 before
    # step 5 (`<tool_call>{` without the line break the template writes), which the triage now names (same figures)
    "cases.jsonl": {"dev": (45, 45, 14, 14), "holdout": (18, 18, 4, 4)},
    "fresh.jsonl": {"dev": (16, 16, 2, 2)},
    "kept.jsonl": {"dev": (6, 6, 2, 2)},
    "kept2.jsonl": {"dev": (12, 12, 5, 5)},
    "kept3.jsonl": {"dev": (11, 11, 3, 3)},
    "kept4.jsonl": {"dev": (12, 12, 1, 1)},
    "kept5.jsonl": {"dev": (1, 1, 0, 0)},
    # kept aside: (25, 36, 10, 17) before the ninth round; in the thirteenth round kept-doc-qwen25-hf-final-answer
    # (`<|im_end|>` kept after the answer) relabelled NONE -> TRAILING_TEXT + strip-stop-token (its note says why)
    # the nineteenth round: kept6-internlm2-escaped-strings relabelled FIELD_ALIAS -> OMITTED_MARKER by the guide's
    # step 4 before step 5 (the line break after `<|plugin|>` left out), which the triage now names (40 either way)
    "kept6.jsonl": {"dev": (40, 40, 17, 17)},
    # kept aside: (19, 27, 1, 13), then (20, 27, 4, 13) on the ninth round; (33, 34, 8, 13) on the tenth; the
    # reasoning and tool-call repairs then gave eight rows labelled "none helps" a verified fix (fix 34 -> 26 against
    # the old labels): as dev data those rows were relabelled with the fix that now verifies (34 again); the eleventh
    # round's typed schema edit fixes Kimi K3's single call (35)
    # after the kept6 repairs: kept7-sgl-minimaxm2-anyof-string relabelled with the fix that now gives the engine's
    # message; three MiniMax-M2 rows labelled "none helps" (text-around, anyof-null, unclosed-section) are offered a
    # fix that reads the call but keeps the text the engine calls content in the reasoning: 35 -> 32; in the twelfth
    # round unclosed-section relabelled with the prompt patch + tag-whitespace that now gives the engine's message
    # (not offered: the request turns thinking on, so triage reads an unclosed reasoning); in the thirteenth round
    # sgl-harmony-complete-reasoning-flow (`<|return|>` kept) relabelled as kept6's end-of-turn row
    # the seventeenth round (the expected message decides): unclosed-section's text before the call, which the
    # expected message has as content, is the reasoning setting with the prompt patch + tag-whitespace (33/32 -> 34/33)
    # the nearest output: a schema's non-string parameter written as prose where the render writes a JSON value,
    # quoted as a JSON string (DeepSeek V4 / V3.2 nonjson-object-param): nearest 9 -> 11; an argument the schema does
    # not declare deleted whole, as the render writes an argument (Kimi K3's `opts`): 12
    # the last rows within 3 edits: the one declared tool's name put where the output names another (Kimi K3's
    # `a&amp;b`), then the undeclared argument deleted: 13
    "kept7.jsonl": {"dev": (34, 33, 13, 13)},
    # kept aside: (23, 28, 3, 9) on the ninth and on the tenth round; dev since the eleventh (37, 40, 4, 9); after the
    # kept6 repairs seven rows labelled "none helps" relabelled with the fix that now gives the engine's message, two
    # (granite4-content-between, minimax-m2-content-before) offered a fix whose message differs: 40 -> 38
    # (twelfth round: minimax-m2-content-before relabelled with the prompt patch + tag-whitespace, which gives the
    # engine's message, and named REASONING_SETTING: 37/38 -> 38/39); after the kept8 repairs (content-between-calls
    # in the Qwen3-Coder handler, and text after the last call no longer taken for a cut-off call) two more rows
    # labelled "none helps" are offered a fix whose message differs from the engine's: granite4-complex (the
    # whitespace right after a call stays layout) and step3p5-mixed-content (`hello` stays reasoning, the prompt
    # opened it): 39 -> 37
    # the nearest output on every row within 3 edits (docs/explain.md): nearest 4 -> 5
    # the rest of a call cut inside a value, as the render writes it, put in at the end: nearest 5 -> 6 (MiniMax-M3's
    # cut second invoke)
    # the last rows within 3 edits: MiniMax-M1's call block inside `<think>` deleted alone, opener through closer: 7
    # (the two Step-3.5 rows parse clean with their calls: 0 edits, no search)
    # a clean parse with calls searched against the expected message: the two Step-3.5 rows' `</think>` put in at
    # the start (nearest 7 -> 9)
    "kept8.jsonl": {"dev": (38, 37, 9, 9)},
    # kept aside: first run (23, 25, 14, 16) (docs/explain.md "Eleventh batch"), (24, 25, 14, 16) on the eleventh
    # round's rules and repairs, neither written from it; dev since the twelfth round, whose rules were written from
    # its misses ("Twelfth round of rules"): (33, 34, 14, 16); the repairs written from kept8's misses (its real
    # outputs are these rows' source) then read four rows, relabelled (their notes say so): lfm2-json
    # (json-calls-in-call-markers), glm45-type-coercion (quoted-number + call-marker-whitespace), minicpm5-single and
    # -interleaved (content-between-calls); step35-interleaved (labelled "none helps") is offered
    # content-between-calls, which reads both calls while `hello` stays reasoning, and is now named TRAILING_TEXT
    # (labelled REASONING_SETTING): cause 33 -> 32, fix 34 -> 33; named REASONING_SETTING again once the lossless
    # word check read a word glued to a run of output words (its content no longer repeats the output): cause 33
    "kept9.jsonl": {"dev": (33, 33, 16, 16)},
    # kept aside: first run (24, 32, 11, 17), on the tenth round's rules; (25, 29, 17, 17) on the eleventh round's
    # rules and repairs, neither written from it (3 rows labelled "none helps" offered a fix that gives the engine's
    # message); as dev data those three and MiniMax-M2's text-before-call row relabelled with the fix that now gives
    # the engine's message (their notes say so): 29 -> 32; then the twelfth round's rules, written from its misses;
    # the kept9 repairs' relabels (eleven rows, their notes say so) leave it as it is:
    # the seventeenth round: trt-minimax-single's text before the call, content in the expected message, is the
    # reasoning setting with the prompt patch + tag-whitespace (32/32 -> 33/33)
    "kept10.jsonl": {"dev": (33, 33, 17, 17)},
    # kept aside: first run (14, 19, 6, 13), on the rules and repairs as they stood (docs/explain.md "Thirteenth
    # batch"); then on the twelfth round's rules and the repairs written from kept8's and kept9's misses, none
    # written from it: cause 14 -> 16, fix 19 -> 20 (json-call-in-tags, widened, now reads
    # kept10-ollama-laguna-json-tool-call, labelled "none helps": the label stands, kept aside; 21 counting it);
    # as dev data (kept10's real outputs are these rows' source): fix 20 -> 18 as call-opener-dropped and
    # call-list-unbracketed read the outputs of two rows labelled "none helps" (kept10-vllm-gemma4-bare-call-after-
    # thought-channel, kept10-vllm-nemotron-nano-v2-extract-tool-calls-wraps-single-object): explain offers the
    # repair, but the repair alone does not give the engine's message (Gemma 4's reasoning keeps its line break,
    # Nemotron's call needs the /no_think its real-output row was given), so the labels stand with a note; and
    # 18 -> 20 as five rows labelled "none helps" were relabelled with the fix that now gives the engine's message
    # (their notes say so): the four Command R+ rows (tag-whitespace), glimmer-atem-value-types-and-whitespace
    # (nullable-null), poolside-non-string-arg-still-deserialized (spaced-typed-value). The rows keep the template /
    # request they were labelled on where their real-output rows were corrected since (CORRECTED_AFTER_LABELLING)
    # Dev since the thirteenth round, whose rules were written from its misses ("Thirteenth round of rules"): (31,
    # 33, 6, 13) on the rules alone; merged side by side with the kept10 repairs (fix -2 above): (31, 31, 6, 13);
    # laguna-standalone-json-tool-call relabelled (standalone-json-call with template-default-thinking, which the
    # repair fallback now names instead of the whole set): fix 32; the causes from the template's renders (not
    # written from it) name Poolside's space-padded integer a value not of its type, every call piece being in place
    # (32)
    # the labelling guide: kept10-ollama-apertus15-content-and-thinking relabelled a repeated prompt tail (its output
    # begins with the `<|assistant_start|>` the prompt ends with), which the triage names, improved fidelity its fix
    # the nearest output on every row within 3 edits: nearest 6 -> 13 (Gemma 4's colon and glued calls, Command R's
    # `Action: ```json`)
    # the twentieth round: kept10-vllm-gemma4-multiple-sequential-canonical-calls relabelled TRAILING_TEXT ->
    # OMITTED_MARKER by the guide's step 4 (the whitespace clarification: a line break between calls the template
    # writes back to back), which the triage names (33 -> 34)
    "kept11.jsonl": {"dev": (34, 33, 13, 13)},
    # kept aside, public reports: first run, at the labelled commit, and on the twelfth round: (3, 3, 2, 4); dev
    # since the thirteenth round: (6, 5, 2, 4); the Gemma 4 report with a plain quote for the string opener
    # relabelled after the round written from kept13–kept15 (fix string-opener-omitted, the cause note's one-edit
    # message; "none helps" would read fix 4)
    # the nearest output on every row within 3 edits: nearest 2 -> 3
    # the nineteenth round: the vLLM Llama 3.1 405B run past `<|eom_id|>` relabelled TRAILING_TEXT -> FOREIGN_WRAPPER
    # by the guide's step 4, first by position (`<|python_tag|>` before the call), which the triage now names
    # the last rows within 3 edits: Qwen2.5-VL's argument beside the name wrapped in `"arguments": {…}` and `⚗`
    # replaced by `</tool_call>`: nearest 3 -> 4
    "kept12.jsonl": {"dev": (6, 5, 4, 4)},
    # kept aside: first run (19, 32, 3, 9), at the labelled commit (docs/explain.md "Fifteenth batch");
    # spark25-multiple-calls relabelled (fix content-between-calls, which gives the engine's message once the
    # lossless word check was fixed); unchanged by the thirteenth round's rules and the kept10 repairs, written
    # without it; dev since the fourteenth round, whose rules were written from its false statements ("Fourteenth
    # round of rules"): a bare Qwen3-Coder call an omitted opener, a complete DSML block in open reasoning not cut
    # (21), Gemma 4's `<|channel>` without `thought` an omitted piece of the marker (24), Muse Glimmer's
    # `<|start|>` without the `assistant` its generation prompt writes an omitted piece of the header (27); the
    # causes from the template's renders ("Causes from the template's renders"): Muse Glimmer's five tool channels,
    # every call piece written and none read, the format not found; Spark 2.5's `not-an-int` a value not of its type
    # (33); sglang-dsv4-preamble-before-bare-invoke relabelled (fix call-section-omitted, which now gives the
    # engine's message; "none helps" would read fix 31)
    # the labelling guide: three rows relabelled — Qwen 3.5's `<think>` written again before a compact call re-opened
    # reasoning (steps 3 before 4, both rows), Muse Glimmer's repeated `<|start|>assistant` header a repeated prompt
    # tail: (34, 32, 3, 9) on the rules as they stood, (35, 32, 3, 9) on the rules that follow the guide
    # the nearest output on every row within 3 edits: nearest 4 -> 8 (DeepSeek V4's bare invoke, Apertus's blocks
    # joined)
    # the last rows within 3 edits: Spark 2.5's `not-an-int` quoted, the undeclared argument deleted: 9
    "kept13.jsonl": {"dev": (35, 32, 9, 9)},
    # kept aside, public reports on agents and clients: first run (7, 11, 4, 6), at the labelled commit
    # (docs/explain.md "Sixteenth batch"); unchanged by the thirteenth round's rules and the kept10 repairs,
    # written without it; dev since the fourteenth round: a bare Qwen2.5-Coder JSON call an omitted opener, the two
    # gpt-oss calls with no tools sent TOOLS_NOT_SENT (one a gap, one the analysis text quoted as a call); three
    # "none helps" now name what stops the repairs (the score counts no reason)
    # nearest in output order, a backslash that starts no JSON escape doubled: nearest 5 -> 6 (the bare `\\P` call)
    # the twentieth round: Hermes 3's bare JSON call with swapped keys names the opener written nowhere first (step 4,
    # first by position), not another format (10 -> 11, with or without the expected message)
    "kept14.jsonl": {"dev": (11, 11, 6, 6)},
    # kept aside: first run (9, 15, 7, 10), at the labelled commit (docs/explain.md "Seventeenth batch"); dev since
    # the labelling guide (docs/explain.md "Fifteenth round: the labelling guide"): fifteen rows relabelled by its
    # steps — on the rules as they stood (8, 11, 7, 10) (the four MiniMax-M2 append-think rows, a clean parse the
    # guide calls the reasoning setting, now miss cause and fix); the rules that follow its order: MiniCPM5's
    # mis-decoded tag spaces, Qwen2.5-Coder's `<tools>` opener, Hy v4's missing `<tool_sep>` (16)
    # the round of repairs written from kept13–kept15 (args-separator-omitted, tag-attribute-space: fixes relabelled
    # from a template patch or "none helps" on seven rows, each giving the engine's message): fix 11 -> 14
    # the seventeenth round: vLLM's Nemotron `<think>` block the engine's message keeps as content, the reasoning
    # setting with reasoning_format none (16/14 -> 17/15)
    # the twentieth round: the prompt patch that opens the reasoning written into the template's raw text (Kimi K2
    # Thinking's generation prompt, no quoted literal), and a reasoning closer never opened named before a call id
    # of another shape (step 2 before step 5), its fix the patch with call-id-namespace-optional (17/15 -> 18/17)
    "kept15.jsonl": {"dev": (18, 17, 10, 10)},
    # kept aside: first run (22, 25, 3, 10), at the labelled commit (docs/explain.md "Eighteenth batch"); dev since
    # the labelling guide: six rows relabelled, the same on the rules as they stood; Command 4's leading text and
    # Kimi K3's repeated prompt tail (27)
    # the round of repairs written from kept13–kept15: a fix now exists for the three Cohere rows with text before
    # the action block (action-after-text), labelled "none helps"; they stay so (their notes say why: the message
    # carries the model's call id "0", the engine's leaves it out): fix 25 -> 22
    # the round written from kept16–kept19: call-ends-reasoning's look-ahead no longer waits on text after the call,
    # so the repair offered for kept14-xinference-glm5-streaming-text-after-processed-call gives the labelled
    # template patch's message: fix 22 -> 23
    # the nearest-output search's edit kinds (prose after the calls, a closer and an opener at one place …): 3 -> 6
    # the seventeenth round: the expected message decides two rows' text before a call (MiniMax-M2's `a <minix`,
    # GLM-5's `Before`) is content, the reasoning setting, with the prompt patch and the repairs (27/23 -> 29/25)
    # and ollama's Qwen3-VL `plan</think>answer`, content in the engine's message, the reasoning setting with the
    # prompt patch (29/25 -> 30/26)
    "kept16.jsonl": {"dev": (30, 26, 10, 10)},
    # kept aside, public reports on clients and agents: first run at the labelled commit (docs/explain.md
    # "Nineteenth batch"); the miss is Qwen2.5-VL's template without tools named another family's format; dev since
    # the labelling guide: goose#2926's fence an omitted opener (4 on the rules as they stood, 5)
    "kept17.jsonl": {"dev": (5, 6, 1, 1)},
    # kept aside: first run (13, 18, 6, 14), at the labelled commit (docs/explain.md "Twentieth batch")
    # kept15-sglang-dsv4-prose-and-bare-invoke relabelled after it: call-section-omitted, merged while kept aside,
    # gives the engine's message (fix none -> the repair; without the relabel 17)
    # dev since the labelling guide: seven rows relabelled (15, 20, 6, 14 on the rules as they stood: GLM-4.7's union
    # values the template renders alike are no mistake); DeepSeek V3.1's own calls an analysis misread (19)
    # the round of repairs written from kept13–kept15: four Gemma 4 rows relabelled (fix string-opener-omitted) and
    # the two GLM-4.7 union rows (the guide's NONE, fix union-typed-value), each giving the engine's message; a
    # labelled change is checked under NONE too (20; 18 when NONE meant "offer nothing")
    # the seventeenth round: GLM-5's text before a split call, content in the expected message, the reasoning
    # setting with the prompt patch; Qwen3's missing line break after `<tool_call>` before its swapped keys, first
    # by position (19/20 -> 21/21)
    "kept18.jsonl": {"dev": (21, 21, 14, 14)},
    # kept aside: first run (9, 11, 8, 8), at the labelled commit (docs/explain.md "Twenty-first batch")
    # dev since the sixteenth round of rules: Llama 3.1's `<|python_tag|>` before a call with a key alias a wrapper
    # (step 4 before step 5) (10)
    # the seventeenth round: dynamo's Gemma 4 lone `<channel|>` relabelled REASONING_SETTING by the guide's step 2
    # clarification (its note says so; the triage named it so already): 10 -> 11
    "kept19.jsonl": {"dev": (11, 11, 8, 8)},
    # kept aside: first run at the labelled commit (docs/explain.md "Twenty-second batch"); the misses are the three
    # NONE rows (a stop token the render also writes, left in the text: the triage names TRAILING_TEXT and offers the
    # server's stop) and MiniMax-M2's text before a call, named reasoning never closed with the repair that keeps it
    # as reasoning
    # a labelled change is checked under NONE too (the labelling guide's step 1: a parser fault a change of ours can
    # mend): its three NONE rows labelled with the server's stop get it offered (6 when NONE meant "offer nothing")
    # dev since the sixteenth round of rules: unchanged (its misses are the NONE rows and MiniMax-M2's text before a
    # call, which need the engine's message)
    # the round written from kept16–kept19: kept17-hermes-fc-readme-inference-example-call relabelled ("none helps"
    # -> the offered python-dict-call with the server's stop; its note says so): unchanged at 9 (8 without it)
    # the nearest output on every row within 3 edits: nearest 3 -> 4 (Hermes 2 Pro's members in another order)
    # the two plain Hermes answers relabelled nearest_within_3 false (their notes say why): nearest 4/7 -> 4/5
    # the last rows within 3 edits: MiniMax-M2's two invokes, `</think>` and each invoke's arguments moved to the
    # schema's order: nearest 4 -> 5
    "kept20.jsonl": {"dev": (6, 9, 5, 5)},
    # kept aside: first run at the labelled commit (docs/explain.md "Twenty-third batch"); the cause misses are
    # MiniCPM5 parameters the tool does not declare named an omitted marker (or another format), two faults named by
    # the later step (MISSING_REQUIRED, TRAILING_TEXT for the guide's LEADING_TEXT), Seed-OSS's markerless reasoning
    # taken as no mistake, and Gemma 4's leading text hiding the channel opener
    # dev since the sixteenth round of rules: MiniCPM5's undeclared parameters in the template's markup (4 rows), the
    # line break before the missing required parameter, the text before the call first by position, Gemma 4's
    # channel opener after text (11)
    # the nearest-output search's edit kinds: prose after the calls deleted (nearest 6 -> 7)
    # the seventeenth round: Seed-OSS's markerless text, reasoning in the expected message, the reasoning setting
    # with reasoning-end-without-start (11/10 -> 12/11)
    # a required argument the call never wrote put in as the render writes it: Step-3.5's missing `state` (nearest
    # 7 -> 8)
    "kept21.jsonl": {"dev": (12, 11, 8, 8)},
    # kept aside: first run at the labelled commit (docs/explain.md "Twenty-fourth batch"); the same on the triage
    # that follows the labelling guide (merged while kept aside): its two REPEATED_PROMPT_TAIL rows are named an
    # omitted marker
    # dev since the sixteenth round of rules: gpt-oss's `<|start|>` again (2 rows), Gemma 4's closer before a next
    # call, Qwen3-Coder's indented markup, a closer written last (no cut), `<|python_tag|>` before a run-on turn, a
    # bare Gemma 4 call with `<|"|>` intact (27)
    # the round written from kept16–kept19: two "none helps" rows relabelled with the repair now offered
    # (kept19-vllmmlx-gemma4-multiple-calls-one-block: calls-in-one-block; kept19-vllmmlx-minimax-multiple-tool-calls:
    # call-ends-reasoning + section-per-call; their notes say so): unchanged at 27 (25 without them)
    # the nearest-output search's edit kinds (closers before the last closer, a wrapper's two halves, a closer and
    # an opener at one place): nearest 13 -> 18; Gemma 4's two calls in one block stay an omitted closer
    # the seventeenth round: GLM-4.5's malformed XML, its line break after the name first by position (27 -> 28)
    "kept22.jsonl": {"dev": (28, 27, 18, 18)},
    # kept aside: first run at the labelled commit (docs/explain.md "Twenty-fifth batch"); the cause misses are
    # markup the guide names earlier or otherwise (Gemma 4's two <|"|> gone named an omitted marker, not a decoder's
    # stripping; headerless Harmony text before a call named another format; a bare DeepSeek V3.1 call and a bare
    # DSML invoke named an omitted marker and no mistake), a stray Kimi K2 section closer taken as no mistake, and
    # MiniMax-M2's text before a call named reasoning never closed with the repair that keeps it as reasoning
    # kept20-sglang-minimax-m2-two-blocks relabelled after it: section-per-call, merged while kept aside, gives the
    # engine's message (fix none -> the repair; without the relabel 17); the sixteenth round of rules moved no row
    # then a newcomer's check read this row and found the triage's sentence false ("left `s` out" of the section
    # opener, where the output wrote the template's own call opener with the section opener before it left out): the
    # fix of that rule names the omitted opener (cause 14 -> 15); the batch's untouched measure is the one above
    # dev since the seventeenth round of rules, written from its misses: the expected message decides MiniMax-M2's
    # text before a call; headerless gpt-oss text an omitted opener (2); a bare DSML invoke an omitted opener;
    # Gemma 4's two `<|"|>` gone the decoder's, with the server fix; Kimi K2's lone section closer text after the
    # answer (15/18 -> 21/21)
    # the repairs written from kept20–kept25 (this batch's source among them): three gpt-oss rows labelled "none
    # helps" (the role header repeated with its recipient, one closed by `<|end|>`) now get a fix that gives the
    # engine's message and were relabelled with it (their notes say so): unchanged at 21 (18 without them)
    "kept23.jsonl": {"dev": (21, 21, 15, 15)},
    # kept aside: first run at the labelled commit (docs/explain.md "Twenty-sixth batch"); the cause misses are
    # GLM-4.5's unclosed value named cut short and GLM-4.5's text between the calls named trailing text (the label
    # takes the line breaks first, by position)
    # (the sixteenth round of rules and the repairs written from kept16 … kept19 moved no row; the nearest-output
    # search's new edit kinds, written from kept19 … kept22, find one more nearest output: 6 -> 7)
    # dev since the seventeenth round of rules: GLM-4.5's line breaks after the name, the first fault by position
    # before the unclosed value and the text between the calls (17 -> 19)
    "kept24.jsonl": {"dev": (19, 19, 11, 11)},
    # kept aside: first run at the labelled commit (docs/explain.md "Twenty-seventh batch"); the cause misses are
    # DSML's JSON body and MiniMax-M3's second call block named another format, GLM-4.5's Python literals named by
    # the later fault (the label takes the line breaks first), MiniMax-M2's text before a call named reasoning never
    # closed (with the repair that keeps it as reasoning)
    # dev since the eighteenth round of rules, written from its misses: DSML's JSON body inside the template's own
    # invoke the omitted argument markers; MiniMax-M3's second call block in the template's own markup text after
    # the turn's end, not another format (26 -> 28; the same with or without the expected message)
    # the nineteenth round: GLM-4.5's line break inside the markup (step 4) named before its Python literals (step 5)
    # (28 -> 29, with or without the expected message); Python's True/False/None replaced by JSON's literal where
    # a JSON value is wanted: nearest 11 -> 12
    # the repairs written from kept20–kept25 (this batch's source among them): section-opener-whitespace reads the
    # four Kimi K2 rows labelled "none helps" (a line break after the section opener), with the engine's message but
    # for the model's own call ids: relabelled with it (their notes say so), fix 29 -> 29
    "kept25.jsonl": {"dev": (29, 29, 12, 12)},
    # kept aside: first run at the labelled commit (docs/explain.md "Twenty-eighth batch"); the cause misses are
    # mostly a second fault named first (Mistral's call ids where the label takes the omitted space first, by
    # position; Qwen3's line breaks where the label takes thinking on with no think block first, by step) and the
    # end tokens `</s>` / `<|end|>` / `<|call|>` named otherwise; the fix misses are end tokens the label fixed
    # otherwise than the triage's server setting, a FastDeploy reasoning policy and the request fix of two rows
    # first run (14, 20, 14, 17) with the labels as committed; then two Harmony rows' hand fixes corrected, the repair
    # trailing-end-of-turn acting where apply_fix does not look (test_the_hand_fix_works), to the server's stop on
    # <|return|>, the verifiable fix of the same fault (fix 20 -> 22), and two fixes marked clean: false
    # then the nearest-output round and the seventeenth round of rules, both written without it (and the score
    # passing the expected message): 14/22/14 -> 15/23/16 (without the expected message 14/22/16)
    # dev since the eighteenth round of rules: gpt-oss's answer ending `<|end|>` / `<|call|>` (another turn's
    # closer) text after the answer; Devstral's spaced name the omitted marker, its `[ARGS]</s>` cut short; the
    # template's own `<tool_call>` without its line break no wrapper; Qwen3-Coder's text after the read call no
    # other format (15/23 -> 21/23; without the expected message 14/22 -> 20/22)
    # the nineteenth round (the nearest output's first edit by step, then position): Llama 3.1's `<|python_tag|>`
    # before its `;`-joined calls, and Mistral's space left out after `[TOOL_CALLS]` before the call ids, x2
    # (21 -> 24; without the expected message 20 -> 23)
    # the repairs written from kept20–kept25 (this batch's source among them): five rows labelled "none helps" now
    # get a fix that gives the engine's message and were relabelled with it (their notes say so); Mistral's call
    # after prose, which the engine keeps as content, is now offered a fix whose message differs: fix 23 -> 24
    # the last rows within 3 edits: Devstral's `[ARGS]</s>`, the turn's end replaced by the arguments as the render
    # writes them (`{"arg1": ""}`; cause still CUT_SHORT): nearest 16 -> 17
    "kept26.jsonl": {"dev": (24, 24, 17, 17)},
    # kept aside, public reports on the newest families: first run at the labelled commit (docs/explain.md
    # "Twenty-ninth batch"); one row, DeepSeek-V3's own call markup read at improved fidelity
    # dev since the eighteenth round of rules (unchanged by it)
    "kept27.jsonl": {"dev": (1, 1, 0, 0)},
    # kept aside, the gateways' test files kept22 did not reach: first run at the labelled commit (docs/explain.md
    # "Thirtieth batch")
    # then the nearest-output round and the seventeenth round of rules, both written without it: nearest 22 -> 24;
    # cause 21 either way (one row gained, one lost), with or without the expected message
    # dev since the nineteenth round: the first edit of the nearest output (`<|python_tag|>` x2), JSON layout no
    # whitespace inside the markup (Qwen2.5's pretty-printed calls), text before a reasoning block the prompt leaves to
    # the model (Qwen3): 21 -> 25, with or without the expected message
    # the repairs written from kept20–kept25 (real_outputs_kept24 among them): section-opener-whitespace reads the
    # four Kimi K2 rows labelled "none helps", with the engine's message but for the model's own call ids: relabelled
    # with it (their notes say so), fix 27 -> 27
    # the twentieth round: Kimi K2's line break before the `<|tool_call_begin|>` the parser expected there is an
    # omitted marker, not another format (25 -> 26, with or without the expected message)
    "kept28.jsonl": {"dev": (26, 27, 24, 24)},
    # kept aside: first run at the labelled commit (docs/explain.md "Thirty-first batch"); the one cause miss is
    # MiniMax M3's text before a mid-answer think block (LEADING_TEXT by hand, REASONING_SETTING said)
    # dev since the nineteenth round: that text before a reasoning block the prompt leaves to the model (6 -> 7)
    "kept29.jsonl": {"dev": (7, 7, 3, 3)},
    # kept aside: first run at the labelled commit (docs/explain.md "Thirty-second batch"); two repeated reasoning
    # openers (Kimi K3's think channel, DeepSeek-V4-Flash-0731's <think>) and a nullable string's null
    # dev since the twentieth round of rules, written reading every batch's misses (unchanged by it)
    "kept30.jsonl": {"dev": (3, 3, 2, 2)},
    # kept aside: first run at the labelled commit (docs/explain.md "Thirty-third batch"); every row a class the
    # earlier batches taught the rules (the end-of-turn token kept, Qwen's line breaks, <|python_tag|>, the arguments key)
    # dev since the twentieth round of rules (unchanged by it)
    "kept31.jsonl": {"dev": (11, 11, 7, 7)},
    # kept aside: first run at the labelled commit (docs/explain.md "Thirty-fourth batch"); the one cause miss is
    # MiniMax-M1's <think> block under a template with no reasoning markers (TEMPLATE_MODEL_MISMATCH by hand,
    # FORMAT_NOT_FOUND said); three harmony texts repeating the prompt's <|start|>assistant
    # dev since the twentieth round of rules (unchanged by it: MiniMax-M1's <think> block stays FORMAT_NOT_FOUND, the
    # labellers split on it)
    "kept32.jsonl": {"dev": (3, 4, 0, 0)},
    # kept aside: first run at the labelled commit (docs/explain.md "Thirty-fifth batch"); the same without the
    # expected message; the cause misses are Phi-4-mini-reasoning's <think> under a template with no reasoning
    # markers (TEMPLATE_MODEL_MISMATCH by hand, FORMAT_NOT_FOUND or NONE said), MiniCPM5's quoted and spaced attributes
    # (TEMPLATE_MODEL_MISMATCH said) and MNN's channel-less gpt-oss messages (TOOLS_NOT_SENT said)
    # first measure fix 7 -> after the false-statement fixes 11: with the expected message, improved fidelity
    # (leading-think-block), which gives it exactly, is offered and ranked before the reasoning-marker override on
    # the four Phi-4-mini-reasoning rows that start with their <think> block; the gpt-oss rows now say
    # REASONING_SETTING, no call (still a cause miss); without the expected message nothing moves (4, 7, 2, 4)
    "kept33.jsonl": {"kept33": (4, 11, 2, 4)},
    # kept aside: first run at the labelled commit (docs/explain.md "Thirty-sixth batch"); the one cause miss is
    # autogen's text before a repeated <think> (LEADING_TEXT by hand, REOPENED_REASONING said: the second choice)
    "kept34.jsonl": {"kept34": (4, 5, 0, 0)},
}
# per set, in the order the sets were collected (a set shares no source or input with an earlier one): its cases
SIZES = {"cases.jsonl": 63, "fresh.jsonl": 16, "kept.jsonl": 6, "kept2.jsonl": 12, "kept3.jsonl": 11,
         "kept4.jsonl": 12, "kept5.jsonl": 1, "kept6.jsonl": 40, "kept7.jsonl": 35, "kept8.jsonl": 40,
         "kept9.jsonl": 34, "kept10.jsonl": 33, "kept11.jsonl": 40, "kept12.jsonl": 6,
         "kept13.jsonl": 36, "kept14.jsonl": 11, "kept15.jsonl": 30, "kept16.jsonl": 30,
         "kept17.jsonl": 6, "kept18.jsonl": 21, "kept19.jsonl": 11,
         "kept20.jsonl": 10, "kept21.jsonl": 12, "kept22.jsonl": 30, "kept23.jsonl": 21, "kept24.jsonl": 19,
         "kept25.jsonl": 30,
         "kept26.jsonl": 28,
         "kept27.jsonl": 1,
         "kept28.jsonl": 29,
         "kept29.jsonl": 7,
         "kept30.jsonl": 3, "kept31.jsonl": 11, "kept32.jsonl": 4, "kept33.jsonl": 14,
         "kept34.jsonl": 5}
SETS = {name: [json.loads(line) for line in open(ROOT / "tests" / "data" / "triage" / name, encoding="utf-8")]
        for name in SIZES}
CASES = SETS["cases.jsonl"]
_T: dict[str, ChatTemplate] = {}


def holdout(case: dict) -> bool:
    """Kept back by the first byte of sha256(URL) % 4 == 0; cases added after the first measurement to find the
    classes behind the holdout misses say ``"split": "dev"`` (they were collected to tune on)."""
    return case.get("split") != "dev" and hashlib.sha256(case["source"].encode()).digest()[0] % 4 == 0


def split(case: dict) -> str:
    """The split a case is scored in: the one its row names, else holdout or dev by hash (:func:`holdout`)."""
    return case.get("split") or ("holdout" if holdout(case) else "dev")


def _template(name: str) -> ChatTemplate:
    if name not in _T:
        _T[name] = ChatTemplate((TEMPLATES / name).read_text(encoding="utf-8"), name)
    return _T[name]


def _run(case: dict):
    t = _template(case["template"])
    req = ChatRequest.from_dict(case)
    ex = explain(t, req, case["input"])
    s = _Setup(t, req, "llama.cpp", {})
    # generous: counts must not depend on the machine; the expected message where the row gives it (`--expect`)
    return ex, triage(ex, s, _build(s), seconds=30.0, reexplain=explain, expect=case.get("expect"))


@pytest.mark.parametrize("name", list(SIZES))
def test_the_set_is_real_cited_and_new(name):
    cases = SETS[name]
    assert len(cases) == len({c["id"] for c in cases}) == SIZES[name]
    assert all(c["source"].startswith(("https://github.com/", "https://huggingface.co/")) and c["input"]
               and c["report_says"] for c in cases)
    assert {c["cause"] for c in cases} <= {m.name for m in Mistake}
    assert {split(c) for c in cases} == set(SCORES[name])
    earlier = [c for n in list(SIZES)[:list(SIZES).index(name)] for c in SETS[n]]
    assert not {c["source"] for c in cases} & {c["source"] for c in earlier}
    assert not {c["input"] for c in cases} & {c["input"] for c in earlier}


def test_the_second_kept_batch_notes_its_causes_and_expected_messages():
    cases = SETS["kept2.jsonl"]
    assert all(c["cause_note"] for c in cases) and len({c["source"] for c in cases}) == len(cases)
    assert all("expect" in c for c in cases if c["fix"]["kind"] != "none")


def test_the_fifth_batch_notes_its_causes_and_how_its_requests_were_written():
    cases = SETS["kept3.jsonl"]
    assert all(c["cause_note"] and c["note"] for c in cases) and len({c["source"] for c in cases}) == len(cases)
    assert len({c["template"] for c in cases}) >= 8 and len({c["cause"] for c in cases}) >= 7


def test_the_sixth_batch_notes_its_causes_and_how_its_requests_were_written():
    cases = SETS["kept4.jsonl"]
    assert all(c["cause_note"] and c["note"] for c in cases)
    assert len({(c["source"], c["template"]) for c in cases}) == len(cases)
    assert len({c["template"] for c in cases}) >= 8 and len({c["cause"] for c in cases}) >= 5


def test_the_seventh_batch_notes_its_cause_and_keeps_none_rows_within_a_third():
    cases = SETS["kept5.jsonl"]
    assert all(c["cause_note"] and c["note"] and c["split"] == "dev" for c in cases)
    assert 3 * sum(c["cause"] == "NONE" for c in cases) <= len(cases)


# triage rows whose real-output row was corrected after the batch was labelled (the row keeps what it was labelled
# on, its note says so, and its hand fix is that very correction): the fields that may differ
CORRECTED_AFTER_LABELLING = {
    **{f"kept10-trtllm-deepseek-r1-reasoning-{i}": ("template",) for i in range(5)},
    **{f"kept10-vllm-nemotron-nano-v2-{t}": ("messages",) for t in (
        "extract-tool-calls-returns-content-without-tool-call", "extract-tool-calls-from-nemotron-array",
        "extract-tool-calls-wraps-single-object", "extract-tool-calls-supports-string-arguments",
        "streaming-reconstructs-tool-call")},
}


def _check_queue_batch(name: str, real_dirs: list[str], *, prefix: str, split: str, size: int, templates: int,
                       causes: int, request: bool = True, fix_why: bool = False) -> None:
    """A triage batch taken from the failing queue of real-output sets (``scripts/triage_queue.py``): every row is the
    real-output row of its id (``prefix`` + id there: same source, output, template, and with ``request`` the same
    messages, tools and template kwargs; the engine's message kept as ``engine_message``), at queue positions
    1..``size``; NONE rows stay within a third; a fix's ``expect`` is the engine's message itself; the set spreads
    over at least ``templates`` templates and ``causes`` causes as labelled (``fix_why``: a "none helps" fix says
    why)."""
    from core.chat.realset import load_cases

    real = {c.id: c for d in real_dirs for c in load_cases(str(ROOT / "tests" / "data" / d))}
    cases = SETS[name]
    for c in cases:
        r = real[c["id"].removeprefix(prefix)]
        corrected = CORRECTED_AFTER_LABELLING.get(c["id"], ())
        assert (c["source"], c["input"], c["engine_message"]) == (r.source, r.output, r.expect)
        assert c["template"] == r.template or "template" in corrected
        if request:
            assert c["messages"] == r.request["messages"] or "messages" in corrected
            assert c["tools"] == (r.request.get("tools") or None)
            assert c.get("chat_template_kwargs") == r.request.get("chat_template_kwargs")
        assert c["cause_note"] and c["note"] and c["split"] == split
        assert "expect" not in c or c["expect"] == r.expect
        if fix_why:
            assert c["fix"]["kind"] != "none" or c["cause"] == "NONE" or c["fix"]["why"]
    positions = [int(c["note"].split("queue position ")[1].split(",")[0]) for c in cases]
    assert positions == list(range(1, size + 1))
    assert 3 * sum(c["cause"] == "NONE" for c in cases) <= len(cases)
    # (the spread of causes as the batch was labelled: a row the labelling guide relabelled since keeps its label)
    assert len({c["template"] for c in cases}) >= templates \
        and len({c.get("cause_before_guide", c["cause"]) for c in cases}) >= causes


def test_the_eighth_batch_is_recorded_real_outputs_picked_by_its_rule():
    """kept6: failing rows of every real-output set there was then (its queue's first 40)."""
    _check_queue_batch("kept6.jsonl", sorted(p.name for p in (ROOT / "tests" / "data").glob("real_outputs*")),
                       prefix="kept6-", split="dev", size=40, templates=30, causes=10, request=False)


def test_the_ninth_batch_is_the_whole_failing_queue_of_real_outputs_kept7():
    """kept7: the whole failing queue of tests/data/real_outputs_kept7/ (35 rows)."""
    _check_queue_batch("kept7.jsonl", ["real_outputs_kept7"], prefix="", split="dev", size=35, templates=12,
                       causes=10)


def test_the_tenth_batch_is_the_head_of_the_failing_queue_of_real_outputs_kept6():
    """kept8: the first 40 of the 46 failing rows of tests/data/real_outputs_kept6/."""
    _check_queue_batch("kept8.jsonl", ["real_outputs_kept6"], prefix="", split="dev", size=40, templates=13,
                       causes=8, fix_why=True)


def test_the_eleventh_batch_is_the_whole_failing_queue_of_real_outputs_kept8():
    """kept9: the whole failing queue of tests/data/real_outputs_kept8/ (34 rows: SGLang's per-detector and vLLM's
    Gemma 4 / Kimi K3 / Step-3.5 parser tests)."""
    _check_queue_batch("kept9.jsonl", ["real_outputs_kept8"], prefix="", split="dev", size=34, templates=9,
                       causes=9, fix_why=True)


def test_the_twelfth_batch_is_the_whole_failing_queue_of_real_outputs_kept9():
    """kept10: the whole failing queue of tests/data/real_outputs_kept9/ (33 rows)."""
    _check_queue_batch("kept10.jsonl", ["real_outputs_kept9"], prefix="", split="dev", size=33, templates=12,
                       causes=6, fix_why=True)


def test_the_thirteenth_batch_is_the_head_of_the_failing_queue_of_real_outputs_kept10():
    """kept11: the first 40 of the 42 failing rows of tests/data/real_outputs_kept10/."""
    _check_queue_batch("kept11.jsonl", ["real_outputs_kept10"], prefix="", split="dev", size=40, templates=13,
                       causes=9, fix_why=True)


def test_the_fifteenth_batch_is_the_whole_failing_queue_of_real_outputs_kept11():
    """kept13: the whole failing queue of tests/data/real_outputs_kept11/ (36 rows)."""
    _check_queue_batch("kept13.jsonl", ["real_outputs_kept11"], prefix="", split="dev", size=36, templates=12,
                       causes=9, fix_why=True)


def test_the_seventeenth_batch_is_the_head_of_the_failing_queue_of_real_outputs_kept13():
    """kept15: the first 30 of the 36 failing rows of tests/data/real_outputs_kept13/."""
    _check_queue_batch("kept15.jsonl", ["real_outputs_kept13"], prefix="", split="dev", size=30, templates=9,
                       causes=5, fix_why=True)


def test_the_eighteenth_batch_is_the_head_of_the_failing_queue_of_real_outputs_kept14():
    """kept16: the first 30 of the 38 failing rows of tests/data/real_outputs_kept14/ (SGLang's, ollama's and
    Xinference's parser tests)."""
    _check_queue_batch("kept16.jsonl", ["real_outputs_kept14"], prefix="", split="dev", size=30, templates=10,
                       causes=7, fix_why=True)


def test_the_twentieth_batch_is_the_whole_failing_queue_of_real_outputs_kept15():
    """kept18: the whole failing queue of tests/data/real_outputs_kept15/ (21 rows: Xinference's, SGLang's and
    lmdeploy's parser tests, each family on its model's own template)."""
    _check_queue_batch("kept18.jsonl", ["real_outputs_kept15"], prefix="", split="dev", size=21, templates=7,
                       causes=6, fix_why=True)


def test_the_twenty_first_batch_is_the_whole_failing_queue_of_real_outputs_kept16():
    """kept19: the whole failing queue of tests/data/real_outputs_kept16/ (11 rows: dynamo's, mistral.rs's and
    LocalAI's parser tests, each family on its model's own template)."""
    _check_queue_batch("kept19.jsonl", ["real_outputs_kept16"], prefix="", split="dev", size=11, templates=10,
                       causes=6, fix_why=True)


def test_the_twenty_second_batch_is_the_failing_queue_of_real_outputs_kept17():
    """kept20: the failing queue of tests/data/real_outputs_kept17/ (11 rows, the fourth NONE row skipped: model
    makers' and libraries' own documents and one report, each family on its model's own template)."""
    _check_queue_batch("kept20.jsonl", ["real_outputs_kept17"], prefix="", split="dev", size=10, templates=4,
                       causes=4, fix_why=True)


def test_the_twenty_third_batch_is_the_failing_queue_of_real_outputs_kept18():
    """kept21: the whole failing queue of tests/data/real_outputs_kept18/ (12 rows: LLaMA-Factory's,
    aphrodite-engine's parser tests, each family on its model's own template)."""
    _check_queue_batch("kept21.jsonl", ["real_outputs_kept18"], prefix="", split="dev", size=12, templates=7,
                       causes=4, fix_why=True)


def test_the_twenty_fourth_batch_is_the_failing_queue_of_real_outputs_kept19():
    """kept22: the failing queue of tests/data/real_outputs_kept19/ (35 rows, the first 30: vllm-mlx's,
    mlx-omni-server's and Rapid-MLX's parser tests, each family on its model's own template; no NONE row)."""
    _check_queue_batch("kept22.jsonl", ["real_outputs_kept19"], prefix="", split="dev", size=30, templates=8,
                       causes=8, fix_why=True)


def test_the_twenty_fifth_batch_is_the_whole_failing_queue_of_real_outputs_kept20():
    """kept23: the whole failing queue of tests/data/real_outputs_kept20/ (21 rows: openai/harmony's tests, SGLang's
    unit detector tests, lmdeploy's and vLLM's parser tests, each family on its model's own template; no NONE row)."""
    _check_queue_batch("kept23.jsonl", ["real_outputs_kept20"], prefix="", split="dev", size=21, templates=7,
                       causes=6, fix_why=True)


def test_the_twenty_sixth_batch_is_the_failing_queue_of_real_outputs_kept21():
    """kept24: the whole failing queue of tests/data/real_outputs_kept21/ (19 rows: exo's and TabbyAPI's parser
    tests, each family on its model's own template; no NONE row)."""
    _check_queue_batch("kept24.jsonl", ["real_outputs_kept21"], prefix="", split="dev", size=19, templates=7,
                       causes=5, fix_why=True)


def test_the_twenty_seventh_batch_is_the_failing_queue_of_real_outputs_kept22():
    """kept25: the failing queue of tests/data/real_outputs_kept22/ (34 rows, the first 30: the SMG gateway's, SGLang's
    Rust router's and xllm's parser tests, each family on its model's own template; no NONE row)."""
    _check_queue_batch("kept25.jsonl", ["real_outputs_kept22"], prefix="", split="dev", size=30, templates=8,
                       causes=5, fix_why=True)


def test_the_twenty_eighth_batch_is_the_whole_failing_queue_of_real_outputs_kept23():
    """kept26: the whole failing queue of tests/data/real_outputs_kept23/ (28 rows: OpenVINO Model Server's C++
    output-parser tests and FastDeploy's tool and reasoning parser tests, each family on its model's own template; no
    NONE row)."""
    _check_queue_batch("kept26.jsonl", ["real_outputs_kept23"], prefix="", split="dev", size=28, templates=8,
                       causes=8, fix_why=True)


def test_the_thirtieth_batch_is_the_whole_failing_queue_of_real_outputs_kept24():
    """kept28: the whole failing queue of tests/data/real_outputs_kept24/ (29 rows: the SMG gateway's and SGLang's
    Rust router's test files no earlier set used, each family on its model's own template; no NONE row)."""
    _check_queue_batch("kept28.jsonl", ["real_outputs_kept24"], prefix="", split="dev", size=29, templates=8,
                       causes=8, fix_why=True)


def test_the_thirty_first_batch_is_the_whole_failing_queue_of_real_outputs_kept25():
    """kept29: the whole failing queue of tests/data/real_outputs_kept25/ (7 rows: vllm-ascend's platform-patch parser
    tests, each family on its model's own template; no NONE row)."""
    _check_queue_batch("kept29.jsonl", ["real_outputs_kept25"], prefix="", split="dev", size=7, templates=4,
                       causes=4, fix_why=True)


def test_the_thirty_second_batch_is_the_whole_failing_queue_of_real_outputs_kept26():
    """kept30: the whole failing queue of tests/data/real_outputs_kept26/ (3 rows: ms-swift's agent-template and
    template tests, each family on its model's own template; one NONE row, a nullable string's null)."""
    _check_queue_batch("kept30.jsonl", ["real_outputs_kept26"], prefix="", split="dev", size=3, templates=3,
                       causes=2, fix_why=True)
def test_the_thirty_third_batch_is_the_whole_failing_queue_of_real_outputs_kept27():
    """kept31: the whole failing queue of tests/data/real_outputs_kept27/ (11 rows: AReaL's, rllm's and ROLL's rollout
    parser tests, each family on its model's own template; no NONE row)."""
    _check_queue_batch("kept31.jsonl", ["real_outputs_kept27"], prefix="", split="dev", size=11, templates=5,
                       causes=4, fix_why=True)


def test_the_thirty_fourth_batch_is_the_whole_failing_queue_of_real_outputs_kept28():
    """kept32: the whole failing queue of tests/data/real_outputs_kept28/ (4 rows: harmony's C++ port tests for
    gpt-oss and MiniMax-M1's guide, each family on its model's own template; no NONE row)."""
    _check_queue_batch("kept32.jsonl", ["real_outputs_kept28"], prefix="", split="dev", size=4, templates=2,
                       causes=2, fix_why=True)


def test_the_thirty_fifth_batch_is_the_whole_failing_queue_of_real_outputs_kept29():
    """kept33: the whole failing queue of tests/data/real_outputs_kept29/ (14 rows: openvino.genai's, LiteRT-LM's and
    MNN Chat's parser tests, each family on its model's own template; no NONE row)."""
    _check_queue_batch("kept33.jsonl", ["real_outputs_kept29"], prefix="", split="kept33", size=14, templates=6,
                       causes=5, fix_why=True)
def test_the_thirty_sixth_batch_is_the_whole_failing_queue_of_real_outputs_kept30():
    """kept34: the whole failing queue of tests/data/real_outputs_kept30/ (5 rows: autogen's R1 parsers and
    smolagents' DeepSeek think-tag removal, on DeepSeek R1's own template; no NONE row)."""
    _check_queue_batch("kept34.jsonl", ["real_outputs_kept30"], prefix="", split="kept34", size=5, templates=1,
                       causes=3, fix_why=True)


@pytest.mark.parametrize("case", [c for n in ("kept2.jsonl", "kept3.jsonl", "kept4.jsonl") for c in SETS[n]
                                  if c["cause"] == "NONE" and "expect" in c
                                  and (n != "kept4.jsonl" or c["expect"].get("tool_calls"))],
                         ids=lambda c: c["id"])
def test_a_none_case_with_a_call_parses_clean_to_it(case):
    msg, clean = apply_fix(_template(case["template"]), ChatRequest.from_dict(case), case["input"], {})
    assert clean and _same(msg, case["expect"]), msg


def test_the_first_set_is_varied():
    assert len({c["cause"] for c in CASES}) >= 15
    assert len(Mistake) - 1 >= 15
    assert sum(holdout(c) for c in CASES) == 18


@pytest.mark.parametrize("case", [c for cases in SETS.values() for c in cases if c["fix"]["kind"] != "none"],
                         ids=lambda c: c["id"])
def test_the_hand_fix_works(case):
    """Every fix written by hand re-parses the output clean into another message than the broken one."""
    t = _template(case["template"])
    req = ChatRequest.from_dict(case)
    broken = explain(t, req, case["input"], fixes=False).message
    msg, clean = apply_fix(t, req, case["input"], case["fix"]["change"])
    # a fix marked "clean": false reads the message right but the output stays unfinished (reasoning never closed)
    assert clean != (case["fix"].get("clean") is False) and msg != broken, msg
    if "expect" in case:        # the message the report (tests/data/drift) says the output means
        assert _same(_ids_as_expected(msg, case["expect"]), case["expect"]), msg


def _ids_as_expected(msg: dict, expect: dict) -> dict:
    """``msg`` with the id of each call dropped where the expected message's call has none: an engine makes up its
    own ids (Kimi K2's own `functions.NAME:IDX` the model writes is left out of the engines' messages), as the
    real-output sets and ``explain --expect`` compare them."""
    want = expect.get("tool_calls") or []
    calls = [dict(c) for c in msg.get("tool_calls") or []]
    for c, w in zip(calls, want):
        if not w.get("id"):
            c.pop("id", None)
    return {**msg, "tool_calls": calls} if calls else msg


def _same(a: dict, b: dict) -> bool:
    from core.chat.message import AssistantMessage
    from core.explain.spans import same_message

    return same_message(AssistantMessage.from_openai(a), AssistantMessage.from_openai(b))


_SCORED: dict[tuple[str, str], tuple] = {}


def _scored_run(c: dict):
    """:func:`_run` of a set's row, once per row for the scores and the two labellers' figures (one worker runs
    this file: pytest-xdist's ``--dist loadfile``)."""
    key = (c["id"], c["input"])
    if key not in _SCORED:
        _SCORED[key] = _run(c)
    return _SCORED[key]


def _fix_verified(c: dict, tg) -> bool:
    """The row's labelled fix is what the triage offers: an offered fix whose message is the labelled change's (also
    for a row labelled NONE: the labelling guide's step 1 names a parser fault a change of ours can still mend), else
    nothing for a clean parse, "none helps" with its reason."""
    if c["fix"]["kind"] != "none":
        want, _clean = apply_fix(_template(c["template"]), ChatRequest.from_dict(c), c["input"], c["fix"]["change"])
        return any(_same(f.message, want) for f in tg.fixes)
    if c["cause"] == "NONE":       # a report whose server failed where ours reads the output: nothing to fix
        return not tg.fixes
    return not tg.fixes and bool(tg.no_fix)


def _score(cases):
    cause = fix = near = near_total = 0
    for c in cases:
        ex, tg = _scored_run(c)
        cause += tg.mistake.name == c["cause"]
        fix += _fix_verified(c, tg)
        if c["nearest_within_3"]:
            near_total += 1
            near += tg.nearest is not None and len(tg.nearest.edits) <= MAX_EDITS
    return cause, fix, near, near_total


@pytest.mark.parametrize("name,part", [(n, s) for n, by_split in SCORES.items() for s in by_split])
def test_scores(name, part):
    assert _score([c for c in SETS[name] if split(c) == part]) == SCORES[name][part]


# Two labellers (docs/explain.md "Two labellers"): batches labelled again, blind, by a second labeller — kept15 …
# kept18 from the taxonomy alone, kept19 on by the labelling guide's decision order (scripts/triage_agreement.py
# GROUPS, the files in tests/data/triage/second_labels/); the script prints the same figures, each (count, rows)
_SPEC = importlib.util.spec_from_file_location("triage_agreement", ROOT / "scripts" / "triage_agreement.py")
_AGREEMENT_SCRIPT = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_AGREEMENT_SCRIPT)
SECOND = {g: _AGREEMENT_SCRIPT.second_labels(g) for g in _AGREEMENT_SCRIPT.GROUPS}
AGREEMENT = {
    # the labellers' two figures compare the labels as they were labelled; the triage's move with the triage: before
    # the labelling guide's rules 49, 51, 58, 42 and 39
    "kept15-kept18": {"labellers": (59, 87), "within_second": (83, 87), "triage_first": (53, 87),
                      "triage_second": (61, 87), "triage_either": (68, 87), "consensus_cause": (46, 59),
                      # 38 -> 39: kept16's GLM-5 row, whose offered repair now gives the labelled message
                      # the seventeenth round (the expected message decides the text before a call is content and
                      # a reasoning block kept as content; Qwen3's missing line break before its swapped keys):
                      # triage_first 47 -> 52, triage_second 56 -> 60, triage_either 62 -> 67, consensus_cause
                      # 41 -> 45, consensus_both 39 -> 43
                      # the twentieth round (Kimi K2's closer never opened before its call id, step 2 first; the
                      # prompt patch in Kimi K2 Thinking's raw text): 52 -> 53, 60 -> 61, 67 -> 68, 45 -> 46,
                      # 43 -> 45 (without the expected message 47 -> 48, 57 -> 58, 63 -> 64, 41 -> 42, 39 -> 41)
                      "consensus_both": (45, 59)},
    # both labellers following the guide: kept19 (11 rows), kept20 (10: its three NONE / TRAILING_TEXT rows split on
    # the guide's clarification about the turn's end token, added between its two labellers), kept21 (12), kept22
    # (30); dev since the sixteenth round of rules, whose triage moves its figures: before it 39, 42, 43, 38 and 37;
    # the nearest output's new edit kinds read GLM-4.5's unclosed value otherwise (the second labeller's
    # OMITTED_CLOSER no longer named): triage_second 58 -> 57, triage_either 59 -> 58
    # the seventeenth round: Seed-OSS's markerless text, reasoning in the expected message, the reasoning setting,
    # and GLM-4.5's malformed XML its line break first (the first labeller's reading): 54 -> 56, 57 -> 58, 58 -> 60,
    # 53 -> 54, 51 -> 52
    "kept19-kept22": {"labellers": (57, 63), "within_second": (59, 63), "triage_first": (56, 63),
                      "triage_second": (58, 63), "triage_either": (60, 63), "consensus_cause": (54, 57),
                      "consensus_both": (52, 57)},
    # kept aside, both labellers following the guide, measuring the round of rules written from kept19 … kept22:
    # kept23 (21 rows), kept24 (19); first measure, on the rules before that round and the same after it: 31, 30,
    # 32, 29 and 29; then one rule fixed from a kept23 row a newcomer's check read (a template's own marker is no
    # misspelling of another): +1 each triage figure
    # dev since the seventeenth round of rules, written from its misses: 32 -> 40, 31 -> 35, 33 -> 40, 30 -> 35,
    # 30 -> 35
    "kept23-kept24": {"labellers": (35, 40), "within_second": (40, 40), "triage_first": (40, 40),
                      "triage_second": (35, 40), "triage_either": (40, 40), "consensus_cause": (35, 35),
                      "consensus_both": (35, 35)},
    # kept aside, both labellers following the guide, measuring every round up to the sixteenth: kept25 (30 rows),
    # kept26 (28), kept27 (1, public reports); first measure
    # then the nearest-output round and the seventeenth round of rules, both written without it (the score passing
    # the expected message): 41, 40, 42, 39, 36 -> 42, 41, 43, 40, 37 (without the expected message unchanged)
    # dev since the eighteenth round of rules, written from its misses: 42 -> 50, 41 -> 49, 43 -> 52, 40 -> 47,
    # 37 -> 44 (without the expected message 41 -> 49, 40 -> 48, 42 -> 51, 39 -> 46, 36 -> 43)
    # the nineteenth round (structural: the nearest output's first edit, step 4 before step 5): 50 -> 54, 49 -> 51,
    # 52 -> 56, 47 -> 49, 44 -> 46 (without the expected message 49 -> 53, 48 -> 50, 51 -> 55, 46 -> 48, 43 -> 45)
    "kept25-kept27": {"labellers": (51, 59), "within_second": (57, 59), "triage_first": (54, 59),
                      "triage_second": (51, 59), "triage_either": (56, 59), "consensus_cause": (49, 51),
                      # the repairs written from kept20–kept25: Kimi K2's rows are fixed by section-opener-whitespace
                      # (relabelled: the engine's message but for the model's own call ids): 46 -> 48
                      "consensus_both": (48, 51)},
    # kept aside, both labellers following the guide: kept28 (29 rows), kept29 (7); first measure, on the same rules
    # then the nearest-output round and the seventeenth round of rules, both written without it: one agreed row
    # lost (a Qwen2.5 text after the calls named by a whitespace slip before it), with or without the expected
    # message: triage_second 27 -> 26, consensus 26 -> 25; the eighteenth round, written from kept25 … kept27 without
    # it, moved none
    # dev since the nineteenth round, written reading its misses (structural: the nearest output's first edit, JSON
    # layout, text before a reasoning block): 27 -> 32, 26 -> 33, 28 -> 35, 25 -> 30, 25 -> 30, with or without the
    # expected message
    # the twentieth round (whitespace before the marker the parser expected, Kimi K2): 32 -> 33, 33 -> 34, 35 -> 36,
    # 30 -> 31, 30 -> 31, with or without the expected message
    "kept28-kept29": {"labellers": (31, 36), "within_second": (31, 36), "triage_first": (33, 36),
                      "triage_second": (34, 36), "triage_either": (36, 36), "consensus_cause": (31, 31),
                      # the same for kept28's Kimi K2 rows after the repairs written from kept20–kept25: 30 -> 30
                      "consensus_both": (31, 31)},
    # kept aside, both labellers following the guide: kept30 (3 rows), kept31 (11), kept32 (4); first measure, on the
    # rules of the eighteenth round (the second labeller saw the first label of kept32's MiniMax-M1 row by mistake and
    # said so; the two still differ there, so it counts in no agreed row)
    # dev since the twentieth round of rules, written reading every batch's misses: 17, 18, 18, 17, 17 unchanged, with
    # or without the expected message
    "kept30-kept32": {"labellers": (17, 18), "within_second": (18, 18), "triage_first": (17, 18),
                      "triage_second": (18, 18), "triage_either": (18, 18), "consensus_cause": (17, 17),
                      "consensus_both": (17, 17)},
    # kept aside, both labellers following the guide: kept33 (14 rows), kept34 (5); first measure, on the rules of the
    # nineteenth round. The labellers part on 10 rows, 6 of them Phi-4-mini-reasoning's <think> block under a template
    # with no reasoning markers (TEMPLATE_MODEL_MISMATCH first, FORMAT_NOT_FOUND second, each the other's second
    # choice); the two fix misses on agreed rows are DeepSeek R1's template patch, one line break from the hand patch
    "kept33-kept34": {"labellers": (9, 19), "within_second": (17, 19), "triage_first": (8, 19),
                      "triage_second": (13, 19), "triage_either": (13, 19), "consensus_cause": (8, 9),
                      "consensus_both": (6, 9)},
}


@pytest.mark.parametrize("group", sorted(AGREEMENT))
def test_the_second_labels_cover_their_batches_in_the_taxonomy(group):
    ids = [c["id"] for n in _AGREEMENT_SCRIPT.GROUPS[group] for c in SETS[n]]
    assert sorted(SECOND[group]) == sorted(ids)
    names = {m.name for m in Mistake}
    assert all(r["cause"] in names and r.get("second_choice") in names | {None} and r["why"]
               for r in SECOND[group].values())


@pytest.mark.parametrize("group", sorted(AGREEMENT))
def test_two_labellers_and_the_triage_agree_as_pinned(group):
    rows = [c for n in _AGREEMENT_SCRIPT.GROUPS[group] for c in SETS[n]]
    # the first labels as the second labeller was compared with them (before the labelling guide relabelled some)
    first, said, fixed = {c["id"]: _AGREEMENT_SCRIPT.first_label(c) for c in rows}, {}, {}
    for c in rows:
        _ex, tg = _scored_run(c)
        said[c["id"]], fixed[c["id"]] = tg.mistake.name, _fix_verified(c, tg)
    assert _AGREEMENT_SCRIPT.agreement(first, SECOND[group], said, fixed) == AGREEMENT[group]


def test_a_template_llama_cpp_cannot_render_is_explained_not_raised():
    # vLLM's Gemma 3 pythonic template uses selectattr("tool_calls", "undefined"), which llama.cpp's engine lacks
    c = next(c for c in SETS["kept.jsonl"] if c["id"] == "kept-vllm-14734-gemma3-tool-code-fence")
    ex, tg = _run(c)
    assert ex.entry == "no-parser" and ex.message["content"] == c["input"] and not ex.message.get("tool_calls")
    assert tg.evidence[0].startswith("the template does not render in llama.cpp's Jinja dialect (")
    assert "transformers dialect" in tg.evidence[0] and "--improved" in tg.evidence[0]
    assert tg.mistake == Mistake.FOREIGN_WRAPPER and not tg.fixes and tg.no_fix
    # at improved fidelity the template renders (improvement transformers-dialect) and the call is read
    t = _template(c["template"])
    msg = explain(t, ChatRequest.from_dict(c), c["input"], fidelity="improved", fixes=False).message
    assert [tc["function"]["name"] for tc in msg["tool_calls"]] == ["filter_dataframe_by_search_term"]


def test_a_control_token_dropped_inside_a_call_is_special_tokens_stripped():
    # Devstral-Small-2 on vLLM: `[TOOL_CALLS]create_file{…}` — `[ARGS]` is gone, `[TOOL_CALLS]` is kept
    c = next(c for c in SETS["kept.jsonl"] if c["id"] == "kept-vllm-30651-devstral2-args-token-missing")
    ex, tg = _run(c)
    assert tg.mistake == Mistake.SPECIAL_TOKENS_STRIPPED
    assert [(e.kind, e.new) for e in tg.nearest.edits] == [("insert", "[ARGS]")]
    assert any("`[ARGS]`" in e and "`[TOOL_CALLS]`" in e and "skip_special_tokens" in e for e in tg.evidence)
    server = [f for f in tg.fixes if f.kind.value == "server"]
    assert server and server[0].change["server"] == "keep-special-tokens"
    assert server[0].change["output"].startswith("[TOOL_CALLS]create_file[ARGS]{")
    assert [tc["function"]["name"] for tc in server[0].message["tool_calls"]] == ["create_file"]


def test_a_json_call_to_an_undeclared_near_name_is_not_clean():
    # DeepSeek-R1-Distill on ollama: {"name": "date_ difference", "parameters": {…}} as the content, a clean parse
    c = next(c for c in SETS["kept.jsonl"] if c["id"] == "kept-ollama-8517-r1-distill-nested-calls")
    ex, tg = _run(c)
    assert tg.mistake == Mistake.TEMPLATE_MODEL_MISMATCH and not tg.fixes
    assert any("`date_␣difference`, which is no tool of the request (a near name of the declared `date_difference`)"
               in e for e in tg.evidence), tg.evidence
    assert "misspelt `date_difference`" in tg.no_fix and "grammar" in tg.no_fix


def _kept2(case_id: str):
    return _run(next(c for c in SETS["kept2.jsonl"] if c["id"] == case_id))


def test_a_single_repair_fix_keeps_every_call():
    # mistral-large: two calls as a bare JSON list; `unmarked-calls` alone settles "clean" through the stream's
    # view with the second call gone (the v3 format also wants a call id), so it is not offered alone
    ex, tg = _kept2("kept2-mistral-common-73-large-bare-list")
    assert tg.mistake == Mistake.OMITTED_OPENER
    assert tg.fixes and all(f.change != {"repairs": ["unmarked-calls"]} for f in tg.fixes)
    assert tg.fixes[0].change == {"repairs": ["unmarked-calls", "call-id-optional"]}
    assert [json.loads(tc["function"]["arguments"])["parameter"] for tc in tg.fixes[0].message["tool_calls"]] == \
        ["WIND", "T"]
    # an earlier assistant turn with calls: the server kept `[TOOL_CALLS]` then, so no stripping decoder is blamed
    assert not any(f.kind.value == "server" for f in tg.fixes)


def test_a_call_written_without_tools_in_the_request_gets_the_tool_sent():
    # phi4-mini prompted with <tool_call>{JSON}</tool_call> in the system prompt, the request carrying no tools
    c = next(c for c in SETS["kept2.jsonl"] if c["id"] == "kept2-toolbench-phi4mini-prompted-tool-call-no-tools")
    ex, tg = _run(c)
    assert tg.mistake == Mistake.TOOLS_NOT_SENT
    assert any("JSON call of `get_weather` and the request has no tools" in e for e in tg.evidence), tg.evidence
    f = tg.fixes[0]
    assert f.kind.value == "request" and f.change["request"]["tools"][-1]["function"]["name"] == "get_weather"
    msg, clean = apply_fix(_template(c["template"]), ChatRequest.from_dict(c), c["input"], f.change)
    assert clean and _same(msg, c["expect"]), msg


def test_an_unfound_format_is_said_of_the_analysis_and_judged_by_the_output():
    # granite3-dense: the analysis finds no call format; the output (a ```bash block) holds no call-like text
    ex, tg = _kept2("kept2-ollama-7544-granite3-bash-fence")
    assert tg.mistake == Mistake.NONE and not tg.fixes
    assert any("a gap of the analysis, not a statement about the template" in e for e in tg.evidence)
    assert any("holds no call-like text" in e for e in tg.evidence)
    # DeepSeek-V2.5: a fenced {name, parameters} object with none of the call tokens the template's source writes
    ex, tg = _kept2("kept2-deepseek-v2-84-fenced-name-parameters")
    assert tg.mistake == Mistake.TEMPLATE_MODEL_MISMATCH and not tg.fixes
    assert any("`<｜tool▁calls▁begin｜>`" in e and "improved fidelity" in e for e in tg.evidence), tg.evidence
    assert "does not declare" not in tg.no_fix        # executeSql is declared: no misspelt-name story


def test_a_plain_quoted_value_for_a_delimiter_token_is_one_edit():
    ex, tg = _kept2("kept2-omlx-581-gemma4-bash-plain-quotes")
    # the row was labelled "none helps" before the unmarked-argument-values repair existed; it is the fix now
    assert tg.mistake == Mistake.OMITTED_MARKER
    assert [(f.kind.value, f.change) for f in tg.fixes[:1]] == [("repair", {"repairs": ["unmarked-argument-values"]})]
    assert [(e.kind, e.old, e.new) for e in tg.nearest.edits] == [("replace", '"ls"', '<|"|>ls<|"|>')]
    assert json.loads(tg.nearest.message["tool_calls"][0]["function"]["arguments"]) == {"command": "ls"}


def test_an_unwrapped_call_is_an_omitted_opener_and_every_token_stripped_is_the_decoder():
    ex, tg = _kept2("kept2-continue-13057-qwen3coder-unwrapped-unclosed")
    assert tg.mistake == Mistake.OMITTED_OPENER
    assert any("neither `<tool_call>` nor `</tool_call>`" in e for e in tg.evidence), tg.evidence
    ex, tg = _kept2("kept2-strands-1949-gptoss-specials-stripped")
    assert tg.mistake == Mistake.SPECIAL_TOKENS_STRIPPED and not tg.fixes and "skip_special_tokens" in tg.no_fix


def _set_case(name: str, case_id: str):
    """explain and triage of the case ``case_id`` of the set ``name``."""
    return _run(next(c for c in SETS[name] if c["id"] == case_id))


def _kept3(case_id: str):
    return _set_case("kept3.jsonl", case_id)


def test_a_closer_written_as_another_marker_is_an_omitted_closer_and_the_slip_is_not_taught():
    ex, tg = _kept3("kept3-fireworks-sdk-119-glm52-arg-value-closer")
    assert tg.mistake == Mistake.OMITTED_CLOSER
    assert [(e.kind, e.old, e.new) for e in tg.nearest.edits] == [("replace", "</arg_value>", "</tool_call>")]
    assert any("closed with `</arg_value>`" in e for e in tg.evidence), tg.evidence
    # the override per_call_end = </arg_value> and the template patch writing </arg_value> both re-parse, but
    # only by making two parts of the format share a marker
    assert not tg.fixes and "ambiguous" in tg.no_fix


def test_stripped_tokens_are_seen_without_a_surviving_marker_pair():
    # MiniCPM5: every tag token gone, only ` name="get_weather"> name="city">Paris` left — the restored call
    # re-parses, and is the hand fix's output
    c = next(c for c in SETS["kept3.jsonl"] if c["id"] == "kept3-ollama-18483-minicpm5-markup-stripped")
    ex, tg = _run(c)
    assert tg.mistake == Mistake.SPECIAL_TOKENS_STRIPPED
    server = tg.fixes[0]
    assert server.kind.value == "server" and server.change["server"] == "keep-special-tokens"
    assert server.change["output"] == c["fix"]["change"]["output"]
    assert _same(server.message, c["expect"])
    # the same template's call written whole (oMLX#3429) is no stripping
    assert _kept3("kept3-omlx-3429-minicpm5-bare-function-xml")[1].mistake == Mistake.NONE


def test_an_invented_opener_tag_is_an_omitted_opener():
    ex, tg = _kept3("kept3-q27-24-qwen-name-tag-task-call")
    assert tg.mistake == Mistake.OMITTED_OPENER and not tg.fixes and tg.no_fix
    assert any("`<name>task`" in e and "`<tool_call>`" in e and "`</parameter>`" in e for e in tg.evidence)


def test_a_call_repeated_past_a_missing_stop_is_trailing_text_with_a_stop_fix():
    from core.explain.triage import _repeated_call

    c = next(c for c in SETS["kept3.jsonl"] if c["id"] == "kept3-docker-model-runner-1045-functiongemma-no-stop")
    ex, tg = _run(c)
    assert tg.mistake == Mistake.TRAILING_TEXT
    assert any("repeats `get_time{}<end_function_call>call:` 2 more time(s) up to its end" in e for e in tg.evidence)
    f = tg.fixes[0]
    assert f.kind.value == "server" and f.change["server"] == "stop-after-call"
    assert f.change["output"] == "<start_function_call>call:get_time{}<end_function_call>"
    assert all("get_time" not in (x.message.get("content") or "") for x in tg.fixes)   # no fix keeps the copies
    msg, clean = apply_fix(_template(c["template"]), ChatRequest.from_dict(c), c["input"], f.change)
    assert clean and _same(msg, c["expect"])
    # the first two copies alone, nothing after: two calls, not a loop
    assert _repeated_call(c["input"][:c["input"].index("call:get_ti\u2026")], ["get_time"]) is None


def test_a_call_on_the_reasoning_channel_is_outside_the_section():
    ex, tg = _kept3("kept3-dynamo-10366-gptoss-call-on-analysis-channel")
    assert tg.mistake == Mistake.CALL_OUTSIDE_SECTION
    assert any("`to=functions.grep␣code`" in e and "`<|channel|>analysis`" in e for e in tg.evidence), tg.evidence
    assert tg.fixes[0].change == {"repairs": ["trailing-stop-token"]}


def test_two_slips_get_two_repairs_together():
    # Granite 4: no newlines inside <tool_call> and the arguments as a string with escaped newlines; the first
    # repair alone settles "clean" with `{}` arguments and the rest left as content, so it is not offered alone
    ex, tg = _kept3("kept3-vllm-54964-granite4-double-encoded-arguments")
    assert tg.mistake == Mistake.DOUBLE_ENCODED_ARGUMENTS
    assert tg.fixes[0].change == {"repairs": ["tag-whitespace", "double-encoded-arguments"]}
    assert all(f.change != {"repairs": ["tag-whitespace"]} for f in tg.fixes)
    # nor an override whose call is read while the call's markup stays in the content (text left unparsed)
    assert all("<tool_call>" not in (f.message.get("content") or "") for f in tg.fixes)
    assert json.loads(tg.fixes[0].message["tool_calls"][0]["function"]["arguments"]) == {"param": "max_connections"}


def test_the_nearest_output_names_a_left_out_member_not_a_trailing_comma():
    # Mistral v3 grammar accepts `{…},}`: a lone `,` was the "nearest" edit; the model left out the call id
    ex, tg = _kept2("kept2-mistral-common-73-large-bare-list")
    assert [(e.kind, e.new) for e in tg.nearest.edits] == [("insert", "[TOOL_CALLS]"), ("insert", ', "id": ""'),
                                                          ("insert", ', "id": ""')]
    assert "omitted the member `\"id\"` (any value)" in tg.nearest.sentence
    assert not any(e.new.strip() == "," for e in tg.nearest.edits)


def test_nearest_output_names_the_omitted_marker():
    c = next(c for c in CASES if c["id"] == "vllm-49248")
    ex, tg = _run(c)
    assert tg.mistake == Mistake.OMITTED_MARKER
    assert [(e.kind, e.new) for e in tg.nearest.edits] == [("insert", "<arg_value>")]
    assert tg.nearest.sentence == "the model omitted `<arg_value>` before `how␣many␣vacation␣days␣l`"
    assert json.loads(tg.nearest.message["tool_calls"][0]["function"]["arguments"]) == \
        {"query": "how many vacation days left"}
    assert tg.no_fix and not tg.fixes


def test_missing_required_gets_a_schema_edit_that_reparses():
    c = next(c for c in CASES if c["id"] == "llamacpp-24807")
    ex, tg = _run(c)
    assert tg.mistake == Mistake.MISSING_REQUIRED
    assert any("`content`" in e for e in tg.evidence)
    # the Qwen3-Coder handler passes such a call on at improved (missing-required-argument, batch 1): that single
    # repair ranks first, the schema edit that makes the call valid comes next
    assert tg.fixes[0].change == {"repairs": ["missing-required-argument"]}
    f = tg.fixes[1]
    assert f.kind.value == "request" and f.change["request"]["required"] == {"write": ["path"]}
    assert f.change["request"]["tools"][0]["function"]["parameters"]["required"] == ["path"]
    assert f.message["tool_calls"][0]["function"]["name"] == "write"


def test_a_single_repair_is_offered_before_fidelity():
    c = next(c for c in CASES if c["id"] == "hermes-agent-5867")
    ex, tg = _run(c)
    assert tg.fixes[0].change == {"repairs": ["unmarked-calls"]}
    assert tg.nearest.repair == "unmarked-calls"
    assert "<tool_call>" in tg.nearest.sentence


def test_a_single_repair_switched_on_alone_gives_the_offered_message():
    """`explain(only_repairs=…)` (CLI `--repair NAME`, the Explain page's one click) parses at improved fidelity
    with only that repair: it gives the message the ranked fix promised; another repair alone does not read the
    call; an unknown name is one line naming the known ones."""
    from core.chat.repairs import UnknownRepairError

    c = next(c for c in CASES if c["id"] == "hermes-agent-5867")
    ex, tg = _run(c)
    fix = tg.fixes[0]
    assert fix.cli == "--repair unmarked-calls" and fix.to_json()["cli"] == "--repair unmarked-calls"
    t, req = _template(c["template"]), ChatRequest.from_dict(c)
    on = explain(t, req, c["input"], only_repairs=("unmarked-calls",))
    assert on.fidelity == "improved" and on.only_repairs == ["unmarked-calls"]
    assert _same(on.message, fix.message) and on.message["tool_calls"][0]["function"]["name"] == "search"
    other = explain(t, req, c["input"], only_repairs=("fenced-calls",), fixes=False)
    assert not other.message.get("tool_calls")
    with pytest.raises(UnknownRepairError, match="unknown repair 'no-such-repair'; known: "):
        explain(t, req, c["input"], only_repairs=("no-such-repair",))


def test_hostile_output_stays_bounded():
    """A 256 KB output: the search gives up within its parse budget rather than running away."""
    c = next(c for c in CASES if c["id"] == "vllm-49248")
    t = _template(c["template"])
    req = ChatRequest.from_dict(c)
    out = "<tool_call>search<arg_key>query</arg_key>" + "x" * (256 * 1024) + "</arg_value></tool_call>"
    ex = explain(t, req, out, fixes=False)
    s = _Setup(t, req, "llama.cpp", {})
    tg = triage(ex, s, _build(s), parses=6, reexplain=explain)
    assert tg.searched <= 6
    assert tg.mistake == Mistake.OMITTED_MARKER


def test_reproducer_with_expected_message_fails_until_fixed(tmp_path):
    """With the expected message the pytest reproducer is xfail(strict) with the cause: run now, it xfails (the
    parse is still wrong); the case ids of different outputs differ."""
    import subprocess
    import sys

    from core.explain.reproducer import case_id, pytest_test

    c = next(c for c in CASES if c["id"] == "vllm-49248")
    ex, _tg = _run(c)
    want = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "id": "", "function": {
        "name": "search", "arguments": '{"query":"how many vacation days left"}'}}]}
    code = pytest_test(ex, source=_template(c["template"]).source, expect=want)
    assert ("@pytest.mark.xfail(strict=True, reason='omitted marker inside a call: the model omitted "
            "`<arg_value>`") in code
    f = tmp_path / "test_repro.py"
    f.write_text(code, encoding="utf-8")
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(f)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300, env=env)
    assert "1 xfailed" in r.stdout, r.stdout + r.stderr
    other = next(c for c in CASES if c["id"] == "vllm-47190-a")
    ex2 = explain(_template(other["template"]), ChatRequest.from_dict(other), other["input"], fixes=False)
    assert case_id(ex) != case_id(ex2) and case_id(ex).startswith("explain-")
    plain = pytest_test(ex)
    assert "Characterisation test" in plain and "xfail" not in plain


def test_peg_tester_snippet_declares_its_tools_as_string_literals():
    from core.explain.reproducer import peg_tester_snippet

    c = next(c for c in CASES if c["id"] == "llamacpp-24807")
    ex, _tg = _run(c)
    s = peg_tester_snippet(ex)
    from core.codegen import cpp_string

    params = json.dumps(c["tools"][0]["function"]["parameters"], ensure_ascii=False)
    assert s.splitlines()[2] == f'    static common_chat_tool repro_tool_0{{ "write", "", {cpp_string(params)} }};'
    assert "        .tools({ repro_tool_0 })" in s


def test_cli_json_carries_the_triage_and_expect(tmp_path):
    import subprocess
    import sys

    c = next(c for c in CASES if c["id"] == "vllm-49248")
    req = tmp_path / "req.json"
    req.write_text(json.dumps({k: c[k] for k in ("messages", "tools", "enable_thinking")}), encoding="utf-8")
    exp = tmp_path / "expect.json"
    exp.write_text(json.dumps({"role": "assistant", "tool_calls": []}), encoding="utf-8")
    cmd = [sys.executable, "-m", "core", "explain", str(TEMPLATES / c["template"]), "--request", str(req)]
    out = subprocess.run(cmd + ["--json", "--expect", str(exp)], input=c["input"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["triage"]["mistake"] == "OMITTED_MARKER"
    assert data["triage"]["nearest"]["edits"] == [{"kind": "insert", "pos": 41, "old": "", "new": "<arg_value>"}]
    assert "xfail(strict=True" in data["reproducer"]["pytest"]
    text = subprocess.run(cmd, input=c["input"], capture_output=True, text=True, cwd=ROOT, timeout=120).stdout
    assert "mistake: omitted marker inside a call — the model omitted `<arg_value>`" in text
    assert "no change of ours helps:" in text
    c2 = next(c for c in CASES if c["id"] == "hermes-agent-5867")
    req.write_text(json.dumps({k: c2[k] for k in ("messages", "tools")}), encoding="utf-8")
    cmd2 = [sys.executable, "-m", "core", "explain", str(TEMPLATES / c2["template"]), "--request", str(req)]
    d2 = json.loads(subprocess.run(cmd2 + ["--json"], input=c2["input"], capture_output=True, text=True, cwd=ROOT,
                                   timeout=120).stdout)
    assert d2["triage"]["fixes"][0]["cli"] == "--repair unmarked-calls"
    d3 = json.loads(subprocess.run(cmd2 + ["--json", "--repair", "unmarked-calls"], input=c2["input"],
                                   capture_output=True, text=True, cwd=ROOT, timeout=120).stdout)
    assert d3["only_repairs"] == ["unmarked-calls"] and d3["clean"]
    assert d3["message"]["tool_calls"][0]["function"]["arguments"] == \
        d2["triage"]["fixes"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]", encoding="utf-8")
    err = subprocess.run(cmd + ["--expect", str(bad)], input=c["input"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert err.returncode != 0 and "expected a JSON object" in err.stderr and "Traceback" not in err.stderr


def test_explain_view_in_the_worker_returns_the_triage():
    """The Explain page reaches triage and the expected-message reproducer through core.isolated_ops."""
    from core.isolated_ops import explain_view

    c = next(c for c in CASES if c["id"] == "llamacpp-24807")
    t = _template(c["template"])
    req = {k: c[k] for k in ("messages", "tools", "enable_thinking")}
    data = explain_view(t.source, t.name, json.dumps(req), c["input"], "llama.cpp", "{}", (),
                        json.dumps({"role": "assistant", "content": "x"}))
    assert data["triage"]["mistake"] == "MISSING_REQUIRED"
    assert [f["kind"] for f in data["triage"]["fixes"]][:2] == ["repair", "request"]   # missing-required-argument
    assert "xfail(strict=True" in data["reproducer"]["pytest"]


def test_a_clean_parse_that_drops_a_call_is_not_called_clean():
    """Kimi-K3 markup left in the reasoning (leak A of https://github.com/can1357/oh-my-pi/issues/8495, as the
    report quotes it): the call was dropped into the reasoning. The PEG port of Kimi K3 reports the output as
    ending inside the reasoning (the scanner called it clean); triage must not call it clean or cut. It named the
    unclosed reasoning until the fifth batch (kept3.jsonl holds the same leak, labelled by hand): `toolscall`
    shows that control tokens between `tools` and `call` were dropped, so the decoder is named first."""
    t = _template("Kimi-K3.jinja")
    tool = {"type": "function", "function": {"name": "StrReplace", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}
    out = ('<|open|>toolscall tool="StrReplace" index="1"<|sep|><|open|>argument key="path" type="string"<|sep|>'
           'src/rendererargument<|sep|><|close|>call<|sep|><|close|>toolstoolsmessage<|sep|>')
    ex = explain(t, ChatRequest.from_dict({"messages": [{"role": "user", "content": "hi"}], "tools": [tool]}), out)
    assert not ex.message.get("tool_calls") and "StrReplace" in ex.message["reasoning_content"]
    assert ex.triage.mistake == Mistake.SPECIAL_TOKENS_STRIPPED
    assert any("`toolscall`" in e and "`tools<|sep|><|open|>call`" in e for e in ex.triage.evidence), \
        ex.triage.evidence
    assert not ex.triage.fixes and "skip_special_tokens" in ex.triage.no_fix


def test_server_setting_is_offered_only_when_the_restored_output_reparses():
    """mistral-inference-162: the decoder dropped [TOOL_CALLS]; the nearest output puts it back, but the v0.3
    format then also wants the call id the model never wrote, so "keep special tokens" alone does not re-parse
    and is offered only together with improved fidelity (verified); the repair that reads the bare list ranks
    first."""
    c = next(c for c in CASES if c["id"] == "mistral-inference-162")
    ex, tg = _run(c)
    assert tg.mistake == Mistake.SPECIAL_TOKENS_STRIPPED
    assert tg.nearest.edits[0].new == "[TOOL_CALLS] "
    assert [f.kind.value for f in tg.fixes] == ["repair", "server"]
    assert tg.fixes[0].change == {"repairs": ["unmarked-calls"]}
    server = tg.fixes[1]
    assert server.change["server"] == "keep-special-tokens" and server.change["fidelity"] == "improved"
    assert server.change["output"] == "[TOOL_CALLS] " + c["input"]
    assert server.message["tool_calls"][0]["function"]["name"] == "get_current_weather"


def test_an_analysis_gap_is_said_as_such_with_the_empty_comparisons():
    """granite32-function-call-tag: the format is only in the agent's prompt. The evidence says what our analysis
    did not find and lists the comparisons that came back empty — no claim about the template."""
    c = next(c for c in CASES if c["id"] == "granite32-function-call-tag")
    ex, tg = _run(c)
    assert tg.mistake == Mistake.FORMAT_NOT_FOUND
    assert any(e.startswith("our analysis found no tool call in the renders it compared") and
               "not a statement about the template" in e for e in tg.evidence)
    assert any(e.startswith("the analysis found no tool-call markers; comparisons that came back empty: ")
               and "C1-tools" in e for e in tg.evidence)
    assert not any("the template's renders show" in e for e in tg.evidence)


def test_a_stripped_stop_string_is_named_and_keeping_it_reparses():
    """No report in the set shows a server stripping a stop string, so this takes a real clean output (vLLM's
    Hermes-parser fixture, tests/data/real_outputs/hermes.jsonl, Qwen3 template) and removes its closing
    `</tool_call>` as a server does with a matched stop string: the triage names STOP_STRING_STRIPPED (not a cut
    call) and offers the server setting, re-parsed clean with the call."""
    rows = [json.loads(x) for x in open(ROOT / "tests" / "data" / "real_outputs" / "hermes.jsonl", encoding="utf-8")]
    c = next(r for r in rows if r["id"] == "hermes-bool-19056")
    t = _template(c["template"])
    req = ChatRequest.from_dict(c["request"])
    assert explain(t, req, c["output"], fixes=False).clean
    out = c["output"].rstrip()
    assert out.endswith("</tool_call>")
    out = out[:-len("</tool_call>")]
    ex = explain(t, req, out, fixes=False)
    s = _Setup(t, req, "llama.cpp", {})
    tg = triage(ex, s, _build(s), seconds=30.0, reexplain=explain)
    assert tg.mistake == Mistake.STOP_STRING_STRIPPED
    assert any("a server removes a matched stop string" in e for e in tg.evidence)
    server = [f for f in tg.fixes if f.kind.value == "server"]
    assert server and server[0].change["server"] == "keep-stop-string"
    assert server[0].change["output"].endswith("</tool_call>")
    msg, clean = apply_fix(t, req, out, server[0].change)
    assert clean and msg["tool_calls"][0]["function"]["name"] == "final_answer"


def test_a_clean_parse_with_calls_is_not_given_a_mistake():
    """xinference-5242: the Gemma 4 call parses clean; its text holds `call:`, which the loose 'another format'
    rule once read as a mistake."""
    c = next(c for c in CASES if c["id"] == "xinference-5242-gemma4-quote-delimiters")
    ex, tg = _run(c)
    assert ex.clean and ex.message["tool_calls"][0]["function"]["name"] == "select_execution_pattern"
    assert tg.mistake == Mistake.NONE and not tg.fixes


def test_a_fix_command_line_quotes_what_the_model_wrote():
    """Re-attack (session 9): an override's value is text of the model's output (the key it wrote); the `cli` form
    shown beside a fix is shell-quoted, and has no form at all when the value holds a character that does not print."""
    import shlex

    from core.explain.triage import RankedFix, TriageFixKind

    kind = next(iter(TriageFixKind))
    hostile = "x$(touch /tmp/PWNED) --expect /etc/passwd"
    fix = RankedFix(kind, "d", {"overrides": {"tools.format.name_field": hostile}}, {})
    assert shlex.split(fix.cli) == ["--override", f"tools.format.name_field={hostile}"]
    assert RankedFix(kind, "d", {"overrides": {"k": "a\u202eb"}}, {}).cli == ""
    assert RankedFix(kind, "d", {"repairs": ["unmarked-calls"]}, {}).cli == "--repair unmarked-calls"


def _case(key: str) -> dict:
    """The case of the second batch (fresh.jsonl) whose id holds ``key``."""
    return next(c for c in SETS["fresh.jsonl"] if key in c["id"])


def _triage(case: dict):
    return _run(case)[1]


@pytest.mark.parametrize("key", ["hermes-opener-only", "cohere-opener-only"])
def test_an_output_ending_at_a_call_opener_is_cut_and_gets_no_fix(key):
    # the Cohere one was read as a wrapper and "fixed" by an override making `<|START_ACTION|>` a content marker
    tg = _triage(_case(key))
    assert tg.mistake == Mistake.CUT_SHORT
    assert any("nothing after it" in e for e in tg.evidence)
    assert not tg.fixes and "max_tokens" in tg.no_fix


@pytest.mark.parametrize("key,calls", [("minimax-m25-10", [("exec", {"command": "ls"})]),
                                       ("pi-368", [("bash", {"command": "mb --help"}),
                                                   ("bash", {"command": "cm --help"})])])
def test_a_call_only_text_under_an_opened_reasoning_gets_reasoning_format_none(key, calls):
    c = _case(key)
    tg = _triage(c)
    assert tg.mistake == Mistake.REASONING_SETTING
    # first the improved repair call-ends-reasoning : the calls, nothing else; then the request fix
    kinds = [(f.kind.value, f.change) for f in tg.fixes]
    assert kinds[0] == ("repair", {"repairs": ["call-ends-reasoning"]})
    assert ("request", {"request": {"reasoning_format": "none"}}) in kinds
    for f in tg.fixes[:2]:
        msg, clean = apply_fix(_template(c["template"]), ChatRequest.from_dict(c), c["input"], f.change)
        assert clean and msg == f.message
        assert [(tc["function"]["name"], json.loads(tc["function"]["arguments"])) for tc in msg["tool_calls"]] == calls
        assert (msg.get("content") or "").strip() in ("", "<think>")   # the prompt's own opener, not the model's
    assert not tg.fixes[0].message.get("content") and not tg.fixes[0].message.get("reasoning_content")


def test_a_complete_foreign_block_in_unclosed_reasoning_is_not_cut():
    tg = _triage(_case("35935"))
    assert tg.mistake == Mistake.TEMPLATE_MODEL_MISMATCH
    assert any("`[TOOL_CALL]` … `[/TOOL_CALL]`" in e for e in tg.evidence)
    assert not tg.fixes


def test_call_n_ids_are_an_id_shape_not_another_format():
    tg = _triage(_case("kimi-k25-call-ids"))
    assert tg.mistake == Mistake.CALL_ID_SHAPE
    assert any("`call_0`, `call_1`, `call_2`" in e and "`Read`" in e for e in tg.evidence)
    assert not tg.fixes


def test_a_template_without_a_tool_calls_branch_gets_one_that_reparses():
    c = _case("glm4-0414")
    tg = _triage(c)
    assert tg.mistake == Mistake.FORMAT_NOT_FOUND
    # improved fidelity reads the call (improvement metadata-call-turns learns the template's metadata call turn),
    # so that fix comes first; the template patch is still offered, and reparses at llama.cpp fidelity
    assert [f.kind.value for f in tg.fixes] == ["fidelity", "template"]
    assert tg.fixes[0].message["tool_calls"][0]["function"]["name"] == "get_weather"
    f = tg.fixes[1]
    [[old, new]] = f.change["template_patch"]
    assert old == "{%- elif role == 'assistant' and not meta %}" and new.endswith(old)
    assert "message.tool_calls" in new and "get_weather" not in new and "Paris" not in new   # no output text
    msg, clean = apply_fix(_template(c["template"]), ChatRequest.from_dict(c), c["input"], f.change)
    assert clean and json.loads(msg["tool_calls"][0]["function"]["arguments"]) == {"location": "Paris",
                                                                                   "unit": "celsius"}


def _kept4(case_id: str):
    return _set_case("kept4.jsonl", case_id)


def test_whitespace_edits_name_a_whitespace_slip_before_any_format_guess():
    # LFM2.5: `[get_current_temperature(location="Tokyo")] <|tool_call_end|>` — one deleted space is the nearest
    # output; it was named another family's format
    ex, tg = _kept4("kept4-vllm-39243-lfm25-pythonic-space-before-end")
    assert tg.mistake == Mistake.OMITTED_MARKER
    assert [(e.kind, e.old, e.new) for e in tg.nearest.edits] == [("delete", " ", "")]
    assert any("markup is the template's but for whitespace" in e for e in tg.evidence), tg.evidence
    assert tg.fixes[0].change == {"repairs": ["call-list-spacing"]}


def test_a_whole_foreign_call_syntax_is_a_mismatch_and_a_wrapper_holds_the_templates_shape():
    # Qwen 3.5 reading `<function_calls><invoke name=…><parameter name=… string=…>`: no markup of the template
    # inside the outer tag, so it is another family's syntax, not a wrapper named after its outer tag
    ex, tg = _kept4("kept4-hermes-agent-8965-qwen35-function-calls-invoke")
    assert tg.mistake == Mistake.TEMPLATE_MODEL_MISMATCH and not tg.fixes and tg.no_fix
    assert any("inside `<function_calls>`" in e and "`<invoke`" in e and "not the template's call inside an extra "
               "wrapper" in e for e in tg.evidence), tg.evidence
    from core.explain.triage import _foreign_inner

    ctx = {"markers": ["<tool_call>"], "closers": [], "all_markers": {"</tool_call>"}, "names": ["cronjob"]}
    s = _Setup(_template("Qwen3.5-4B.jinja"), ChatRequest.from_dict({"messages": []}), "llama.cpp", {})
    assert _foreign_inner('\n<invoke name="cronjob">x</invoke>', s, ctx)
    # the template's own call (or a JSON call object) inside the outer tag is a wrapper
    assert _foreign_inner("\n<tool_call>\n<function=cronjob>", s, ctx) == ""
    assert _foreign_inner('\n{"name": "cronjob", "arguments": {}}', s, ctx) == ""


def test_a_call_to_an_undeclared_unrelated_name_is_an_unknown_tool():
    # thClaws: bare JSON calling `Skill` (declared: Bash, Read) — no near name, so the name is the fault whatever
    # the format; a near name of a declared tool (date_ difference, kept.jsonl) stays a format mismatch
    ex, tg = _kept4("kept4-thclaws-50-qwen25coder-unregistered-skill-tool")
    assert tg.mistake == Mistake.UNKNOWN_TOOL and not tg.fixes
    assert any("`Skill` is no declared tool nor a near name of one" in e for e in tg.evidence), tg.evidence
    assert "`Skill`, which the request does not declare" in tg.no_fix


@pytest.mark.parametrize("case_id", ["kept4-hermes-agent-8965-deepseek-v32-dsml-token-dropped",
                                     "kept4-vllm-29837-deepseek-v32-think-end-stripped"])
def test_a_token_stripped_with_none_of_its_family_left_is_put_back_and_reparsed(case_id):
    # DeepSeek-V3.2: `｜DSML｜` gone from every tag (the template's render shows it inside the tags); `</think>`
    # gone so the reasoning runs into the answer (`friendlier.1 + 1 = 2`)
    c = next(c for c in SETS["kept4.jsonl"] if c["id"] == case_id)
    ex, tg = _run(c)
    assert tg.mistake == Mistake.SPECIAL_TOKENS_STRIPPED
    server = tg.fixes[0]
    assert server.kind.value == "server" and server.change["server"] == "keep-special-tokens"
    assert server.change["output"] == c["fix"]["change"]["output"]
    assert _same(server.message, c["expect"])
    if "think-end" in case_id:     # enable_thinking false reads the whole text as the answer: not offered
        assert all((f.message.get("reasoning_content") or "").strip() for f in tg.fixes)


def test_a_stripped_reasoning_closer_needs_a_glued_sentence_and_a_clean_reparse():
    from core.explain.triage import _GLUE

    assert [m.start() for m in _GLUE.finditer("friendlier.1 + 1 = 2")] == [11]
    # a decimal, an abbreviation and a sentence followed by a space are no glue points
    assert not list(_GLUE.finditer("version 2.5 and e.g. this. Then U.S.A"))


def test_a_call_written_as_plain_lines_is_not_clean():
    # Qwen 3.6: `bash` on one line, its command on the next, none of <tool_call>/<function=…>
    ex, tg = _kept4("kept4-vmlx-192-qwen36-plain-line-call")
    assert ex.clean and tg.mistake == Mistake.TEMPLATE_MODEL_MISMATCH and not tg.fixes
    assert tg.no_fix.startswith("none of our changes helps, because the call is written as plain lines (`bash`")
    from core.explain.triage import _plain_line_call

    assert _plain_line_call("I ran it:\nbash\necho hi", ["bash"]) == "bash"
    assert _plain_line_call("I ran it.\n\nbash\necho hi", ["bash"]) == "bash"
    assert _plain_line_call("bash is a shell.\nIt runs commands.", ["bash"]) == ""
    assert _plain_line_call("echo hi\nbash", ["bash"]) == ""        # nothing after the name: no argument
    assert _plain_line_call("I have these tools:\nbash\nread", ["bash", "read"]) == ""   # a list of the tools
    assert _plain_line_call("Run it with\nbash\nin a terminal", ["bash"]) == ""   # inside a sentence


def test_a_correct_output_whose_fidelities_differ_only_in_edge_whitespace_gets_no_fix():
    # MiniCPM-V 4.5, thinking off: llama.cpp keeps the `\n\n` after the prompt's empty think block in the content,
    # improved drops it; the output is the answer either way
    ex, tg = _kept4("kept4-minicpm-v-1016-minicpmv45-thinking-off-filed-as-reasoning")
    assert ex.clean and ex.message["content"].startswith("\n\n6")
    assert tg.mistake == Mistake.NONE and not tg.fixes


def _real(path: str, row_id: str):
    rows = [json.loads(x) for x in open(ROOT / "tests" / "data" / path, encoding="utf-8")]
    r = next(r for r in rows if r["id"] == row_id)
    t = _template(r["template"])
    req = ChatRequest.from_dict(r["request"])
    ex = explain(t, req, r["output"])
    s = _Setup(t, req, "llama.cpp", {})
    return ex, triage(ex, s, _build(s), seconds=30.0, reexplain=explain)


def test_a_reopened_reasoning_the_parse_absorbed_is_no_mistake():
    # Gemma 4 (real_outputs_kept3): an empty `<|channel>thought<channel|>` after a prompt that closed the reasoning;
    # the parse is clean and leaves no reasoning marker in the message
    ex, tg = _real("real_outputs_kept3/gemma4.jsonl", "kept3-unsloth-gemma-4-31b-it-sky")
    assert ex.clean and tg.mistake == Mistake.NONE and not tg.fixes
    # DeepSeek-R1 (vLLM's fixture): the re-opened `<think>` is left in the reasoning — a mistake, with its repair
    ex, tg = _real("real_outputs/deepseek-r1.jsonl", "r1-with-think")
    assert tg.mistake == Mistake.REOPENED_REASONING and tg.fixes[0].change == {"repairs": ["reasoning-start-repeated"]}


def test_a_tag_rewritten_with_its_newline_is_a_whitespace_slip_not_a_wrapper():
    # vLLM's Hermes fixture: `<tool_call>{…}</tool_call><tool_call>{…}` without the newline the template writes
    # after the opener; it was "wraps the call in `<tool_call>`" — the template's own opener
    ex, tg = _real("real_outputs/hermes.jsonl", "hermes-two-calls-adjacent")
    assert tg.mistake == Mistake.OMITTED_MARKER
    assert tg.fixes[0].change == {"repairs": ["tag-whitespace"]}


def test_a_template_patch_never_writes_the_models_jinja_syntax_into_the_source() -> None:
    """A re-attack found that the template patch wrote the model's token (an ``<|...|>`` token may hold quotes and
    braces) verbatim into the Jinja source where the template writes its own literal: inside a ``'...'`` literal a
    quote closes the string and what follows runs as template code in the offered, downloadable template. Such a
    replacement is refused; the plain key alias (issue 26's example) is still patched."""
    from types import SimpleNamespace

    from core.explain.triage import Edit, _template_patch

    setup = SimpleNamespace(template=SimpleNamespace(source="{{- '<|tool_call|>' + tool.name }}{{ '\"arguments\": ' }}"))
    hostile = "<|a' ~ cycler.__init__ ~ '|>"
    assert _template_patch(setup, [Edit("replace", 0, hostile, "<|tool_call|>")], hostile) is None
    assert _template_patch(setup, [Edit("replace", 0, "<|{{ 7*7 }}|>", "<|tool_call|>")], "") is None
    assert _template_patch(setup, [Edit("replace", 0, '"parameters"', '"arguments"')], "") == ('"arguments"',
                                                                                                '"parameters"')


def test_a_type_union_in_the_schema_does_not_break_the_triage() -> None:
    """A re-attack found explain raising ``TypeError: unhashable type: 'list'`` (a traceback) from the triage's
    schema check when a parameter's ``type`` is a list — valid JSON Schema, used by the reference cases ref-0132
    (Qwen3-Coder, ``["string", "null"]``) — on any output that does not parse clean (here ref-0132's output with its
    opener written twice). A union is checked as any of its types."""
    from .conftest import REFERENCE

    row = json.loads(next(line for line in (REFERENCE / "cases.jsonl").read_text(encoding="utf-8").splitlines()
                          if '"ref-0132"' in line))
    tools = row["tools"]
    assert tools[0]["function"]["parameters"]["properties"]["name"]["type"] == ["string", "null"]
    request = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Hey there!"}], "tools": tools})
    template = ChatTemplate((TEMPLATES / "Qwen3-Coder.jinja").read_text(encoding="utf-8"), "Qwen3-Coder.jinja")
    output = ("<tool_call><tool_call>\n<function=set_nullable_str>\n<parameter=name>\nhello world\n</parameter>\n"
              "</function>\n</tool_call>")
    ex = explain(template, request, output)
    assert ex.triage is not None and ex.triage.mistake != Mistake.NONE
    from core.explain.causes import _type_ok

    assert _type_ok(None, ["string", "null"]) and not _type_ok(3, ["string", "null"]) and _type_ok(3, {"x": 1})


@pytest.mark.parametrize("params", [
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": [1, None]},
    {"type": "object", "properties": {"city": "string"}, "required": [{"x": 1}]},
    {"type": "object", "properties": ["city"], "required": [["city"]]},
])
def test_a_hostile_schema_is_read_without_a_traceback(params: dict) -> None:
    """A re-attack found explain raising (``unhashable type: 'dict'``, ``'int' object has no attribute
    'isascii'``, ``'list' object has no attribute 'get'``) when the request's schema lists non-names in
    ``required`` or gives ``properties`` as a list, on outputs that do not parse clean. The request is untrusted:
    those entries name no parameter and are left out."""
    tools = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": params}}]
    request = ChatRequest.from_dict({"messages": [{"role": "user", "content": "hi"}], "tools": tools})
    template = ChatTemplate((TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8"), "q")
    for output in ('<tool_call>\n{"name": "f", "arguments": {"city": 1, "zz": [1]}}\n</tool_call>x',
                   '<tool_call>\n{"name": "f", "parameters": {"city": 1}}'):
        for fidelity in ("llama.cpp", "improved"):
            ex = explain(template, request, output, fidelity=fidelity)
            assert ex.triage is not None and ex.consistency == ""


def _reference(case_id: str) -> dict:
    """A case of llama.cpp's own parser tests (/work/shared/reference/cases.jsonl: the inputs of its
    tests/test-chat.cpp), whose output the tests below change the way a model or a decoder does."""
    from .conftest import REFERENCE

    return json.loads(next(line for line in (REFERENCE / "cases.jsonl").read_text(encoding="utf-8").splitlines()
                           if f'"{case_id}"' in line))


def _run_output(case: dict, output: str, template: str = ""):
    c = {**case, "input": output, "template": template or case["template"]}
    return _run(c)


def test_spaces_a_decoder_put_around_special_tokens_are_deleted_and_the_output_reparsed():
    # Kimi K2 Thinking via Chutes (kept5): ` <|tool_calls_section_begin|> <|tool_call_begin|> functions.… ` — one
    # space on each side of every special token; the closing </think> has none (the client's wrapper)
    c = SETS["kept5.jsonl"][0]
    ex, tg = _run(c)
    assert tg.mistake == Mistake.SPECIAL_TOKENS_STRIPPED
    assert any("every one of the 5 special tokens inside the output has a space on each side" in e
               and "spaces_between_special_tokens" in e and "`</think>`" in e for e in tg.evidence), tg.evidence
    server = tg.fixes[0]
    assert server.kind.value == "server" and server.change["server"] == "decode-special-tokens-without-spaces"
    assert server.change["output"] == c["fix"]["change"]["output"]
    assert _same(server.message, c["expect"])
    from core.explain.triage import _Budget, _context, _decoder_spaced

    t, req = _template(c["template"]), ChatRequest.from_dict(c)
    s = _Setup(t, req, "llama.cpp", {})
    b = _build(s)
    ctx = _context(s, b)
    # one token without its spaces: not a decoder that spaces every special token
    one = c["input"].replace(" <|tool_call_begin|> ", "<|tool_call_begin|> ")
    assert _decoder_spaced(s, b, one, ctx, _Budget(30.0, 10)) is None


def test_a_json_call_object_is_compared_with_the_templates_render_of_a_call():
    # Hermes 2 Pro (llama.cpp's test input ref-0096) with the model's slips: keys swapped, a "function" level
    # around the call, "parameters" for "arguments"
    c = _reference("ref-0096")
    ex, tg = _run_output(c, '<tool_call>\n{"arguments": {"arg1": 1}, "name": "special_function"}</tool_call>')
    # the template's keys, each named right, in another order: another prompt's call shape (ninth round), no alias
    assert tg.mistake == Mistake.TEMPLATE_MODEL_MISMATCH
    assert any("in the order `\"arguments\"`, `\"name\"` where the template's render of a call of "
               "`special_function` writes `\"name\"`, `\"arguments\"`" in e and "prompt shows no call object" in e
               for e in tg.evidence), tg.evidence
    assert tg.fixes[0].change == {"repairs": ["json-field-order"]}
    assert _calls_of_message(tg.fixes[0].message) == [("special_function", {"arg1": 1})]
    ex, tg = _run_output(c, '<tool_call>\n{"function": {"name": "special_function", "arguments": {"arg1": 1}}}'
                            '</tool_call>')
    assert tg.mistake == Mistake.FOREIGN_WRAPPER
    assert any("sits under `\"function\"`, a level the template's call never writes" in e for e in tg.evidence)
    ex, tg = _run_output(c, '<tool_call>\n{"name": "special_function", "parameters": {"arg1": 1}}</tool_call>')
    assert tg.mistake == Mistake.FIELD_ALIAS
    assert any("under `\"parameters\"` where the template writes `\"arguments\"`" in e for e in tg.evidence)
    # a member the template's call never has, in the object the parse stopped inside
    ex, tg = _run_output(c, '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}, "id": "call_1"}'
                            '</tool_call>')
    assert tg.mistake == Mistake.FIELD_ALIAS
    assert any("writes `\"id\"` beside the members the template writes" in e for e in tg.evidence), tg.evidence
    # Mistral Nemo (ref-0344): its template renders a call only with a nine-digit id, which the render uses
    ex, tg = _run_output(_reference("ref-0344"), '[TOOL_CALLS][{"arguments": {"arg1": 1}, "name": "special_function", '
                                                 '"id": "123456789"}]')
    assert tg.mistake == Mistake.TEMPLATE_MODEL_MISMATCH
    assert any("in the order `\"arguments\"`, `\"name\"`, `\"id\"` where the template's render of a call of "
               "`special_function` writes `\"name\"`, `\"arguments\"`, `\"id\"`" in e for e in tg.evidence), tg.evidence
    # Command R7B writes `tool_name` / `parameters` after `tool_call_id`: its own order is no slip
    from core.explain.triage import _json_call_in

    shape = _json_call_in('[{"tool_call_id": "0", "tool_name": "f", "parameters": {}}]', {"f"})
    assert shape.keys == ("tool_call_id", "tool_name", "parameters") and shape.name_key == "tool_name"
    assert shape.args_key == "parameters" and shape.path == ()
    assert _json_call_in('{"tool_calls": [{"function": {"name": "f"}}]}', {"f"}).path == ("tool_calls", "function")
    assert _json_call_in('{"answer": "f"', {"f"}) is None and _json_call_in('{"x": 1} {"name": "f"}', {"f"}) is None


def _calls_of_message(message: dict) -> list:
    return [(tc["function"]["name"], json.loads(tc["function"]["arguments"])) for tc in message.get("tool_calls") or []]


def test_reasoning_causes_read_the_analysis_markers_not_think():
    # Command R7B (llama.cpp's test input ref-0048): <|START_THINKING|> … <|END_THINKING|><|START_ACTION|>[…]
    c = _reference("ref-0048")
    out = c["input"]
    ex, tg = _run_output(c, "<|START_THINKING|>" + out)        # the opener written twice
    assert ex.clean and tg.mistake == Mistake.REOPENED_REASONING
    assert tg.fixes[0].change == {"repairs": ["reasoning-start-repeated"]}
    ex, tg = _run_output(c, out.replace("<|END_THINKING|>", ""))     # never closed, the call inside
    assert tg.mistake == Mistake.REASONING_NOT_CLOSED
    assert any("`<|START_ACTION|>`" in e and "`<|END_THINKING|>`" in e for e in tg.evidence)
    ex, tg = _run_output(c, out.replace("<|START_THINKING|>", ""))   # the end without the start
    assert tg.mistake == Mistake.REASONING_SETTING
    assert any("closes the reasoning with `<|END_THINKING|>` but never opens it with `<|START_THINKING|>`" in e
               for e in tg.evidence), tg.evidence
    assert not any(f.kind.value == "server" for f in tg.fixes)     # the decoder kept its pair: not stripped
    # the template as Cohere ships it: our analysis finds no reasoning markers there — its gap, not a wrapper
    ex, tg = _run_output(c, out, "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja")
    assert tg.mistake == Mistake.FORMAT_NOT_FOUND
    assert any("`<|START_THINKING|>`, a control token the template's source writes, but our analysis found it in "
               "no role" in e and "a gap of the analysis" in e for e in tg.evidence), tg.evidence
    assert [f.kind.value for f in tg.fixes] == ["fidelity"]        # not content.start = <|START_THINKING|>
    assert _calls_of_message(tg.fixes[0].message) == [("special_function", {"arg1": 1})]


def test_a_dropped_reasoning_closer_is_where_the_output_has_only_its_whitespace():
    # Qwen3.5 (llama.cpp's test input ref-0000) with `</think>` taken out as a decoder skipping special tokens
    # does: `thinking\n\n\nHello` — the template writes `\n</think>\n\n` there
    c = _reference("ref-0000")
    assert "thinking\n</think>\n\nHello" in c["input"]
    ex, tg = _run_output(c, c["input"].replace("</think>", ""))
    assert tg.mistake == Mistake.SPECIAL_TOKENS_STRIPPED
    assert any("exactly the whitespace the template writes around `</think>` (`↵</think>↵↵`)" in e
               for e in tg.evidence), tg.evidence
    server = tg.fixes[0]
    assert server.change == {"server": "keep-special-tokens", "output": c["input"]}
    # llama.cpp's own answer for the output as written (explain's parse keeps the `\n` before `</think>` in the
    # reasoning here, where llama.cpp's final message trims it)
    assert server.message["content"] == c["expect"]["content"]
    assert server.message["reasoning_content"].strip() == c["expect"]["reasoning_content"]
    from core.explain.triage import _stripped_places

    assert _stripped_places("R one.\n\nR two\n\n\nAnswer.", "\n", "\n\n") == [14]
    # a paragraph break is a place only when it is the output's only one; no whitespace: glued sentences
    assert _stripped_places("R one.\n\nAnswer.", "", "\n\n") == [6]
    assert _stripped_places("R one.\n\nR two.\n\nAnswer.", "", "\n\n") == []
    assert _stripped_places("friendlier.1 + 1 = 2", "", "") == [11]


def test_an_end_of_turn_token_kept_after_the_call_is_trailing_text_not_a_wrapper():
    # Hermes 2 Pro (llama.cpp's test input ref-0096) with the `<|im_end|>` a server stops at left at the end: it was
    # "a wrapper the template does not render"
    c = _reference("ref-0096")
    ex, tg = _run_output(c, c["input"] + "<|im_end|>")
    assert tg.mistake == Mistake.TRAILING_TEXT
    assert any("ends with `<|im_end|>` after the complete call, which the template writes to end the assistant turn"
               in e for e in tg.evidence), tg.evidence
    assert tg.fixes[0].change == {"repairs": ["trailing-end-of-turn"]}


def test_the_templates_own_call_markup_without_its_opener_is_an_omitted_opener_not_a_wrapper():
    # Qwen3.5 (llama.cpp's test input ref-0002): the call without `<tool_call>` was "wrapped in `<function=`", the
    # template's own markup; without `</tool_call>` at the very end (a stop string a server removed) it was a cut
    c = _reference("ref-0002")
    out = c["input"]
    ex, tg = _run_output(c, out[len("<tool_call>\n"):])
    assert tg.mistake == Mistake.OMITTED_OPENER
    # (the opener with the line break the template's render writes after it: exactly the text taken off)
    assert tg.nearest.edits[0].new == "<tool_call>\n"
    ex, tg = _run_output(c, out[:-len("</tool_call>")])
    assert tg.mistake == Mistake.STOP_STRING_STRIPPED
    server = [f for f in tg.fixes if f.kind.value == "server"]
    assert server and server[0].change == {"server": "keep-stop-string", "output": out}


def test_a_python_literal_inside_json_arguments_is_a_type_mismatch():
    # Hermes 2 Pro (llama.cpp's test input ref-0096) with Python's `True` for the integer `arg1`: the parse stops
    # at the arguments object; it was "another family's format"
    c = _reference("ref-0096")
    ex, tg = _run_output(c, c["input"].replace('"arg1": 1', '"arg1": True'))
    assert tg.mistake == Mistake.TYPE_MISMATCH
    assert any("`arg1` = `True`: the model wrote the Python literal `True` inside the call's JSON arguments, where "
               "JSON writes true (the schema's type is `integer`)" in e for e in tg.evidence), tg.evidence
    from core.explain.triage import _python_literal_inside

    req = ChatRequest.from_dict(c)
    assert _python_literal_inside(req, '{"a": "True", "b": None}', 0).startswith("`b` = `None`")
    assert "Python literal `False`" in _python_literal_inside(req, '[1, False]', 0)
    assert _python_literal_inside(req, '{"a": "it\'s", "b": \'x\'}', 0).startswith("`b` = `'x'`")
    assert _python_literal_inside(req, '{"a": "True"} True', 0) == ""        # outside the value: not its fault


def test_an_end_of_sequence_token_left_after_a_clean_call_is_trailing_text_with_a_server_fix():
    # Gemma 4 (llama.cpp's test input ref-0075) with `<|endoftext|>` kept: the parse reads the call and leaves the
    # token as content; "call:" (Gemma 4's own syntax) made it "another format"
    c = _reference("ref-0075")
    ex, tg = _run_output(c, c["input"] + "<|endoftext|>")
    assert ex.clean and ex.message["content"] == "<|endoftext|>"
    assert tg.mistake == Mistake.TRAILING_TEXT
    server = [f for f in tg.fixes if f.kind.value == "server"]
    assert server and server[0].change == {"server": "strip-stop-token", "output": c["input"]}
    assert _same(server[0].message, c["expect"])


def test_an_argument_name_the_schema_does_not_declare_is_an_unknown_parameter_with_a_schema_edit():
    # Qwen3-Coder (llama.cpp's test input ref-0118) with the argument named `zzz`: the parse stops where it expects a
    # declared name (`arg1`); it was "an omitted marker"
    c = _reference("ref-0118")
    ex, tg = _run_output(c, c["input"].replace("arg1", "zzz"))
    assert tg.mistake == Mistake.UNKNOWN_PARAMETER
    assert any("names an argument `zzz`, which `special_function`'s schema does not declare, where the parser "
               "expected a declared name (`arg1`)" in e for e in tg.evidence), tg.evidence
    f = next(f for f in tg.fixes if f.kind.value == "request")
    assert f.change["request"]["type"] == {"special_function": {"zzz": "string"}}
    assert f.change["request"]["required"] == {"special_function": []}
    assert _calls_of_message(f.message) == [("special_function", {"zzz": "1"})]


def test_a_reasoning_opener_left_in_the_message_is_named_before_a_loose_call_reading():
    # gpt-oss (llama.cpp's test input, reasoning then answer) with its analysis header written twice: the parse is
    # clean and leaves `<|channel|>analysis<|message|>` in the reasoning; a loose "`<` starts a call" reading named
    # it "tools not sent"
    from .conftest import REFERENCE

    c = next(json.loads(x) for x in (REFERENCE / "cases.jsonl").read_text(encoding="utf-8").splitlines()
             if '"openai-gpt-oss-120b.jinja"' in x and '"reasoning_content"' in x and '"is_partial": false' in x)
    r_start = "<|channel|>analysis<|message|>"
    assert c["input"].startswith(r_start)
    ex, tg = _run_output(c, r_start + c["input"])
    assert ex.clean and tg.mistake == Mistake.REOPENED_REASONING


def test_a_call_written_before_the_reasoning_closes_is_not_a_cut():
    # Qwen3's template with llama.cpp's Hermes-format test call (ref-0096, the same `<tool_call>\n{…}</tool_call>`)
    # written inside the think block, `</think>` after it: the parse ends inside a call in the reasoning, which
    # read as a cut
    c = {**_reference("ref-0096"), "reasoning_format": "auto", "enable_thinking": True}
    out = "<think>\nI'm\nthinking\n" + c["input"] + "\n</think>\n\n"
    ex, tg = _run_output(c, out, "Qwen-Qwen3-0.6B.jinja")
    assert not ex.message.get("tool_calls") and "<tool_call>" in ex.message["reasoning_content"]
    assert tg.mistake == Mistake.REASONING_NOT_CLOSED
    assert any("closes the reasoning with `</think>` only after it" in e for e in tg.evidence), tg.evidence


def test_a_marker_written_with_a_piece_left_out_is_an_omitted_marker_not_a_wrapper():
    # DeepSeek-V4 (llama.cpp's test input ref-0165) with `｜DSML｜` left out of the first tag only: the other tags
    # keep it (no decoder dropped it); it was "the output wraps the call in `<tool_calls>`"
    c = _reference("ref-0165")
    assert c["input"].startswith("<｜DSML｜tool_calls>")
    ex, tg = _run_output(c, c["input"].replace("｜DSML｜", "", 1))
    assert tg.mistake == Mistake.OMITTED_MARKER
    assert any("wrote `<tool_calls>` where the template writes `<｜DSML｜tool_calls>`: it left `｜DSML｜` out" in e
               for e in tg.evidence), tg.evidence
    from core.explain.triage import Edit, _inserted_piece

    assert _inserted_piece(Edit("replace", 0, "<tool_calls>", "<｜DSML｜tool_calls>")) == "｜DSML｜"
    assert _inserted_piece(Edit("replace", 0, "<tool_call>", "<tool_call>\n")) == ""      # whitespace: no piece
    assert _inserted_piece(Edit("replace", 0, '"parameters"', '"arguments"')) == ""


def test_a_call_written_without_its_opener_and_closer_is_one_omission_told_once():
    # issue 26: llama.cpp's Hermes 2 Pro and Qwen2.5 test inputs (ref-0096, ref-0376) with the call written bare,
    # neither `<tool_call>` nor `</tool_call>`: it read "omitted `<tool_call>` …; then the model never closed
    # `<tool_call>`" — one mistake told twice, and nothing was opened to be left open
    for case_id in ("ref-0096", "ref-0376"):
        ex, tg = _run_output(_reference(case_id), '{"name": "special_function", "arguments": {"arg1": 1}}')
        assert tg.mistake == Mistake.OMITTED_OPENER
        assert [(e.kind, e.new.strip()) for e in tg.nearest.edits] == [("insert", "<tool_call>"),
                                                                      ("insert", "</tool_call>")]
        assert tg.nearest.sentence == ("the model omitted both `<tool_call>` and its closer `</tool_call>` around "
                                       "`{\"name\":␣\"special_functi…`")
    from core.explain.triage import Edit, sentence_of

    # an opener the model did write and left open is still "never closed"; one it closed is not
    out = '<tool_call>\n{"name": "f"}'
    assert sentence_of([Edit("insert", len(out), "", "</tool_call>")], out + "x") == \
        "the model never closed `<tool_call>` (expected `</tool_call>` before `x`)"
    out = '<tool_call>{"name": "f"}</tool_call>\n{"name": "g"}x'
    assert sentence_of([Edit("insert", len(out) - 1, "", "</tool_call>")], out) == \
        "the model omitted `</tool_call>` before `x`"


def test_the_nearest_output_diff_cannot_collide_with_the_text_it_shows(tmp_path):
    # issue 26: an inserted `}` showed as `{+}+}` (ref-0096 with the arguments' `}` left out); the diff now puts
    # the original and the edited window on their own `-` / `+` lines with `?` guides under the changed columns,
    # and the text view (CLI) and `explain --json` carry the same lines
    import subprocess
    import sys

    c = _reference("ref-0096")
    output = '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}</tool_call>'
    ex, tg = _run_output(c, output)
    assert tg.mistake == Mistake.OMITTED_CLOSER and [e.new for e in tg.nearest.edits] == ["}"]
    want = ['@@ output position 65: insert 1 character(s) @@',
            '- ion",␣"arguments":␣{"arg1":␣1}</tool_call>',
            '+ ion",␣"arguments":␣{"arg1":␣1}}</tool_call>',
            '?                               +']
    assert tg.nearest.diff.splitlines() == want
    # the model's own markup-like text is shown as itself; a line separator in it cannot start a forged line
    from core.explain.triage import Edit, diff_of

    d = diff_of([Edit("replace", 3, "[-x-]", "{+y+}")], "ab\u2028[-x-]+}", width=3).splitlines()
    assert d == ["@@ output position 3: replace 5 character(s) with 5 @@",
                 "- ab\\u2028[-x-]+}",
                 "?         -----",
                 "+ ab\\u2028{+y+}+}",
                 "?         +++++"]
    req = tmp_path / "req.json"
    req.write_text(json.dumps({k: c[k] for k in ("messages", "tools")}), encoding="utf-8")
    cmd = [sys.executable, "-m", "core", "explain", str(TEMPLATES / c["template"]), "--request", str(req)]
    data = json.loads(subprocess.run(cmd + ["--json"], input=output, capture_output=True, text=True, cwd=ROOT,
                                     timeout=120).stdout)
    assert data["triage"]["nearest"]["diff"].splitlines() == want
    text = subprocess.run(cmd, input=output, capture_output=True, text=True, cwd=ROOT, timeout=120).stdout
    assert "\n".join("  " + line for line in want) in text


# ---------------------------------------------------------------- ninth round (issue 26): rules from kept6's misses


def _kept6(case_id: str):
    return _set_case("kept6.jsonl", case_id)


def test_an_analysis_holding_the_probes_placeholders_is_a_format_not_found():
    # vLLM's Llama 3.2 pythonic template: llama.cpp's Jinja leaves `%s` in the renders, so the "format" learned is
    # `(AA_ARG_FST_AA=%s, …)]` — it was "another family's syntax" for the template's own call
    ex, tg = _kept6("kept6-l32-two-calls")
    assert tg.mistake == Mistake.FORMAT_NOT_FOUND
    assert any("holds the probe's placeholder `FFF_FIRST_FUN_F`" in e and "a gap of the analysis" in e
               for e in tg.evidence), tg.evidence
    assert not any("found no tool-call markers" in e for e in tg.evidence)     # it found some: artefacts
    # FunctionGemma: the same class; the recording kept the next turn's opener after the call, which the fix cuts
    ex, tg = _kept6("kept6-kept-gemma-docs-fg-base-one-call-stock")
    assert tg.mistake == Mistake.FORMAT_NOT_FOUND
    f = tg.fixes[0]
    assert f.change["server"] == "strip-stop-token" and f.change["fidelity"] == "improved"
    assert f.change["output"].endswith("<end_function_call>") and not f.message.get("content")
    assert not any("<start_function_response>" in (g.message.get("content") or "") for g in tg.fixes)


def test_a_template_llama_cpp_cannot_render_with_calls_left_as_content_is_a_format_not_found():
    ex, tg = _kept6("kept6-jamba-parallel")
    assert ex.entry == "no-parser" and not ex.message.get("tool_calls")
    assert tg.mistake == Mistake.FORMAT_NOT_FOUND and not tg.no_fix
    assert tg.evidence[0].startswith("the template does not render in llama.cpp's Jinja dialect (")
    assert [f.change for f in tg.fixes] == [{"fidelity": "improved"}]


@pytest.mark.parametrize("case_id,opener,closer", [
    ("kept6-xlam-tool-call-tags", "<tool_call>", "</tool_call>"),          # around the template's bare list
    ("kept6-phi4-empty-arguments", "functools[", "]"),                     # a list around the lone object
    ("kept6-kept-doc-hunyuan-fast-think-two-calls", "<answer>", "</answer>"),   # around the template's section
])
def test_a_pair_the_template_never_writes_around_its_call_is_a_foreign_wrapper(case_id, opener, closer):
    ex, tg = _kept6(case_id)
    assert tg.mistake == Mistake.FOREIGN_WRAPPER
    assert any(f"writes `{opener}` … `{closer}` around the template's own" in e for e in tg.evidence), tg.evidence
    if tg.nearest is not None:          # by construction: the wrapper's two halves deleted
        assert [(e.kind, e.old) for e in tg.nearest.edits] == [("delete", opener), ("delete", closer)]
    # a fix that still leaves the wrapper's opener in the message is not offered (Hunyuan's "strip `</answer>` as a
    # stop token" re-parsed, but left `<answer>`)
    assert not any(opener in (f.message.get("content") or "") for f in tg.fixes)


def test_a_tag_pair_around_the_whole_output_is_a_wrapper_once_unwrapped_it_parses():
    c = _reference("ref-0096")      # Hermes 2 Pro
    ex, tg = _run_output(c, "<wrapped>" + c["input"] + "</wrapped>")
    assert tg.mistake == Mistake.FOREIGN_WRAPPER
    assert [(e.kind, e.old) for e in tg.nearest.edits] == [("delete", "<wrapped>"), ("delete", "</wrapped>")]
    ex, tg = _run_output(c, "<wrapped>" + c["input"])           # no closer: no pair
    assert tg.mistake != Mistake.FOREIGN_WRAPPER


def test_a_tag_pair_inside_the_call_is_a_wrapper_not_a_stray_marker():
    ex, tg = _kept6("kept6-fresh-ollama-minicpm5-arguments-wrapper")
    assert tg.mistake == Mistake.FOREIGN_WRAPPER
    assert any("`<arguments>` … `</arguments>` inside the call" in e for e in tg.evidence), tg.evidence
    assert tg.fixes[0].change == {"repairs": ["xml-arguments-wrapper"]}


@pytest.mark.parametrize("case_id", ["kept6-l33-json-call", "kept6-fresh-sgl-llama32-intro-python-tag"])
def test_a_control_token_left_before_a_read_call_is_named_not_called_clean(case_id):
    # Llama 3.1 / 3.2 render a custom call bare; `<|python_tag|>` before it stays as content of a parse with the call
    ex, tg = _kept6(case_id)
    assert ex.message.get("tool_calls") and "<|python_tag|>" in ex.message["content"]
    assert tg.mistake == Mistake.FOREIGN_WRAPPER
    assert any("writes `<|python_tag|>` before the call" in e for e in tg.evidence), tg.evidence
    assert tg.fixes[0].change == {"repairs": ["python-code-markers"]}


def test_the_formats_end_token_then_more_text_is_trailing_text_not_a_gap_or_a_wrapper():
    ex, tg = _kept6("kept6-gptoss-call-then-final")
    assert tg.mistake == Mistake.TRAILING_TEXT
    assert any("writes `<|call|>`, the token the template's render of a call writes to end the call turn" in e
               for e in tg.evidence), tg.evidence
    # the nearest output: what follows the complete call deleted, one edit
    assert [(e.kind, e.old[:8]) for e in tg.nearest.edits] == [("delete", "<|call|>")]


def test_the_templates_keys_in_another_order_say_whether_the_prompt_shows_that_order():
    from core.explain.triage import _prompt_key_order

    c = _reference("ref-0096")
    req = ChatRequest.from_dict(c)
    shows = _Setup(_template("hfjs-NousResearch-Hermes-2-Pro-Llama-3-8B-JSON-Schema.jinja"), req, "llama.cpp", {})
    assert _prompt_key_order(shows, ["arguments", "name"]).startswith('{"arguments": <args-dict>, "name"')
    assert _prompt_key_order(_Setup(_template(c["template"]), req, "llama.cpp", {}), ["arguments", "name"]) == ""
    ex, tg = _kept6("kept6-kept-vllm-5649-hermes2pro-call")
    assert tg.mistake == Mistake.TEMPLATE_MODEL_MISMATCH and tg.fixes[0].change == {"repairs": ["json-field-order"]}


def test_raw_line_breaks_in_a_string_of_the_templates_own_call_are_a_type_mismatch():
    ex, tg = _kept6("kept6-lfm2-multiline-string")
    assert tg.mistake == Mistake.TYPE_MISMATCH
    assert any("holds 3 raw line break(s)" in e for e in tg.evidence), tg.evidence
    assert [(e.kind, e.old, e.new) for e in tg.nearest.edits] == [("replace", "\n", "\\n")] * 3
    assert tg.fixes[0].change == {"repairs": ["pythonic-values"]}


def test_a_reasoning_block_the_analysis_did_not_find_gets_a_marker_override():
    ex, tg = _kept6("kept6-kept-doc-m1-two-searches")
    assert tg.mistake == Mistake.FORMAT_NOT_FOUND
    assert any("reasoning block `<think>` … `</think>`" in e and "found no reasoning markers" in e
               for e in tg.evidence), tg.evidence
    # the smallest change first: repair leading-think-block reads the block the template does not show; the
    # analysis override of the reasoning markers reads it too
    first = tg.fixes[0]
    assert first.kind.value == "repair" and first.change == {"repairs": ["leading-think-block"]}
    f = next(g for g in tg.fixes if g.kind.value == "override")
    assert f.change["overrides"]["reasoning.start"] == "<think>\n"
    for g in (first, f):
        assert len(g.message["tool_calls"]) == 2 and g.message["reasoning_content"]
    # a fix that leaves the `<think>` block in the content is not offered
    assert not any("<think>" in (g.message.get("content") or "") for g in tg.fixes)


def test_a_reasoning_opener_written_again_in_unfinished_reasoning_is_named_and_repaired():
    ex, tg = _kept6("kept6-r1-think-no-end")
    assert tg.mistake == Mistake.REOPENED_REASONING
    assert tg.fixes[0].change == {"repairs": ["reasoning-start-repeated"]}
    assert tg.fixes[0].message["reasoning_content"] == "This is a reasoning section"


@pytest.mark.parametrize("case_id,edit", [
    ("kept6-llama3-two-deep", ("delete", '; {"name": "complexTool"')),      # a whole second call
    ("kept6-kept3-deadreckoning-30-llama32-semicolon-calls", ("delete", '{"name": "slugify"')),  # the invented one
    ("kept6-glm-content-then-call", ("delete", "\n")),                      # the line break before `</tool_call>`
    ("kept6-cmd3-two-calls", ("delete", "first I think about foo")),        # text inside a glued marker sequence
])
def test_the_nearest_output_deletes_a_whole_call_or_what_the_parser_could_not_place(case_id, edit):
    ex, tg = _kept6(case_id)
    assert [(e.kind, e.old[:len(edit[1])]) for e in tg.nearest.edits] == [edit]


def test_one_string_escape_walker_serves_the_json_scans():
    from core.explain.triage import _Walk, _open_json_at_end, _walk

    state = _Walk()
    events = list(_walk('{"a": "x\\"}", \'b\': [1]', 0, 24, state, quotes="\"'"))
    assert [k for _i, k in events] == ["open", "string", "other", "string", "other", "string", "other", "open",
                                       "other", "close"]
    assert state.depth == 1 and not state.in_str
    assert [i for i, k in _walk("'a\nb' \"c\nd\"", 0, 11, _Walk(), quotes="'\"", inside=True) if k == "in"] == \
        [1, 2, 3, 7, 8, 9]
    assert _open_json_at_end('f {"a": [1, {"b": "x}"', ["f"]) == 3
    assert _open_json_at_end('f {"a": "x', ["f"]) == 0           # ends inside a string: not a cut after a value


# ------------------------------------------------------------------ eleventh round (written from kept8, now dev)

def _kept8(case_id: str):
    return _set_case("kept8.jsonl", "kept6-vllm-" + case_id)


def test_a_reply_under_a_prompt_that_always_opens_the_reasoning_gets_the_prompt_patch():
    # StepFun 3.5's generation prompt writes `<think>\n` whatever the request sets: a complete one-line reply is
    # no cut reasoning, and text before calls the output never put in a reasoning block is content
    ex, tg = _kept8("step3p5-stream-no-tools")
    assert tg.mistake == Mistake.REASONING_SETTING and tg.fixes[0].kind.value == "template"
    assert tg.fixes[0].change == {"template_patch": [["'<|im_start|>assistant\\n<think>\\n", "'<|im_start|>assistant\\n"]]}
    assert tg.fixes[0].message == {"role": "assistant", "content": "This is a test without tools"}
    ex, tg = _kept8("step3p5-no-content-between")
    assert tg.mistake == Mistake.REASONING_SETTING and tg.fixes[0].kind.value == "template"
    assert tg.fixes[0].message["content"] == "hello" and len(tg.fixes[0].message["tool_calls"]) == 2
    # text between the calls too: content-between-calls reads it and the second call (the prompt-opened `hello`
    # stays reasoning, so the engine's message is not reached; docs/fidelity-reasoning.md)
    ex, tg = _kept8("step3p5-mixed-content")
    assert tg.mistake == Mistake.REASONING_SETTING and tg.fixes[0].change == {"repairs": ["content-between-calls"]}
    assert len(tg.fixes[0].message["tool_calls"]) == 2 and tg.fixes[0].message["reasoning_content"] == "hello"
    # a reasoning opener written again after a prompt that opened it (Kimi K2.5): the Kimi K2 format's
    # reasoning-start-repeated repair reads it now, the smallest fix (the prompt patch was offered before it existed)
    ex, tg = _kept8("kimi-k2-r-think-tags")
    assert tg.mistake == Mistake.REOPENED_REASONING
    assert [(f.kind.value, f.change) for f in tg.fixes[:1]] == [("repair", {"repairs": ["reasoning-start-repeated"]})]
    assert tg.fixes[0].message["reasoning_content"] == "step by step reasoning"


def test_a_message_closer_is_no_cut_call_opener_and_kimis_thinking_kwarg_is_tried():
    ex, tg = _kept8("kimi-k3-message-close")
    assert tg.mistake == Mistake.REASONING_SETTING
    assert tg.fixes[0].change == {"request": {"chat_template_kwargs": {"thinking": False}}}
    assert tg.fixes[0].message == {"role": "assistant", "content": "Hello"}


def test_a_closer_nothing_opened_and_a_template_without_tools_are_a_template_model_mismatch():
    for case_id in ("ernie45-r-complete", "ernie45-r-with-think", "ernie45-r-multiline"):
        ex, tg = _kept8(case_id)
        assert tg.mistake == Mistake.TEMPLATE_MODEL_MISMATCH and not tg.fixes, case_id
        assert "`</think>`" in tg.sentence and "opens the reasoning" in tg.no_fix
    assert _kept8("ernie45-r-without-think")[1].mistake == Mistake.NONE      # no closer: a plain answer
    ex, tg = _kept8("ernie45-single")
    assert tg.mistake == Mistake.TEMPLATE_MODEL_MISMATCH and "never mentions a tool" in tg.sentence


def test_an_output_cut_inside_the_call_opener_is_cut_short():
    ex, tg = _kept8("minimax-m3-partial-start")
    assert tg.mistake == Mistake.CUT_SHORT
    assert "the first 21 characters of the call opener" in tg.sentence
    # improved fidelity returns the cut opener as text (cut-marker-text): the engine's message, the whole output
    assert [(f.change, f.message) for f in tg.fixes] == [({"fidelity": "improved"},
                                                         {"role": "assistant", "content": ex.output})]


def test_text_between_the_templates_own_call_blocks_is_trailing_text():
    for case_id in ("granite4-content-between", "granite4-complex"):
        ex, tg = _kept8(case_id)
        assert tg.mistake == Mistake.TRAILING_TEXT and "text between two calls" in tg.sentence, case_id


def test_a_separator_the_template_does_not_write_is_the_analysis_gap():
    # (the analysis found a format, with a separator the template does not write: the labelling guide's step 1)
    ex, tg = _kept8("minimax-multiple")
    assert tg.mistake == Mistake.ANALYSIS_MISREAD
    assert tg.sentence.startswith("the output writes its calls as the template's render of two calls does, `↵`")
    assert tg.fixes[0].change == {"fidelity": "improved"} and len(tg.fixes[0].message["tool_calls"]) == 2


def test_the_headline_names_one_mistake_and_the_rest_follow():
    ex, tg = _kept8("glm47-args-with-newlines")
    assert tg.sentence == "the model omitted `<arg_value>`"
    assert "; then " in tg.nearest.sentence
    assert any(e.startswith("the nearest accepted output also needs: the model wrote `↵`") for e in tg.evidence)


def test_a_repair_that_reads_the_call_and_one_that_reads_the_text_after_it_are_offered_together():
    # "no change of ours helps" was said while tag-whitespace read the call (text after it left the parse unclean);
    # then tag-whitespace was offered saying the parse stays unclean; content-between-calls now reads that text
    c = next(c for c in SETS["kept8.jsonl"] if c["id"] == "kept6-vllm-qwen3xml-surrounding-text")
    ex, tg = _run(c)
    assert tg.fixes and not tg.no_fix
    f = tg.fixes[-1]
    assert f.change == {"repairs": ["tag-whitespace", "content-between-calls"]}
    want, clean = apply_fix(_template(c["template"]), ChatRequest.from_dict(c), c["input"], c["fix"]["change"])
    assert clean and _same(f.message, want) and _same(f.message, c["engine_message"])


def test_a_fenced_call_is_offered_the_fenced_calls_repair_when_a_reasoning_repair_fires_first():
    # the real fenced output of kronk#950, read with Qwen3's template: all repairs on, a reasoning repair took the
    # text before fenced-calls could read it, so no repair was offered
    c = next(c for c in CASES if c["id"] == "kronk-950")
    t = _template("Qwen-Qwen3-0.6B.jinja")
    req = ChatRequest.from_dict(c)
    ex = explain(t, req, c["input"])
    s = _Setup(t, req, "llama.cpp", {})
    tg = triage(ex, s, _build(s), seconds=30.0, reexplain=explain)
    assert tg.mistake == Mistake.OMITTED_OPENER     # (the fence stands where `<tool_call>` belongs: the guide's step 4)
    assert tg.fixes[0].change == {"repairs": ["fenced-calls"]}
    assert json.loads(tg.fixes[0].message["tool_calls"][0]["function"]["arguments"]) == {"location": "Paris"}


def test_an_undeclared_argument_is_declared_with_the_type_of_its_value():
    # Kimi K3: `opts` written `type="object"` with `{"a": 1}`; declared a string it became the string '{"a": 1}',
    # and the response opener written again stayed in the content (the first fault by the labelling guide's order:
    # a repeated prompt tail, step 3, before the undeclared argument, step 5)
    c = next(c for c in SETS["kept7.jsonl"] if c["id"] == "kept7-sgl-kimik3-single")
    ex, tg = _run(c)
    assert tg.mistake == Mistake.REPEATED_PROMPT_TAIL
    assert any(e.startswith("a second fault, inside the call: ") and "`opts`" in e for e in tg.evidence), tg.evidence
    f = next(f for f in tg.fixes if f.kind.value == "request")
    assert f.change["request"]["type"] == {"python": {"opts": "object"}}
    assert f.change["request"]["chat_template_kwargs"] == {"thinking": True}
    assert json.loads(f.message["tool_calls"][0]["function"]["arguments"]) == {"code": "print(1)", "opts": {"a": 1}}
    assert f.message["content"] == "Let me run it." and _same(f.message, c["expect"])


def test_the_nearest_output_puts_in_the_whitespace_a_value_was_written_without():
    # Qwen3-Coder's `<parameter=city>Tokyo</parameter>` where the template writes a line break on each side: the
    # search put the whole `>\n` in again before the model's `>` (a value `>Tokyo`) or found nothing
    ex, tg = _kept8("qwen3xml-single")
    assert [(e.kind, e.new) for e in tg.nearest.edits] == [("insert", "\n"), ("insert", "\n")]
    assert json.loads(tg.nearest.message["tool_calls"][0]["function"]["arguments"]) == {"city": "Tokyo"}


def test_a_candidate_explain_lists_is_said_to_fix_nothing_when_the_triage_offers_none():
    # gpt-oss with a commentary filler after its calls: explain lists "parse at improved fidelity" (re-parsed clean,
    # calls read) while the triage said only "no change of ours helps" — both shown, a contradiction
    c = next(c for c in SETS["kept7.jsonl"] if c["id"] == "kept7-sgl-harmony-repeated-calls-filler")
    ex, tg = _run(c)
    assert not tg.fixes and any(fx.message.get("tool_calls") for fx in ex.fixes)
    assert "the candidate change listed with the explanation re-parses clean but fixes nothing: parse at improved " \
           "fidelity" in tg.no_fix
    assert "reads a call but leaves call markup in the content" in tg.no_fix


@pytest.mark.parametrize("bad, field", [
    ({"role": "assistant", "tool_calls": "get_weather"}, "tool_calls"),
    ({"role": "assistant", "tool_calls": [{"function": 5}]}, "tool_calls[0]"),
    ({"role": "assistant", "tool_calls": [{"function": {"name": ["a"], "arguments": "{}"}}]},
     "tool_calls[0].function.name"),
    ({"role": "assistant", "tool_calls": [{"function": {"name": "a", "arguments": [1]}}]},
     "tool_calls[0].function.arguments"),
    ({"role": "assistant", "content": ["part"]}, "content"),
])
def test_an_expected_message_of_another_shape_is_refused_by_field(bad, field):
    """The reproducers index tool_calls[i].function.name/arguments and strip content: an expected message of
    another shape was an internal TypeError (exit 3) on the CLI and an error box on the Explain page."""
    from core.errors import ExpectedMessageError
    from core.explain.reproducer import check_expected

    with pytest.raises(ExpectedMessageError) as e:
        check_expected(bad, "--expect e.json")
    assert e.value.field == field and str(e.value).startswith(f"expected message (--expect e.json, field '{field}')")
    ok = {"role": "assistant", "content": None,
          "tool_calls": [{"type": "function", "id": None, "function": {"name": "a", "arguments": {"x": 1}}}]}
    assert check_expected(ok) is ok


def test_cli_explain_refuses_a_malformed_expected_message_in_one_line(tmp_path):
    import subprocess
    import sys

    exp = tmp_path / "expect.json"
    exp.write_text(json.dumps({"role": "assistant", "tool_calls": "get_weather"}), encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "core", "explain", "assets/templates/chatml-think-tools.jinja",
                        "--request", "assets/requests/req.json", "--expect", str(exp), "--reproducer"],
                       input="hi", capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 2 and p.stdout == "", (p.returncode, p.stderr)
    assert p.stderr.strip().splitlines() == [f"error: expected message (--expect {exp}, field 'tool_calls'): "
                                             "expected a list of calls, got a string"]


@pytest.mark.parametrize("arguments", [
    '{"city": ' + '{"a":' * 3000 + '1' + '}' * 3000 + '}',     # a required argument there, nested deep
    '{"x": ' + '[' * 3000 + ']' * 3000 + '}',                   # the required argument missing
], ids=["required-argument-deep", "required-argument-missing"])
def test_arguments_nested_past_the_json_decoder_still_get_an_explanation(arguments):
    """The parser reads a call whose arguments nest deeper than Python's JSON decoder goes; explain decoded them
    for its schema checks and stopped with "input too large or nested too deeply (RecursionError)", so the
    maintainer got no explanation of an output the parser accepts."""
    out = '<tool_call>\n{"name": "get_weather", "arguments": ' + arguments + '}\n</tool_call>'
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Weather?"}], "enable_thinking": False,
                                 "tools": [{"type": "function", "function": {
                                     "name": "get_weather", "parameters": {
                                         "type": "object", "properties": {"city": {"type": "string"}},
                                         "required": ["city"]}}}]})
    ex = explain(_template("Qwen-Qwen3-0.6B.jinja"), req, out)
    assert [c["function"]["name"] for c in ex.message["tool_calls"]] == ["get_weather"]
    assert ex.triage is not None and ex.stop is None


def test_explain_json_says_what_the_text_says_of_a_clean_but_suspicious_parse(tmp_path):
    """A parse that accounts for every character but leaves a call-shaped object in the content is "clean but
    suspicious" in the text view and on the page; ``--json`` said ``"clean": true`` for it."""
    import subprocess
    import sys

    c = next(c for c in SETS["kept.jsonl"] if c["id"] == "kept-ollama-8517-r1-distill-nested-calls")
    req = tmp_path / "req.json"
    req.write_text(json.dumps({k: c[k] for k in ("messages", "tools") if k in c}), encoding="utf-8")
    cmd = [sys.executable, "-m", "core", "explain", str(TEMPLATES / c["template"]), "--request", str(req)]
    data = json.loads(subprocess.run(cmd + ["--json"], input=c["input"], capture_output=True, text=True, cwd=ROOT,
                                     timeout=120).stdout)
    assert (data["clean"], data["suspicious"], data["parse_clean"], data["verdict"]) == \
        (False, True, True, "clean but suspicious")
    assert data["triage"]["mistake"] == "TEMPLATE_MODEL_MISMATCH"
    text = subprocess.run(cmd, input=c["input"], capture_output=True, text=True, cwd=ROOT, timeout=120).stdout
    assert text.splitlines()[0].endswith("· parse clean but suspicious")


@pytest.mark.parametrize("value, kind", [('["Paris"]', "a JSON array"), ("5", "a number")])
def test_arguments_written_as_a_non_object_are_a_type_mismatch_not_a_missing_parameter(value, kind):
    """A hostile output whose call's arguments are JSON but no object: the parser shows the call with ``{}``, and
    triage and the causes said "missing required parameter" from that ``{}``; the mistake is the value's type."""
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Weather?"}], "tools": [weather]})
    t = _template("Qwen-Qwen2.5-7B-Instruct.jinja")
    ex = explain(t, req, '<tool_call>\n{"name": "get_weather", "arguments": ' + value + '}\n</tool_call>')
    assert ex.triage.mistake == Mistake.TYPE_MISMATCH, ex.triage.sentence
    assert f"the arguments of `get_weather` are {kind}, not an object" in ex.triage.sentence
    assert any(f"the arguments are {kind}, not an object" in e for f in ex.findings for e in f.evidence)
    empty = explain(t, req, '<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>')
    assert empty.triage.mistake == Mistake.MISSING_REQUIRED       # an object without `city` is what it says


# ---------------------------------------------------------- twelfth round (written from kept9 and kept10, now dev)

def _kept9(case_id: str):
    return _set_case("kept9.jsonl", case_id)


def _kept10(case_id: str):
    return _set_case("kept10.jsonl", case_id)


def test_a_json_body_inside_markup_the_template_never_writes_as_json_is_a_template_model_mismatch():
    # a JSON call object where the template writes a pythonic list (LFM2) or a name and <arg_key> pairs (GLM-4.7)
    # the repairs written since read both (json-calls-in-call-markers, json-call-in-tags): each is the first fix
    for (ex, tg), repair in ((_kept9("kept8-sgl-lfm2-json"), "json-calls-in-call-markers"),
                             (_kept10("kept9-mlx-glm47-json"), "json-call-in-tags")):
        assert tg.mistake == Mistake.TEMPLATE_MODEL_MISMATCH and not tg.no_fix
        assert tg.fixes[0].change == {"repairs": [repair]} and tg.fixes[0].message["tool_calls"]
        assert "a JSON call object" in tg.sentence and "writes no JSON keys" in tg.sentence
    # a DSML invoke's arguments as a JSON object, alone or after a call in the template's own shape
    for case_id in ("kept9-trt-dsv32-json-body", "kept9-trt-dsv4-json-body", "kept9-trt-dsv32-multiple",
                    "kept9-trt-dsv4-multiple"):
        ex, tg = _kept10(case_id)
        assert tg.mistake == Mistake.TEMPLATE_MODEL_MISMATCH, case_id
        assert tg.sentence.startswith("the output writes the arguments of `search_web` as a JSON object"), case_id


def test_text_before_a_call_only_a_repair_reads_under_a_prompt_that_always_opens_the_reasoning_is_the_setting():
    # StepFun 3.5 and MiniMax-M2 open `<think>` whatever the request sets; the output writes text, then a call whose
    # markup lacks the template's line breaks: the prompt patch with tag-whitespace reads the text as content
    for ex, tg in (_kept9("kept8-sgl-step35-canonical"),
                   _set_case("kept8.jsonl", "kept6-vllm-minimax-m2-content-before")):
        assert tg.mistake == Mistake.REASONING_SETTING
        assert tg.sentence.startswith("the parse files `")
        f = next(f for f in tg.fixes if f.kind.value == "template")
        assert f.change["repairs"] == ["tag-whitespace"] and f.message["content"] in ("prefix", "Let me check. ")
        assert "reasoning_content" not in f.message
    # (kept8-sgl-step35-interleaved, text between the calls too, is a known miss since content-between-calls reads
    # both of its calls: the triage names the text between them and offers that repair, which leaves `hello` in the
    # reasoning; SCORES["kept9.jsonl"] counts it)
    # thinking on (asked for, or left at llama.cpp's default): text then a call is a reasoning the model did not close
    ex, tg = _set_case("kept7.jsonl", "kept7-oll-qwen3-call-inside-thinking")
    assert tg.mistake == Mistake.REASONING_NOT_CLOSED
    # (read alone: with the engine's message, which has the text as content, it is the setting — seventeenth round)
    trt = _row("kept10.jsonl", "kept9-trt-minimax-single")
    assert _run_without_expect(trt)[1].mistake == Mistake.REASONING_NOT_CLOSED
    assert _run(trt)[1].mistake == Mistake.REASONING_SETTING


def test_a_foreign_control_token_before_a_call_with_its_own_slips_is_the_wrapper_and_both_repairs_are_offered():
    # Llama 3.2's bare JSON call behind Llama 3.1's `<|python_tag|>`, writing "arguments" for "parameters": the
    # wrapper is named first, and the alias repair alone (which leaves the token as the content) is no fix
    for case_id in ("kept8-sgl-llama32-python-tag", "kept8-sgl-llama32-text-before-tag"):
        ex, tg = _kept9(case_id)
        assert tg.mistake == Mistake.FOREIGN_WRAPPER, case_id
        assert tg.sentence.startswith("the model writes `<|python_tag|>` before the call")
        assert '`"arguments"`' in tg.sentence
        assert tg.fixes[0].change == {"repairs": ["python-code-markers", "arguments-key-alias"]}
        assert all("<|python_tag|>" not in (f.message.get("content") or "") for f in tg.fixes)
    # a token pair around the call (Llama 4's markers under Llama 3.1's template) stays another family's section
    assert _set_case("cases.jsonl", "vllm-16214")[1].mistake == Mistake.TEMPLATE_MODEL_MISMATCH


def test_whitespace_or_the_sections_opener_between_calls_the_template_writes_back_to_back_is_trailing_text():
    # Kimi K2 and DeepSeek V3.1 write their calls back to back; a line break (Kimi) or the section opener again
    # (DeepSeek) between them ends the calls llama.cpp reads after the first
    ex, tg = _kept10("kept9-trt-kimi-multiple")
    assert tg.mistake == Mistake.TRAILING_TEXT
    assert tg.sentence.startswith("after a call's closer the output writes `↵` and then `<|tool_call_begin|>` again, "
                                  "where the template's render of two calls writes nothing between them")
    ex, tg = _kept10("kept9-trt-dsv31-multiple")
    assert tg.mistake == Mistake.TRAILING_TEXT and "writes `<｜tool▁calls▁begin｜>` and then" in tg.sentence
    # other whitespace where the template writes some (a space for Qwen3.5's line break) stays a slip of the layout
    assert _set_case("cases.jsonl", "qwen35-9b-spaced-parallel-calls")[1].mistake == Mistake.OMITTED_MARKER


def test_the_reasoning_opener_written_again_after_text_is_reopened_reasoning_even_when_the_parse_is_clean():
    # StepFun 3.5's prompt opens `<think>`; the output writes `Intro` and then `<think>` again: the clean parse keeps
    # `Intro<think>reasoning` as the reasoning — no mistake-free reading, and no repair takes a later opener off
    ex, tg = _kept9("kept8-vllm-step35r-prefix-newline")
    assert ex.clean and ex.message["reasoning_content"] == "Intro<think>reasoning"
    assert tg.mistake == Mistake.REOPENED_REASONING and not tg.fixes
    assert "writes `Intro` and then opens it again with `<think>`" in tg.sentence
    assert "reasoning-start-repeated" in tg.no_fix


def test_a_prompt_opener_written_by_a_macro_call_is_patched_out_by_dropping_that_expression():
    # Kimi K3's generation prompt opens the think channel with `open_tag('think' if thinking else 'response')`, no
    # literal of the opener: the patch drops that one expression (the prompt renders as before without the opener)
    from core.explain.model import reasoning_markers
    from core.explain.triage import _prompt_opener_patch
    case = next(c for c in SETS["kept9.jsonl"] if c["id"] == "kept8-vllm-kimik3-xtml")
    ex, tg = _run(case)
    assert tg.mistake == Mistake.REOPENED_REASONING
    # the repair that reads the opener written again (reasoning-start-repeated) gives the same message for less, so
    # it is the fix offered; the patch is still found and still gives that message
    assert tg.fixes[0].change == {"repairs": ["reasoning-start-repeated"]}
    t, req = _template(case["template"]), ChatRequest.from_dict(case)
    s = _Setup(t, req, "llama.cpp", {})
    patch = _prompt_opener_patch(s, ex, {}, reasoning_markers(_build(s))[0].strip())
    assert patch is not None and patch[0] == [["{{- open_tag('think' if thinking else 'response') -}}", ""]]
    msg, _ = apply_fix(t, req, case["input"], {"template_patch": patch[0]})
    assert msg == tg.fixes[0].message == {"role": "assistant", "content": "answer", "reasoning_content": "step"}


def _row(set_name: str, case_id: str) -> dict:
    return next(c for c in SETS[set_name] if c["id"] == case_id)


@pytest.mark.parametrize("set_name, case_id, mistake, said, change", [
    # the template's markers all suffixed `:opensource`, the model's plain: a template/model mismatch, patched out
    ("kept11.jsonl", "kept10-vllm-hy3-zero-arg-inline", Mistake.TEMPLATE_MODEL_MISMATCH,
     "the template's markers each without `:opensource`",
     {"template_patch": [[":opensource", ""]], "repairs": ["tag-whitespace"]}),
    ("kept11.jsonl", "kept10-vllm-hy3-reasoning-multiline", Mistake.TEMPLATE_MODEL_MISMATCH,
     "`</think>` for `</think:opensource>`", {"template_patch": [[":opensource", ""]]}),
    # a reasoning closer first, no opener anywhere: the prompt the model was served with opened the reasoning
    ("kept11.jsonl", "kept10-trtllm-deepseek-r1-reasoning-2", Mistake.REASONING_SETTING,
     "closes the reasoning with `</think>` but never opens it",
     {"template_patch": [["'<｜Assistant｜>'}", "'<｜Assistant｜><think>\\n'}"]]}),
    # the stop token the template writes after a reply, kept in a clean answer
    ("kept12.jsonl", "kept12-vllm-23694-gptoss-finetune-final-channel-return-token", Mistake.TRAILING_TEXT,
     "the control token the template writes right after an assistant turn",
     {"server": "strip-stop-token", "output": '<|channel|>final<|message|>{"issues":[]}'}),
    # a call turn that runs on into the generation prompt again (the second fault since the nineteenth round: the
    # row relabelled by the guide's step 4, `<|python_tag|>` before the call first by position; the evidence stays)
    ("kept12.jsonl", "kept12-vllm-13530-llama31-405b-runs-past-eom", Mistake.FOREIGN_WRAPPER,
     "went on into a next assistant turn of its own",
     {"server": "stop-after-call", "output": '<|python_tag|>{"name": "get_weather", "parameters": {"location": '
      '"San Francisco, CA", "unit": "fahrenheit"}}', "repairs": ["python-code-markers"]}),
    # a foreign member right inside the template's own `<tool_call>`: no wrapper
    ("kept12.jsonl", "kept12-qwen3vl-870-qwen25vl-72b-alembic-for-closer", Mistake.FIELD_ALIAS,
     "a member the template's call never has", None),
    # markers the template writes only around a tool's result, kept in an answer
    ("kept11.jsonl", "kept10-ollama-deepseek-tool-output", Mistake.FOREIGN_WRAPPER,
     "control tokens the template writes only around a tool's result", None),
    # a bare JSON call naming a declared tool, under a template whose calls are no JSON: not a reasoning setting
    ("kept11.jsonl", "kept10-ollama-laguna-standalone-json-tool-call", Mistake.TEMPLATE_MODEL_MISMATCH,
     "as the call, in markup or bare, where the template's own render of that call writes no JSON keys",
     {"repairs": ["standalone-json-call", "template-default-thinking"]}),
    # another family's XML call under a template that renders no calls
    ("kept11.jsonl", "kept10-ollama-granite-thinking-tool-call", Mistake.TEMPLATE_MODEL_MISMATCH,
     "in tags (`<function=get_weather`) naming `get_weather`", None),
])
def test_the_thirteenth_rounds_rules(set_name, case_id, mistake, said, change):
    """Each rule of the thirteenth round on a row it reads (docs/explain.md "Thirteenth round of rules"): the mistake,
    its evidence, and the fix it offers (re-parsed) — or none, with the reason given."""
    changes = _round_rule(set_name, case_id, mistake, said, change)
    assert change is None or change in changes, changes


def _round_rule(set_name: str, case_id: str, mistake: Mistake, said: str, change: dict | None) -> list:
    """The changes the triage of a row offers, once its mistake and evidence are as a round's rule says (and, for
    ``change`` None, once it offers none and says why)."""
    _, tg = _run(_row(set_name, case_id))
    assert tg.mistake == mistake
    assert any(said in e for e in tg.evidence), tg.evidence
    if change is None:
        assert not tg.fixes and tg.no_fix
    return [f.change for f in tg.fixes]


@pytest.mark.parametrize("set_name,case_id,mistake,said,change", [
    # the wrapper's tokens only around the call: omitted, not stripped by a decoder (no keep-special-tokens offered)
    ("kept14.jsonl", "kept14-opencode-7083-qwen25coder-bare-json-todoread", Mistake.OMITTED_OPENER,
     "the model omitted both `<tool_call>` and its closer `</tool_call>`", {"repairs": ["unmarked-calls"]}),
    # the inner call without its wrapper: the closer is not a stripped stop string either
    ("kept13.jsonl", "kept11-ollama-qwen3coder-bare-function-call", Mistake.OMITTED_OPENER,
     "the output writes `<function=exec_command>` but neither `<tool_call>` nor `</tool_call>`",
     {"repairs": ["missing-closing-tags"]}),
    # the reasoning opener's first tag written without the rest of the marker (and the whole opener nowhere); the
    # improved fidelity reads it since the repair thought-label-omitted was written from kept11's misses
    ("kept13.jsonl", "kept11-vllm-gemma4-reasoning-reasoning", Mistake.OMITTED_MARKER,
     "the output opens with `<|channel>`, the template's reasoning opener `<|channel>thought` without `thought`",
     {"fidelity": "improved"}),
    # a turn header's control token written without the word the generation prompt writes after it: since the
    # sixteenth round the prompt's tail written again in part (the labelling guide's step 3)
    ("kept13.jsonl", "kept11-sglang-muse-glimmer-reasoning-self-then-user", Mistake.REPEATED_PROMPT_TAIL,
     "the output opens a turn with `<|start|>`, which the generation prompt already ends with as "
     "`<|start|>assistant`", None),
    # a complete call block in the reasoning the prompt opened: not cut
    ("kept13.jsonl", "kept11-vllm-dsv4-reasoning-tool-call-ends-reasoning", Mistake.REASONING_NOT_CLOSED,
     "a complete call block, and the output ends right after it: it was not cut", None),
    # the template's call markup, no tools sent: examined (a clean empty parse) and the analysis not quoted as a call
    ("kept14.jsonl", "kept14-cline-5393-gptoss-20b-recipient-without-functions-no-tools", Mistake.TOOLS_NOT_SENT,
     "words only the template's render of a call writes, then `<|message|>` and a JSON object", None),
    ("kept14.jsonl", "kept14-kilocode-1775-gptoss-20b-recipient-without-functions-no-tools", Mistake.TOOLS_NOT_SENT,
     "but not `assistant␣to=functions.` before the tool's name", None),
])
def test_the_fourteenth_rounds_rules(set_name, case_id, mistake, said, change):
    """Each rule of the fourteenth round on a row it reads (docs/explain.md "Fourteenth round of rules")."""
    changes = _round_rule(set_name, case_id, mistake, said, change)
    assert change is None or changes == [change], changes


@pytest.mark.parametrize("set_name,case_id,mistake,said,change", [
    # a parameter the tool does not declare, written in the template's own markup (its declared name written too:
    # no schema edit offered)
    ("kept21.jsonl", "kept18-aphrodite-minicpm5-properties-wrapped-arguments", Mistake.UNKNOWN_PARAMETER,
     "the call's markup is the template's, only the parameter is not the schema's", None),
    ("kept21.jsonl", "kept18-aphrodite-minicpm5-arguments-wrapped-arguments", Mistake.UNKNOWN_PARAMETER,
     "names an argument `arguments`, which `get_weather`'s schema does not declare", None),
    # the prompt's tail written again in part
    ("kept22.jsonl", "kept19-vllmmlx-harmony-single-tool-call", Mistake.REPEATED_PROMPT_TAIL,
     "which the generation prompt already ends with as `<|start|>assistant`", None),
    # text before the call, then text after it: the first by position
    ("kept21.jsonl", "kept18-aphrodite-llama3-json-simple-surrounding-text", Mistake.LEADING_TEXT,
     "after the text `Here␣is␣the␣result:`", None),
    # a control token before the call (step 4) before a key alias inside it (step 5)
    ("kept19.jsonl", "kept16-dynamo-llama3-json-case1-single-call", Mistake.FOREIGN_WRAPPER,
     "comes before the fault inside the call (field-name alias)",
     {"repairs": ["python-code-markers", "arguments-key-alias"]}),
    # omitted whitespace (step 4) before a missing required parameter (step 5)
    ("kept21.jsonl", "kept18-aphrodite-step3p5-streaming-multi-token-chunk-boundary", Mistake.OMITTED_MARKER,
     "read with `state` not required the output still does not parse clean; with the whitespace",
     {"repairs": ["missing-required-argument", "tag-whitespace"]}),
    # a closer written last: not cut (the one-edit nearest output names the closers left out before it)
    ("kept22.jsonl", "kept19-mlxomni-qwen3moe-malformed-xml", Mistake.OMITTED_CLOSER,
     "the model omitted `</parameter>↵</function>` before `</tool_call>`", None),
    # whitespace added inside the markup
    ("kept22.jsonl", "kept19-mlxomni-qwen3moe-tool-call-with-whitespace", Mistake.OMITTED_MARKER,
     "the markup is the template's but for that whitespace", {"repairs": ["tag-whitespace"]}),
    # a next call begun where the template writes the call's closer (the repair calls-in-one-block reads it)
    ("kept22.jsonl", "kept19-vllmmlx-gemma4-multiple-calls-one-block", Mistake.OMITTED_CLOSER,
     "where the template writes `<tool_call|>` to end the call, the output begins another with `call:`",
     {"repairs": ["calls-in-one-block"]}),
    # the reasoning opener's first tag after plain text
    ("kept21.jsonl", "kept18-aphrodite-gemma4-reasoning-new-line", Mistake.OMITTED_MARKER,
     "the template's reasoning opener `<|channel>thought` without `thought`", {"fidelity": "improved"}),
])
def test_the_sixteenth_rounds_rules(set_name, case_id, mistake, said, change):
    """Each rule of the sixteenth round on a row it reads (docs/explain.md "Sixteenth round of rules")."""
    changes = _round_rule(set_name, case_id, mistake, said, change)
    assert change is None or change in changes, changes


def test_the_sixteenth_round_keeps_the_second_fault_and_reads_no_decoder_fault_where_tokens_are_intact():
    # `<|python_tag|>` before a call, then the turn run on: the wrapper first, the server's stop still offered
    _, tg = _run(_row("kept22.jsonl", "kept19-mlxomni-llama3-invalid-responses-4"))
    assert tg.mistake == Mistake.FOREIGN_WRAPPER
    assert any("`<|python_tag|>` right before the call" in e for e in tg.evidence), tg.evidence
    assert [f.change.get("server") for f in tg.fixes] == ["stop-after-call"]
    # a bare Gemma 4 call whose `<|"|>` tokens are kept: the model omitted the opener, no decoder dropped it
    _, tg = _run(_row("kept22.jsonl", "kept19-rapidmlx-gemma4-bare-call-json-string-with-brace"))
    assert tg.mistake == Mistake.OMITTED_OPENER
    assert not any("detokenized" in e for e in tg.evidence), tg.evidence
    # a template that writes the reply before its calls has a place for text there: text after the call stays
    _, tg = _run(_row("kept9.jsonl", "kept8-sgl-minicpm5-single"))
    assert tg.mistake == Mistake.TRAILING_TEXT
    # llama.cpp's own case with its argument renamed (ref-0118 in the unknown-parameter test) keeps its schema edit;
    # an undeclared name beside a declared one gets none
    _, tg = _run(_row("kept21.jsonl", "kept18-aphrodite-minicpm5-extra-arguments-ignored-when-required-present"))
    assert tg.mistake == Mistake.UNKNOWN_PARAMETER and not tg.fixes
    assert tg.no_fix.startswith("`get_weather` does not take `unknown`: declaring it in the request"), tg.no_fix


@pytest.mark.parametrize("set_name,case_id,mistake,said,change", [
    # another turn's closer after an answer: the history's `<|end|>` (improved fidelity reads it since the repair
    # message-closer-at-end was written from kept23's misses), a call turn's `<|call|>` (none helps)
    ("kept26.jsonl", "kept23-ovms-harmony-final-end", Mistake.TRAILING_TEXT,
     "the answer ends with `<|end|>`, the control token the template writes after an answer in the conversation's "
     "history", {"fidelity": "improved"}),
    ("kept26.jsonl", "kept23-ovms-harmony-final-call-closer", Mistake.TRAILING_TEXT,
     "the answer ends with `<|call|>`, the control token the template's call turn ends with", None),
    # whitespace around an offered name: markup, not an unknown tool
    ("kept26.jsonl", "kept23-ovms-devstral-spaced-call-no-eos", Mistake.OMITTED_MARKER,
     "the output writes whitespace before the declared tool's name `example_tool` and after it", None),
    # the template's own call marker is no wrapper: a call head ending in the turn's end token, a line break left out
    ("kept26.jsonl", "kept23-ovms-devstral-call-empty-args", Mistake.CUT_SHORT,
     "after the call's head, where the template writes the arguments, only `</s>` (the turn's end) follows", None),
    ("kept26.jsonl", "kept23-ovms-qwen3-three-calls-after-think", Mistake.OMITTED_MARKER,
     "the output writes the template's own marker `<tool_call>` (no wrapper) without the whitespace",
     {"repairs": ["tag-whitespace"]}),
    # argument markers replaced by a JSON body inside the template's own call head
    ("kept25.jsonl", "kept22-smg-dsml-v32-direct-json", Mistake.OMITTED_MARKER,
     "the call's argument markers replaced by another string", {"repairs": ["json-arguments-body"]}),
    # a second call block in the template's own markup after the first: text after the turn's end (none helps)
    ("kept25.jsonl", "kept22-smg-m3-parallel-tool-blocks", Mistake.TRAILING_TEXT,
     "after the complete call block the output opens the template's own call markup again", None),
    # text after the calls the parse read: not another format
    ("kept26.jsonl", "kept23-ovms-qwen3coder-old-parser-call-between-prose", Mistake.TRAILING_TEXT,
     "after the call's closer the output writes `After`: text after a complete call",
     {"repairs": ["content-between-calls"]}),
])
def test_the_eighteenth_rounds_rules(set_name, case_id, mistake, said, change):
    """Each rule of the eighteenth round on a row it reads (docs/explain.md "Eighteenth round of rules")."""
    changes = _round_rule(set_name, case_id, mistake, said, change)
    assert change is None or change in changes, changes


@pytest.mark.parametrize("case_id,said", [
    ("kept14-roo-11219-qwen3-coder-next-call-without-opener-or-closers",
     "(`<function`, `<parameter` never closed), which none of our repairs reads — with `</parameter></function>` "
     "appended, the repairs read the call"),
    ("kept14-opencode-4428-qwen3coder-30b-function-without-wrapper", "(`<function` never closed)"),
    ("kept14-openinterpreter-1577-qwen25coder-32b-bare-json-bad-escape",
     "the call's JSON writes `\\P`, a backslash escape JSON does not have"),
])
def test_none_helps_names_what_stops_the_repairs_not_the_opener(case_id, said):
    _, tg = _run(_row("kept14.jsonl", case_id))
    assert tg.mistake == Mistake.OMITTED_OPENER and not tg.fixes
    assert tg.no_fix.startswith("what stops the repairs is not the opener") and said in tg.no_fix, tg.no_fix


def test_a_function_named_in_prose_is_no_call_of_another_syntax():
    from core.explain.triage import _py_call_statement

    assert _py_call_statement("We need to describe resetGame() function.", []) is None
    assert _py_call_statement("Sure.\nget_weather(city='Paris')", []) == 6
    assert _py_call_statement("I will call get_weather(city='Paris')", ["get_weather"]) == 12


def test_the_labelling_guides_causes_are_named_documented_and_say_what_a_maintainer_does():
    """The three causes the labelling guide added: in the taxonomy with their sentences, in the causes table of
    docs/explain.md (with the guide's section), and each with a "none helps" reason naming what would fix it."""
    assert (Mistake.LEADING_TEXT.value, Mistake.REPEATED_PROMPT_TAIL.value, Mistake.ANALYSIS_MISREAD.value) == (
        "text before the call the format does not allow", "the output repeats the generation prompt's tail",
        "the analysis misread the template's own format")
    doc = (ROOT / "docs" / "explain.md").read_text(encoding="utf-8")
    table = doc[doc.index("### The causes"):doc.index("### Labelling guide: a decision order")]
    assert all(f"| `{m.name}` |" in table for m in Mistake if m != Mistake.NONE)
    ex = type("Ex", (), {"message": {"content": "hi"}})()
    assert "override" in _why_none(Mistake.ANALYSIS_MISREAD, None, ex)
    assert "repeated-prompt-tail" in _why_none(Mistake.REPEATED_PROMPT_TAIL, None, ex)
    assert "calls-after-text" in _why_none(Mistake.LEADING_TEXT, None, ex)


# The labelling guide's decision order (docs/explain.md "Labelling guide: a decision order"), on dev rows the guide
# relabelled: each new reading from the parse, the analysis and the template's renders, never a family name


def test_relabelled_rows_keep_the_label_the_second_labeller_saw_and_say_which_step_decided():
    rows = [c for cases in SETS.values() for c in cases if "cause_before_guide" in c]
    # 41 by the fifteenth round; Muse Glimmer's three headers without `assistant` by the sixteenth (step 3); dynamo's
    # Gemma 4 lone `<channel|>` by the seventeenth (step 2's clarification); localharness-104, kept6's InternLM2 and
    # kept12's Llama 3.1 run past `<|eom_id|>` by the nineteenth (step 4); kept11's Gemma 4 line break between calls
    # by the twentieth (step 4's whitespace clarification)
    assert len(rows) == 49
    assert all(c["cause"] != c["cause_before_guide"] and "relabelled by the labelling guide's step " in c["note"]
               for c in rows)


def test_the_prompts_tail_written_again_is_a_repeated_prompt_tail_and_the_repair_that_skips_it_is_offered():
    # Kimi K3 with thinking off: the prompt ends `<|open|>response<|sep|>`, the output opens it again (step 3)
    ex, tg = _run(_row("kept16.jsonl", "kept14-xinference-kimik3-tool-response-without-tools"))
    assert tg.mistake == Mistake.REPEATED_PROMPT_TAIL
    assert tg.sentence == ("the output begins with `<|open|>response<|sep|>`, which the generation prompt already "
                           "ends with: the model wrote the prompt's tail again")
    assert [f.change for f in tg.fixes][:1] == [{"repairs": ["repeated-prompt-tail"]}]
    assert tg.to_json()["mistake_text"] == "the output repeats the generation prompt's tail"
    # the reasoning opener written again stays re-opened reasoning (the same template, thinking left on)
    _ex, tg = _run(_row("kept16.jsonl", "kept14-xinference-kimik3-reasoning-and-response"))
    assert tg.mistake == Mistake.REOPENED_REASONING


def test_the_templates_own_call_after_a_prompt_that_wrote_its_first_piece_is_an_analysis_misread():
    # Xinference's DeepSeek V3.1 copy: the analysis takes the padded `</think>` the prompt ends with for the section
    # opener; the output writes every other piece of the template's call (step 1)
    _ex, tg = _run(_row("kept18.jsonl", "kept15-xinference-dsv31-single-call"))
    assert tg.mistake == Mistake.ANALYSIS_MISREAD
    assert "the generation prompt already ends with `</think>`" in tg.evidence[-1]
    assert "the analysis found a format, but not the one the template renders (its section opener `</think>" \
        in tg.evidence[-1]
    assert [f.change for f in tg.fixes] == [{"fidelity": "improved"}]


def test_a_separator_the_analysis_learned_that_the_template_does_not_write_is_an_analysis_misread():
    _ex, tg = _run(_row("kept8.jsonl", "kept6-vllm-minimax-multiple"))
    assert tg.mistake == Mistake.ANALYSIS_MISREAD and [f.change for f in tg.fixes] == [{"fidelity": "improved"}]


def test_text_before_a_whole_call_the_turn_starts_with_is_leading_text():
    # Command 4's action block after prose; the stand-in template's call turn is the action block alone (step 4)
    _ex, tg = _run(_row("kept16.jsonl", "kept14-sglang-cohere4-streaming-text-then-block"))
    # the repair action-after-text (SGLang's Command 4 detector reads an action block after text) is the fix
    assert tg.mistake == Mistake.LEADING_TEXT
    assert [f.change["repairs"] for f in tg.fixes] == [["bare-answer-after-reasoning", "action-after-text"]]
    assert "after the text `Let␣me␣check.`; from `<|START_ACTION|>` on, the output parses clean to 1 call(s)" \
        in tg.evidence[-1]


def test_whitespace_mis_decoded_at_every_tag_token_is_the_decoders_fault():
    # MiniCPM5: `<functionĠname=` (the byte-level mark left undecoded), `<paramname=` (the space lost) (step 2)
    _ex, tg = _run(_row("kept15.jsonl", "kept13-vllm-minicpm5-collapsed-param-tags-tokenizer-space-function"))
    # the repair tag-attribute-space (vLLM's MiniCPM5 parser reads both spellings) is the fix
    assert tg.mistake == Mistake.SPECIAL_TOKENS_STRIPPED
    assert [f.change for f in tg.fixes] == [{"repairs": ["tag-attribute-space"]}]
    # (the nearest output, found since the search puts a literal's whitespace back, adds its other edits after it)
    assert any("every `<function` is followed by `Ġname=` (the byte-level mark of `␣`, left undecoded)" in e
               and "every `<param` is followed by `name=` glued to it (the `␣` lost)" in e for e in tg.evidence)


def test_an_omitted_opener_wins_over_the_wrapper_standing_in_its_place():
    # goose#2926: Qwen2.5's JSON call in a ```json fence where the template writes `<tool_call>` (step 4)
    _ex, tg = _run(_row("kept17.jsonl", "kept17-goose-2926-qwen25coder-32b-fenced-json-call-in-prose"))
    assert tg.mistake == Mistake.OMITTED_OPENER
    # (the nearest output, found since it may delete the fence's halves, adds its other edits after this line)
    assert any("the template's opener `<tool_call>` is not written" in e for e in tg.evidence), tg.evidence
    # Hy v4's markers are the template's own: the missing `<tool_sep:opensource>` is the fault, not a wrapper
    _ex, tg = _run(_row("kept15.jsonl", "kept13-vllm-hy-v4-value-coercion-s-beijing"))
    assert tg.mistake == Mistake.OMITTED_MARKER and "but not `<tool_sep:opensource>`" in tg.evidence[-1]


@pytest.mark.parametrize("case_id, edits", [
    # Qwen3-Coder's last value runs on into `</tool_call>`: the closers the render writes before it, put in
    ("kept19-mlxomni-qwen3moe-malformed-xml", [("insert", "</parameter>\n</function>\n")]),
    # GLM-4.5's last `<arg_value>` unclosed, a line break before `</tool_call>`: the closer in place of it
    ("kept19-mlxomni-glm45-malformed-xml", [("replace", "</arg_value>")]),
    # Gemma 4's two calls in one block: closer and opener at the place the second call starts
    ("kept19-vllmmlx-gemma4-multiple-calls-one-block", [("insert", "<tool_call|><|tool_call>")]),
    # Llama 3.1's call inside `<response>` … `</response>` with "arguments": both halves deleted, the key renamed
    # (listed in output order: `<response>`, the key, `</response>`)
    ("kept19-mlxomni-llama3-invalid-responses-3", [("delete", ""), ("replace", '"parameters"'), ("delete", "")]),
])
def test_nearest_output_edit_kinds_of_the_stop_point_and_the_render(case_id, edits):
    _ex, tg = _run(_row("kept22.jsonl", case_id))
    assert tg.nearest is not None
    assert [(e.kind, e.new) for e in tg.nearest.edits] == edits
    assert tg.nearest.message.get("tool_calls")


def test_nearest_output_deletes_the_text_after_the_call_where_the_output_should_end():
    # Llama 3.1: `Here is the result: {…} Would you like to know more?` — the text after the call, with its space
    _ex, tg = _run(_row("kept21.jsonl", "kept18-aphrodite-llama3-json-simple-surrounding-text"))
    assert [(e.kind, e.old) for e in tg.nearest.edits] == [("delete", " Would you like to know more?")]
    assert tg.nearest.message["content"] == "Here is the result: "


def test_a_call_id_of_another_shape_says_no_repair_reads_it_not_that_the_arguments_are_cut():
    # the "none helps" reason of CALL_ID_SHAPE claimed "the call's arguments are not complete" for every call (exo's
    # sanitised Kimi ids `functions_get_weather_1`, whose arguments are whole)
    ex = type("Ex", (), {"message": {"content": ""}})()
    why = _why_none(Mistake.CALL_ID_SHAPE, None, ex)
    assert "not complete" not in why and "no repair of ours reads an id of that shape" in why


def test_a_marker_of_the_templates_own_written_where_another_belongs_is_no_misspelling_of_it():
    # DeepSeek V3.1's call opener `<｜tool▁call▁begin｜>` with the section opener `<｜tool▁calls▁begin｜>` before it left
    # out: the triage said "it left `s` out of the template's marker" (the opener is whole, one of the template's own)
    _ex, tg = _run(_row("kept23.jsonl", "kept20-sglang-dsv31-prefix-then-bare-call"))
    assert tg.mistake == Mistake.OMITTED_OPENER
    assert not any("out of the template's marker" in e for e in tg.evidence), tg.evidence
    # (the nearest output, found since the search puts the opener before the format's own markup, tells it)
    assert tg.sentence.startswith("the model omitted `<｜tool▁calls▁begin｜>` before `<｜tool▁call▁begin｜>")


# The seventeenth round of rules (docs/explain.md "Seventeenth round of rules"): the user's expected message decides
# where the output alone leaves two readings, and the structural rules written from the development misses


def _run_without_expect(case: dict):
    return _run({k: v for k, v in case.items() if k != "expect"})


def test_the_expected_message_decides_text_before_a_call_is_content_not_reasoning_left_open():
    # SGLang's MiniMax-M2 detector test: `Let me look that up. <minimax:tool_call>…` under a prompt that always opens
    # `<think>`; the engine ran no reasoning step, so its message has the text as content
    c = _row("kept23.jsonl", "kept20-sglang-minimax-m2-leading-text")
    _ex, alone = _run_without_expect(c)
    assert alone.mistake == Mistake.REASONING_NOT_CLOSED
    assert all(f.gives_expected is None and f.expected_words() == "" for f in alone.fixes)
    _ex, tg = _run(c)
    assert tg.mistake == Mistake.REASONING_SETTING
    assert tg.sentence.startswith("the expected message has `Let␣me␣look␣that␣up.` as its content and no "
                                  "reasoning")
    assert any(e.startswith("the output alone reads as reasoning never closed: ") for e in tg.evidence)
    # the fix that gives the expected message first (the template no longer opens `<think>`), then the repair that
    # reads the call but keeps the text as reasoning, each saying which
    assert [(f.kind, f.gives_expected) for f in tg.fixes] == [(TriageFixKind.TEMPLATE, True),
                                                              (TriageFixKind.REPAIR, False)]
    assert tg.fixes[0].message["content"] == "Let me look that up. "
    assert tg.fixes[1].to_json()["gives_expected"] is False
    assert tg.fixes[1].expected_words() == "does not give the expected message"


def test_the_expected_message_decides_with_the_repairs_a_second_fault_needs():
    # Xinference's GLM-5 `Before <tool_call>…</tool_call> after`: the text is content in the expected message; the
    # prompt patched not to open `<think>`, with content-between-calls for the text after the call, gives it
    c = _row("kept16.jsonl", "kept14-xinference-glm5-preserves-surrounding-text")
    _ex, tg = _run(c)
    assert tg.mistake == Mistake.REASONING_SETTING
    first = tg.fixes[0]
    assert first.gives_expected and first.kind == TriageFixKind.TEMPLATE
    assert first.change["repairs"] == ["content-between-calls"] and first.message["content"] == "Before  after"


def test_the_expected_message_files_markerless_text_as_reasoning():
    # aphrodite's Seed-OSS: a plain sentence with no reasoning marker, reasoning in the engine's message
    c = _row("kept21.jsonl", "kept18-aphrodite-seedoss-no-tokens")
    _ex, alone = _run_without_expect(c)
    assert alone.mistake == Mistake.NONE
    _ex, tg = _run(c)
    assert tg.mistake == Mistake.REASONING_SETTING
    assert "neither `<seed:think>` nor `</seed:think>`" in tg.sentence
    assert [f.change for f in tg.fixes] == [{"repairs": ["reasoning-end-without-start"]}] and tg.fixes[0].gives_expected


def test_without_an_expected_message_nothing_changes_where_the_expected_message_agrees():
    # a row whose reading the expected message confirms (Qwen3's missing line breaks): the same mistake and fixes
    # either way, each fix now saying it gives the expected message
    c = _row("kept23.jsonl", "kept20-lmdeploy-required-two-calls")
    _ex, alone = _run_without_expect(c)
    _ex, tg = _run(c)
    assert tg.mistake == alone.mistake == Mistake.OMITTED_MARKER
    assert [f.change for f in tg.fixes] == [f.change for f in alone.fixes]
    assert tg.fixes[0].gives_expected is True


def test_a_fix_that_reads_no_call_is_dropped_when_the_expected_message_has_calls():
    # SGLang's MiniMax-M2 `[Pasted ~4 lines]<minimax:tool_call>…` with no section closer: read alone, improved
    # fidelity is offered though it leaves the call unread (the nearest output is not found, so nothing says the
    # output writes a call); the expected message has the call, so that fix is none and the fix that gives it stays
    c = _row("kept7.jsonl", "kept7-sgl-minimaxm2-unclosed-section")
    _ex, alone = _run_without_expect(c)
    assert alone.nearest is None and any(not f.message.get("tool_calls") for f in alone.fixes)
    _ex, tg = _run(c)
    assert tg.fixes and all(f.message.get("tool_calls") for f in tg.fixes)
    assert tg.fixes[0].gives_expected and tg.fixes[0].change["template_patch"]


@pytest.mark.parametrize("case_id", ["kept20-sglang-gptoss-text-before-call",
                                     "kept20-sglang-gptoss-stream-text-then-call"])
def test_reply_text_written_bare_where_the_template_writes_it_behind_an_opener_is_the_omitted_opener(case_id):
    # gpt-oss renders a call turn's text as `<|channel|>analysis<|message|>…<|end|>` before the call; SGLang's tests
    # write it bare before `<|start|>assistant<|channel|>commentary to=functions.…`: not another family's format
    _ex, tg = _run(_row("kept23.jsonl", case_id))
    assert tg.mistake == Mistake.OMITTED_OPENER
    assert tg.sentence.startswith("the model omitted `<|channel|>analysis<|message|>` before ")


def test_a_bare_call_the_parser_kept_as_text_is_the_omitted_opener_not_no_mistake():
    # SGLang's DeepSeek V3.2 test: a bare `<｜DSML｜invoke …>` after text, no `<｜DSML｜function_calls>` before it
    _ex, tg = _run(_row("kept23.jsonl", "kept20-sglang-dsv32-preamble-bare-invoke"))
    assert tg.mistake == Mistake.OMITTED_OPENER
    assert tg.sentence.startswith("the model omitted `<｜DSML｜function_calls>` before `<｜DSML｜invoke")   # the nearest output's
    assert tg.fixes[0].change == {"repairs": ["call-section-omitted", "tag-whitespace"]}


def test_a_lone_call_section_closer_after_an_answer_is_text_after_the_answer():
    # SGLang's Kimi K2 test: `normal text<|tool_calls_section_end|>`, no call opened
    _ex, tg = _run(_row("kept23.jsonl", "kept20-sglang-kimik2-stray-section-end"))
    assert tg.mistake == Mistake.TRAILING_TEXT and not tg.fixes
    assert "a closer of the template's call format that no opener in the output opened" in tg.sentence
    assert "lone `<|tool_calls_section_end|>`" in tg.no_fix


def test_a_control_token_gone_at_every_place_the_call_writes_it_is_the_decoders():
    # vLLM's Gemma 4 test: `call:get_weather{location:London}` — both `<|"|>` gone, `<|tool_call>` kept
    c = _row("kept23.jsonl", "kept20-vllm-gemma4-required-stream-unquoted-value")
    _ex, tg = _run(c)
    assert tg.mistake == Mistake.SPECIAL_TOKENS_STRIPPED
    assert "omitted `true`" not in tg.sentence and "at 2 places inside the call" in tg.sentence
    server = [f for f in tg.fixes if f.kind == TriageFixKind.SERVER]
    assert server and server[0].change["output"] == c["fix"]["change"]["output"]
    # a plain quote standing where the token goes is the token replaced: the omission of step 4 (kept2's reports)
    for case_id in ("kept2-llamacpp-22786-gemma4-plain-quotes", "kept2-omlx-581-gemma4-bash-plain-quotes"):
        assert _run(_row("kept2.jsonl", case_id))[1].mistake == Mistake.OMITTED_MARKER


@pytest.mark.parametrize("set_name, case_id, second", [
    ("kept24.jsonl", "kept21-tabby-glm45-surrounding-text", "text after the call the format does not allow"),
    ("kept24.jsonl", "kept21-tabby-glm45-unclosed-arg-value", "`</arg_value>` left out"),
    ("kept22.jsonl", "kept19-mlxomni-glm45-malformed-xml", "`</arg_value>` left out"),
])
def test_whitespace_written_inside_the_first_call_comes_before_a_later_fault(set_name, case_id, second):
    # GLM-4.5's `<tool_call>get_weather↵<arg_key>…`: its render writes the name glued to `<arg_key>`; the line break
    # is the first fault by position, before the text between the calls or the unclosed value
    _ex, tg = _run(_row(set_name, case_id))
    assert tg.mistake == Mistake.OMITTED_MARKER
    assert tg.sentence.startswith("the output writes `↵` after `get_weather` at output position ")
    assert tg.sentence.endswith(f"(the second, later in the output: {second})")


def test_a_missing_line_break_after_the_opener_comes_before_swapped_json_keys():
    # lmdeploy's Qwen3 `<tool_call>{"arguments":…,"name":…}</tool_call>after`: first by position, the line break
    _ex, tg = _run(_row("kept18.jsonl", "kept15-lmdeploy-qwen3-trailing-text-after-atomic-tool-close"))
    assert tg.mistake == Mistake.OMITTED_MARKER
    # the nearest output's sentence, its move of the member the evidence's second line
    assert tg.sentence.startswith('the model omitted `↵` before `{"arguments"')
    assert any('the member `"name"` after `"arguments"`' in e for e in tg.evidence), tg.evidence
    # with the line break written, the swapped keys stay another format (kept6's Hermes 2 Pro report)
    assert _run(_row("kept6.jsonl", "kept6-kept-vllm-5649-hermes2pro-call"))[1].mistake == \
        Mistake.TEMPLATE_MODEL_MISMATCH


def test_cli_says_on_each_fix_whether_it_gives_the_expected_message(tmp_path):
    import subprocess
    import sys

    c = _row("kept23.jsonl", "kept20-sglang-minimax-m2-leading-text")
    req = tmp_path / "req.json"
    req.write_text(json.dumps({k: c[k] for k in ("messages", "tools", "enable_thinking")}), encoding="utf-8")
    exp = tmp_path / "expect.json"
    exp.write_text(json.dumps(c["expect"]), encoding="utf-8")
    cmd = [sys.executable, "-m", "core", "explain", str(TEMPLATES / c["template"]), "--request", str(req),
           "--expect", str(exp)]
    env = {**os.environ, "CTE_EXPLAIN_BUDGET_S": "30"}
    text = subprocess.run(cmd, input=c["input"], capture_output=True, text=True, cwd=ROOT, timeout=120, env=env).stdout
    assert "mistake: reasoning setting does not match the output — the expected message has" in text
    assert "  1. [template] patch the template" in text and "     gives the expected message" in text
    assert "     does not give the expected message" in text
    data = json.loads(subprocess.run(cmd + ["--json"], input=c["input"], capture_output=True, text=True, cwd=ROOT,
                                     timeout=120, env=env).stdout)
    assert [f["gives_expected"] for f in data["triage"]["fixes"]] == [True, False]


@pytest.mark.parametrize("set_name, case_id, kind", [
    # vLLM's Nemotron test with no reasoning parser: `<think>…</think>` kept in the content beside the call
    ("kept15.jsonl", "kept13-vllm-nemotron-json-keeps-think-block-as-content", TriageFixKind.REQUEST),
    # ollama's Qwen3-VL with thinking off at run time: `plan</think>answer` the whole content
    ("kept16.jsonl", "kept14-ollama-qwen3vl-toggle-thinking-disabled-at-runtime", TriageFixKind.TEMPLATE),
])
def test_a_reasoning_block_the_expected_message_keeps_as_content_is_the_reasoning_setting(set_name, case_id, kind):
    c = _row(set_name, case_id)
    assert _run_without_expect(c)[1].mistake == Mistake.NONE
    _ex, tg = _run(c)
    assert tg.mistake == Mistake.REASONING_SETTING
    assert tg.sentence.startswith("the expected message keeps ") and "with the reasoning's markers" in tg.sentence
    assert tg.fixes[0].kind == kind and tg.fixes[0].gives_expected




@pytest.mark.parametrize("set_name, case_id, edits", [
    # the generation prompt's header written again (gpt-oss), and after text of the model's own
    ("kept23.jsonl", "kept20-sglang-gptoss-single-call",
     [("delete", "<|start|>assistant", ""), ("delete", "<|call|>", "")]),
    ("kept23.jsonl", "kept20-sglang-gptoss-text-before-call",
     [("insert", "", "<|channel|>analysis<|message|>"), ("insert", "", "<|end|>"), ("delete", "<|call|>", "")]),
    ("kept24.jsonl", "kept21-exo-dsml-thinking-then-call", [("delete", "<think>", "")]),
    # the opener before the format's own markup, and before the render's call head with its closer at the end
    ("kept18.jsonl", "kept15-xinference-dsv31-single-call", [("insert", "", "</think>          ")]),
    ("kept18.jsonl", "kept15-sglang-dsv4-prose-and-bare-invoke",
     [("insert", "", "<｜DSML｜tool_calls>\n"), ("insert", "", "\n</｜DSML｜tool_calls>")]),
    # a literal with other punctuation, its whitespace left out or written otherwise
    ("kept24.jsonl", "kept21-exo-kimi-sanitised-id", [("replace", "functions_", "functions."), ("replace", "_", ":")]),
    ("kept15.jsonl", "kept13-vllm-minicpm5-tokenizer-space-marker", [("replace", "Ġ", " ")] * 3),
    ("kept11.jsonl", "kept10-ollama-commandr-single-tool-call", [("replace", " ", "\n")]),
    # characters between a marker and its text; prose before the marker wanted first
    ("kept11.jsonl", "kept10-vllm-gemma4-colon-prefixed-tool-call",
     [("delete", ":", ""), ("insert", "", "<tool_call|>")]),
    ("kept16.jsonl", "kept14-sglang-cohere4-parallel-calls-leading-text", [("delete", "Sure! ", "")]),
    # a JSON member moved first
    ("kept20.jsonl", "kept17-transformers-tool-use-hermes2pro-call",
     [("move", '"arguments": {"location": "Paris, France", "unit": "celsius"}, "name": "get_current_temperature"',
       '"name": "get_current_temperature", "arguments": {"location": "Paris, France", "unit": "celsius"}'),
      ("delete", "<|im_end|>", "")]),
    # a cut JSON body closed; a second reasoning closer; whitespace and prose around calls; two blocks joined
    ("kept16.jsonl", "kept14-sglang-cohere4-truncated-body-partial-fallback",
     [("insert", "", "}}]"), ("insert", "", "<|END_ACTION|>")]),
    ("kept13.jsonl", "kept11-sglang-dsv4-strict-reasoning-boundary", [("delete", "</think>", "")]),
    ("kept11.jsonl", "kept10-vllm-gemma4-multiple-sequential-canonical-calls", [("delete", "\n", "")]),
    ("kept8.jsonl", "kept6-vllm-qwen3xml-surrounding-text",
     [("insert", "", "\n"), ("insert", "", "\n"), ("delete", "\n\nI will get that information.", "")]),
    ("kept13.jsonl", "kept11-sglang-apertus-second-block-buffered",
     [("replace", "]<|tools_suffix|>between<|tools_prefix|>[", ", "), ("delete", "done", "")]),
])
def test_nearest_output_edit_kinds(set_name, case_id, edits):
    """Each edit kind of the nearest-output search on a development row labelled within 3 edits (docs/explain.md,
    "The nearest output: every row within 3 edits"): the edits found, and an output that parses to calls."""
    _ex, tg = _scored_run(_row(set_name, case_id))
    assert tg.nearest is not None
    assert [(e.kind, e.old, e.new) for e in tg.nearest.edits] == edits
    assert tg.nearest.message["tool_calls"]
    if edits[0][0] == "move":
        assert tg.nearest.sentence.startswith('the model wrote the member `"name"` after `"arguments"`')


# The nineteenth round (docs/explain.md, "Nineteenth round of rules"): the cause from the structure, not from a row


@pytest.mark.parametrize("set_name, case_id, first, second", [
    # the nearest output deletes the `;`-joined tail (text after the call) and `<|python_tag|>` (a control token
    # before the call, at position 0): the same step, the first by position
    ("kept28.jsonl", "kept24-smg-llama-semicolon-separation", Mistake.FOREIGN_WRAPPER, Mistake.TRAILING_TEXT),
    ("kept26.jsonl", "kept23-ovms-llama3-response-python-tag-three-calls", Mistake.FOREIGN_WRAPPER,
     Mistake.TRAILING_TEXT),
    # `"arguments"` for `"parameters"` (step 5) and `<|python_tag|>` after prose (step 4): the first by step
    ("kept28.jsonl", "kept24-sglrouter-llama-with-text-before", Mistake.FOREIGN_WRAPPER, Mistake.FIELD_ALIAS),
])
def test_the_first_edit_of_the_nearest_output_names_the_mistake(set_name, case_id, first, second):
    _ex, tg = _scored_run(_row(set_name, case_id))
    assert tg.mistake == first
    how = "step" if second == Mistake.FIELD_ALIAS else "position"
    assert tg.sentence == "the model wrote `<|python_tag|>`, which the template's format has no place for — the " \
        f"first fault by {how} (the second: {second.value})"


def test_each_edit_of_a_nearest_output_has_the_cause_of_the_table():
    from core.explain.nearest import _context
    from core.explain.triage import _first_edit_fault, edit_mistake
    c = _row("kept28.jsonl", "kept24-smg-llama-semicolon-separation")
    ex, tg = _scored_run(c)
    setup = _Setup(_template(c["template"]), ChatRequest.from_dict(c), "llama.cpp", {})
    ctx = {**_context(setup, _build(setup)), "setup": setup}
    # (by output position: the search may list its edits in another order)
    assert sorted((e.pos, e.kind, edit_mistake(e, ex.output, ctx)) for e in tg.nearest.edits) == [
        (0, "delete", Mistake.FOREIGN_WRAPPER), (49, "delete", Mistake.TRAILING_TEXT)]
    # a reading of the setup (step 2) is no edit's cause: never overruled
    assert _first_edit_fault(Mistake.REASONING_SETTING, ex, (tg.nearest.edits, None), ctx) is None
    # a second whole call deleted where the request allows no parallel calls: the edit alone does not say
    # (step 2's parallel setting or text after the call), so the named fault stands
    c2 = _row("cases.jsonl", "ollama-ai-provider-11-two-json-calls")
    ex2, tg2 = _scored_run(c2)
    assert tg2.mistake == Mistake.FIELD_ALIAS
    assert "the first fault by" not in tg2.sentence


def test_whitespace_inside_the_markup_comes_before_a_fault_inside_the_call():
    # GLM's `test_func↵<arg_key>` where the template writes them glued (step 4), then Python's `True` (step 5)
    _ex, tg = _scored_run(_row("kept25.jsonl", "kept22-sglrouter-glm4-python-literals"))
    assert tg.mistake == Mistake.OMITTED_MARKER
    assert tg.sentence.startswith("the output writes `↵` after `test_func` at output position 20")
    assert tg.sentence.endswith("(the second, later in the output: argument of the wrong type)")


def test_json_layout_is_no_whitespace_inside_the_markup():
    from core.explain.triage import _json_layout
    c = _row("kept28.jsonl", "kept24-smg-qwen-real-world-output")
    out = c["input"]
    at = out.index("{\n    \"name\"") + 1
    assert _json_layout(out, at, at + 5) is True            # `{` ↵␣␣␣␣ `"name"`: JSON's own layout
    tc = out.index("<tool_call>") + len("<tool_call>")
    assert _json_layout(out, tc, tc + 1) is False           # `<tool_call>` ↵ `{`: the template's markup
    _ex, tg = _scored_run(c)
    assert tg.mistake == Mistake.TRAILING_TEXT
    assert "whitespace written inside the markup" not in tg.sentence


@pytest.mark.parametrize("set_name, case_id, lead, opener", [
    ("kept28.jsonl", "kept24-smg-reasoning-qwen3-streaming", "normal␣text", "<think>"),
    ("kept29.jsonl", "kept25-vllm-ascend-minimax-m3-reasoning-content-around-think", "prefix", "<mm:think>"),
])
def test_text_before_a_reasoning_block_the_prompt_leaves_to_the_model(set_name, case_id, lead, opener):
    _ex, tg = _scored_run(_row(set_name, case_id))
    assert tg.mistake == Mistake.LEADING_TEXT
    assert tg.sentence.startswith(f"the output writes `{lead}` before the reasoning opener `{opener}`; the "
                                  "generation prompt opens no reasoning")
    assert not tg.fixes and tg.no_fix


def test_the_nearest_output_lists_its_edits_in_output_order():
    # Llama 3.2's fenced call (ollama/ollama#13519): the search deletes the closing fence first, the opening one
    # after it; the triage reports the opening fence first, in its sentence and its diff alike
    tg = _run(next(c for c in SETS["cases.jsonl"] if c["id"] == "llama32-fenced-parameters"))[1]
    pos = [e.pos for e in tg.nearest.edits]
    assert pos == sorted(pos) and pos[0] == 0
    assert tg.nearest.sentence.startswith("the model wrote ```` ```json ````")
    assert tg.nearest.diff.index("@@ output position 0:") < tg.nearest.diff.index(f"@@ output position {pos[-1]}:")


@pytest.mark.parametrize("set_name, case_id, edits", [
    # Python's literals where the parser wants a JSON value: each replaced by JSON's
    ("kept25.jsonl", "kept22-smg-glm47-python-literals",
     [("replace", "True", "true"), ("replace", "False", "false"), ("replace", "None", "null")]),
    # a backslash that starts no JSON escape (`\P`), doubled inside the bare call the tags are put around
    ("kept14.jsonl", "kept14-openinterpreter-1577-qwen25coder-32b-bare-json-bad-escape",
     [("insert", "", "<tool_call>\n"), ("insert", "", "\\"), ("insert", "", "\n</tool_call>")]),
    # a call cut inside a value: the rest of the call as the render writes it after that parameter
    ("kept8.jsonl", "kept6-vllm-minimax-m3-cut-second-invoke",
     [("insert", "", "]<]minimax[>[</user_id>]<]minimax[>[</invoke>\n]<]minimax[>[</tool_call>")]),
    # an object parameter written as prose where the render writes a JSON value: quoted as a JSON string
    ("kept7.jsonl", "kept7-sgl-dsv4-nonjson-object-param",
     [("replace", "Здравствуйте, мир! Это тест", '"Здравствуйте, мир! Это тест"')]),
    # an argument the schema does not declare, deleted whole (after the repeated response header, in output order)
    ("kept7.jsonl", "kept7-sgl-kimik3-single",
     [("delete", "<|open|>response<|sep|>", ""),
      ("delete", '<|open|>argument key="opts" type="object"<|sep|>{"a": 1}<|close|>argument<|sep|>', "")]),
])
def test_the_nearest_output_finds_the_new_edit_kinds(set_name, case_id, edits):
    tg = _run(_row(set_name, case_id))[1]
    assert [(e.kind, e.old, e.new) for e in tg.nearest.edits] == edits


_OPENAI_ARGS = '["\\"OpenAI\\" \\"latest\\" \\"release\\""]'
_GEMINI_ARGS = '["\\"Gemini\\" \\"latest\\" \\"release\\""]'


@pytest.mark.parametrize("set_name, case_id, edits", [
    # a call block written inside the reasoning, to a tool the request does not declare: that block alone deleted,
    # from the format's opener through its closer (the reasoning's closer and the prose after it kept)
    ("kept8.jsonl", "kept6-vllm-minimax-thinking-tags",
     [("delete", '<tool_calls>\n{"name": "ignored_tool", "arguments": {"should": "ignore"}}\n</tool_calls>', "")]),
    # an integer parameter written as a bare word where the parser wants a JSON value: quoted; then the argument
    # the schema does not declare deleted whole (the argument's first marker glued to the value before it)
    ("kept13.jsonl", "kept11-sglang-spark25-null-and-conversion-fallbacks",
     [("replace", "not-an-int", '"not-an-int"'),
      ("delete", "<arg_key>undeclared</arg_key><arg_value>42</arg_value>", "")]),
    # the declared arguments written beside the name: the template's arguments key and braces put around them;
    # then a symbol written where the parser wants the closer replaced by it
    ("kept12.jsonl", "kept12-qwen3vl-870-qwen25vl-72b-alembic-for-closer",
     [("insert", "", '"arguments": {'), ("insert", "", "}"), ("replace", "⚗", "</tool_call>")]),
    # each invoke's declared parameters in the schema's order (one move each), after the reasoning closed
    ("kept20.jsonl", "kept17-minimax-m2-guide-model-output-format-two-invokes",
     [("insert", "", "</think>"),
      ("move", f'<parameter name="query_tag">["technology", "events"]</parameter>\n<parameter name="query_list">'
               f'{_OPENAI_ARGS}</parameter>\n',
       f'<parameter name="query_list">{_OPENAI_ARGS}</parameter>\n<parameter name="query_tag">["technology", '
       f'"events"]</parameter>\n'),
      ("move", f'<parameter name="query_tag">["technology", "events"]</parameter>\n<parameter name="query_list">'
               f'{_GEMINI_ARGS}</parameter>\n',
       f'<parameter name="query_list">{_GEMINI_ARGS}</parameter>\n<parameter name="query_tag">["technology", '
       f'"events"]</parameter>\n')]),
    # the turn's end where the arguments belong: replaced by the arguments as the render writes them, the
    # required `arg1` empty
    ("kept26.jsonl", "kept23-ovms-devstral-call-empty-args", [("replace", "</s>", '{"arg1": ""}')]),
    # the one declared tool's name where the output names another; then the undeclared argument deleted
    ("kept7.jsonl", "kept7-sgl-kimik3-attr-unescape",
     [("replace", "a&amp;b", "python"),
      ("delete", '<|open|>argument key="q" type="string"<|sep|>say &quot;hi&quot;<|close|>argument<|sep|>', "")]),    # a required argument the call never wrote, put in empty as the render writes it; then the line break the
    # render writes before `</parameter>` (the cause stays the labelled first fault, the omitted whitespace)
    ("kept21.jsonl", "kept18-aphrodite-step3p5-streaming-multi-token-chunk-boundary",
     [("insert", "", "<parameter=state>\n\n</parameter>\n"), ("insert", "", "\n")]),
    # a clean parse with calls that is not the expected message: the reasoning the prompt opened closed at the start
    ("kept8.jsonl", "kept6-vllm-step3p5-no-content-between", [("insert", "", "</think>")]),
    ("kept8.jsonl", "kept6-vllm-step3p5-stream-incremental", [("insert", "", "</think>")]),
])
def test_the_nearest_output_finds_the_last_rows_within_3_edits(set_name, case_id, edits):
    row = _row(set_name, case_id)
    assert row["nearest_within_3"] is True
    tg = _run(row)[1]
    assert [(e.kind, e.old, e.new) for e in tg.nearest.edits] == edits
    assert tg.mistake.name == row["cause"]


def test_the_nearest_output_tells_a_moved_argument_and_arguments_never_written():
    tg = _run(_row("kept20.jsonl", "kept17-minimax-m2-guide-model-output-format-two-invokes"))[1]
    assert tg.nearest.sentence.split("; then ")[1].startswith("the model wrote `<parameter␣name=\"query_list\">")
    assert "where the parser wants it first (the schema's order)" in tg.nearest.sentence
    tg = _run(_row("kept26.jsonl", "kept23-ovms-devstral-call-empty-args"))[1]
    assert tg.nearest.sentence == ("the output ends where the template writes the call's arguments: the model wrote "
                                   "`</s>` (the turn's end) where the template writes `{\"arg1\":␣\"\"}`")


def test_a_clean_parse_is_searched_only_against_an_expected_message_and_accepted_only_when_it_gives_it():
    row = _row("kept8.jsonl", "kept6-vllm-step3p5-no-content-between")
    ex, tg = _run(row)
    assert ex.clean and ex.message["reasoning_content"] == "hello" and len(ex.message["tool_calls"]) == 2
    assert tg.nearest.output.startswith("</think>hello<tool_call>")
    assert tg.nearest.message["content"] == row["expect"]["content"] == "hello"
    assert not tg.nearest.message.get("reasoning_content")
    assert tg.nearest.sentence == "the model omitted `</think>` before `hello<tool_call>`"
    assert tg.sentence.startswith("the parse files `hello` as reasoning only because the generation prompt opens it")
    # without an expected message nothing changes: no search on a clean parse with calls
    _ex, alone = _run_without_expect(row)
    assert alone.nearest is None


def test_an_inserted_required_argument_is_the_schemas_omission():
    # llama.cpp#24807: Qwen3.6's `write` call without its required `content`; the nearest output puts it in, and the
    # cause stays the schema's (not an omitted marker), told as the schema check tells it
    row = next(c for c in SETS["cases.jsonl"] if c["id"] == "llamacpp-24807")
    _ex, tg = _run(row)
    assert [(e.kind, e.new) for e in tg.nearest.edits] == [("insert", "<parameter=content>\n\n</parameter>\n")]
    assert tg.mistake == Mistake.MISSING_REQUIRED
    assert tg.sentence == "`write` is called without `content`, which the request's schema lists in `required`"
    s = _Setup(_template(row["template"]), ChatRequest.from_dict(row), "llama.cpp", {})
    ctx = _context(s, _build(s))
    assert edit_mistake(tg.nearest.edits[0], row["input"], ctx) == Mistake.MISSING_REQUIRED
    # the same markup with a declared argument the output already writes is no required argument put in
    written = Edit("insert", tg.nearest.edits[0].pos, "", "<parameter=path>\n\n</parameter>\n")
    assert edit_mistake(written, row["input"], ctx) == Mistake.OMITTED_MARKER


def test_a_plain_answer_is_not_within_3_edits_of_a_call():
    # the labelling protocol counts edits that make the output parse clean with calls; these answers have none
    for case_id in ("kept17-hermes-fc-readme-prompt-format-answer",
                    "kept17-transformers-tools-and-documents-hermes2pro-answer"):
        row = _row("kept20.jsonl", case_id)
        assert row["nearest_within_3"] is False and "corrected true -> false" in row["note"]
        assert not (row.get("engine_message") or row.get("expect") or {}).get("tool_calls")


# The twentieth round of rules (docs/explain.md "Twentieth round of rules"): structural, from every development batch


def test_the_prompt_opener_patch_writes_into_the_templates_raw_text():
    # Kimi K2 Thinking writes its generation prompt as raw text after `{%- if add_generation_prompt -%}`, no quoted
    # literal: the opener goes after that text's last visible character, and the patched prompt opens `<think>`
    c = _row("kept15.jsonl", "kept13-lmdeploy-kimi-k2-default-thinking-non-streaming")
    tg = _scored_run(c)[1]
    assert tg.mistake == Mistake.REASONING_SETTING
    fix = tg.fixes[0]
    assert fix.kind == TriageFixKind.TEMPLATE
    assert fix.change == {"template_patch": [["\n  <|im_assistant|>assistant<|im_middle|>\n",
                                              "\n  <|im_assistant|>assistant<|im_middle|><think>\n\n"]]}
    assert fix.message == {"role": "assistant", "content": "final answer", "reasoning_content": "reasoning steps"}


def test_a_reasoning_closer_never_opened_comes_before_a_call_id_fault():
    # step 2 before step 5: `check both tools</think>` with no opener (the prompt opens none), then a call id without
    # the `functions.` namespace; the fix is the prompt patch with the repair that reads the id
    c = _row("kept15.jsonl", "kept13-lmdeploy-kimi-k2-complete-response-multiple-tool-calls")
    tg = _scored_run(c)[1]
    assert tg.mistake == Mistake.REASONING_SETTING
    assert tg.sentence.endswith("— the first fault by step (the second: call id of another shape)")
    assert [f.change.get("repairs") for f in tg.fixes if f.kind == TriageFixKind.TEMPLATE] == \
        [["call-id-namespace-optional"]]
    assert _fix_verified(c, tg)


def test_whitespace_before_the_marker_the_parser_expected_is_no_other_format():
    # Kimi K2's section opener, a line break, then the `<|tool_call_begin|>` the parser expected right there
    tg = _scored_run(_row("kept28.jsonl", "kept24-smg-kimik2-function-index-extraction"))[1]
    assert tg.mistake == Mistake.OMITTED_MARKER
    assert any(e.startswith("the output writes `↵` and then `<|tool_call_begin|>`, the template's own marker the "
                            "parser expected right there") for e in tg.evidence)


def test_a_json_call_with_swapped_keys_and_no_opener_names_the_opener_first():
    # Hermes 3's bare `{"arguments": …, "name": …}`: the opener `<tool_call>` is written nowhere (first by position)
    tg = _scored_run(_row("kept14.jsonl", "kept14-nemoclaw-2731-hermes3-8b-bare-json-arguments-first"))[1]
    assert tg.mistake == Mistake.OMITTED_OPENER
    assert tg.sentence.endswith("the model omitted the template's opener `<tool_call>`: the first fault by position, "
                                "before the call's JSON keys written in another order (the second)")
