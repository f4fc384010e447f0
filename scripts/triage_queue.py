"""The queue a kept-aside triage batch built from recorded real outputs is taken from, by the selection rule fixed
and committed before explain ran on any of its rows (docs/explain.md: "Eighth batch: kept6.jsonl", "Ninth batch:
kept7.jsonl", "Tenth batch: kept8.jsonl", "Eleventh batch: kept9.jsonl", "Twelfth batch: kept10.jsonl", "Thirteenth
batch: kept11.jsonl", "Fifteenth batch: kept13.jsonl", "Seventeenth batch: kept15.jsonl", "Eighteenth batch:
kept16.jsonl", "Twentieth batch: kept18.jsonl", "Twenty-first batch: kept19.jsonl", "Twenty-second batch:
kept20.jsonl", "Twenty-third batch: kept21.jsonl", "Twenty-fourth batch: kept22.jsonl", "Twenty-fifth batch:
kept23.jsonl", "Twenty-sixth batch: kept24.jsonl", "Twenty-seventh batch: kept25.jsonl", "Twenty-eighth batch:
kept26.jsonl", "Thirtieth batch: kept28.jsonl", "Thirty-first batch: kept29.jsonl", "Thirty-second batch:
kept30.jsonl", "Thirty-third batch: kept31.jsonl", "Thirty-fourth batch:
kept32.jsonl", "Thirty-fifth batch: kept33.jsonl", "Thirty-sixth batch: kept34.jsonl"; each rule was first committed
as a script of its own, in git history).

    # BATCH: kept6 … kept13, kept15, kept16, kept18 … kept26, kept28 … kept34
    python scripts/triage_queue.py BATCH [--templates ../shared/templates] [--json]

Every row of the batch's real-output sets that our parser at ``llama.cpp`` fidelity gets wrong (not
``core.chat.realset.run_case(...).ok``), minus the rows whose output (ends' whitespace aside) is the ``input`` of a row
of another ``tests/data/triage/*.jsonl`` file or whose source URL (fragment and query aside) one of them cites.
Families (a real-output file's name, merged across the sets) are ordered by sha256(BATCH + ":" + family), the rows
of a family by sha256(BATCH + ":" + id). Round r takes each family's r-th row in family order. The batch takes the
queue in order until it holds :data:`SIZE` rows (all of it if shorter); a row labelled ``NONE`` by hand once a third
of the batch's size (rounded down) is ``NONE`` is skipped. Nothing here is imported by the library; it runs no
explain and no triage. The queue depends on the parser's ``llama.cpp`` answers, which never change."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BATCHES = {
    # batch: the real-output sets it was drawn from (kept6: every set there was then)
    "kept6": ("real_outputs", "real_outputs_fresh", "real_outputs_kept", "real_outputs_kept3", "real_outputs_kept4",
              "real_outputs_kept5"),
    "kept7": ("real_outputs_kept7",),   # SGLang's, ollama's, lmdeploy's and TensorRT-LLM's own parser tests
    "kept8": ("real_outputs_kept6",),   # vLLM's own tool- and reasoning-parser tests
    "kept9": ("real_outputs_kept8",),   # SGLang's per-detector unit tests, vLLM's Gemma 4 / Kimi K3 / Step-3.5 tests
    "kept10": ("real_outputs_kept9",),  # mlx-lm's, TensorRT-LLM's and lmdeploy's own tool-parser tests
    "kept11": ("real_outputs_kept10",),  # vLLM's, ollama's and TensorRT-LLM's parser tests (files no set used)
    # SGLang's, lmdeploy's, ollama's and vLLM's parser tests (files no set used); kept12 and kept14 are public reports
    "kept13": ("real_outputs_kept11",),
    # vLLM's and lmdeploy's parser tests (files no set used); TensorRT-LLM's file held no model text; at most 30 rows
    "kept15": ("real_outputs_kept13",),
    # SGLang's, ollama's and Xinference's parser tests (files no set used)
    "kept16": ("real_outputs_kept14",),
    # Xinference's, SGLang's, vLLM's and lmdeploy's parser tests (files no set used), each family on its own template
    "kept18": ("real_outputs_kept15",),
    # dynamo's, mistral.rs's and LocalAI's parser tests (projects no set mined), each family on its own template
    "kept19": ("real_outputs_kept16",),
    # model makers' and libraries' own documents and one report (no test file), each family on its own template
    "kept20": ("real_outputs_kept17",),
    # Python training, agent and serving libraries' parser tests (LLaMA-Factory, Qwen-Agent, llama-stack,
    # aphrodite-engine: projects no set mined), each family on its own template
    "kept21": ("real_outputs_kept18",),
    # the MLX ecosystem's parser tests (vllm-mlx, mlx-omni-server, Rapid-MLX), each family on its own template
    "kept22": ("real_outputs_kept19",),
    # openai/harmony's tests and the big engines' test files no set cited (SGLang's unit detectors, lmdeploy's
    # required tool choice, vLLM's Gemma 4 enforcement), each family on its own template
    "kept23": ("real_outputs_kept20",),
    # small local servers' parser tests (exo, TabbyAPI: projects no set mined for tests), each family on its own
    # template
    "kept24": ("real_outputs_kept21",),
    # model gateways' and engines' Rust and C++ parser tests (the SMG gateway, SGLang's Rust router, xllm: projects
    # no set mined for tests), each family on its own template
    "kept25": ("real_outputs_kept22",),
    # OpenVINO Model Server's C++ output-parser tests and FastDeploy's tool and reasoning parser tests (engines no set
    # mined), each family on its own template
    "kept26": ("real_outputs_kept23",),
    # the SMG gateway's and SGLang's Rust router's test files the twenty-second set did not reach (files no set
    # used), each family on its own template
    "kept28": ("real_outputs_kept24",),
    # vllm-ascend's platform-patch parser tests (GLM-4.5 / GLM-4.7, MiniMax M2 / M3, DeepSeek V4: a project no set
    # mined), each family on its own template
    "kept29": ("real_outputs_kept25",),
    # ms-swift's agent-template and template tests (MiniCPM5, Kimi K3, DeepSeek-V4-Flash-0731) and litellm's Ollama
    # chat tests (Qwen3, DeepSeek-R1): projects no set mined, each family on its own template
    "kept30": ("real_outputs_kept26",),
    # training and RL frameworks' rollout parser tests (AReaL's SGLang-backed Qwen3 parse, rllm's Qwen / Llama /
    # renderer / tinker parsers, ROLL's Qwen3.5 and Qwen3-Coder parsers: projects no set mined), each family on its
    # own template
    "kept31": ("real_outputs_kept27",),
    # the model makers' own repositories (openai/harmony's C++ port parser tests for gpt-oss, MiniMax-M1's
    # Portuguese function-call guide), each family on its own template
    "kept32": ("real_outputs_kept28",),
    # on-device and C++/Java runtimes' parser tests (openvino.genai's Phi-4 / DeepSeek-R1 reasoning and Llama-3 JSON
    # parsers, LiteRT-LM's Qwen3 / Gemma 4 / MiniCPM5 data processors, MNN Chat's gpt-oss result processor: projects
    # no set mined), each family on its own template
    "kept33": ("real_outputs_kept29",),
    # Python agent and app frameworks' reasoning-parser tests (autogen's R1 parsers, smolagents' DeepSeek think-tag
    # removal: projects no set mined), each family on its own template
    "kept34": ("real_outputs_kept30",),
}
# rows a batch takes from the head of its queue (40 unless named)
SIZE = {"kept15": 30, "kept16": 30, "kept18": 30, "kept19": 30, "kept20": 30, "kept21": 30, "kept22": 30,
        "kept23": 30, "kept24": 30, "kept25": 30, "kept26": 30, "kept28": 30, "kept29": 30,
        "kept30": 30, "kept31": 30, "kept32": 30, "kept33": 30, "kept34": 30}


def _bare(url: str) -> str:
    return url.split("#")[0].split("?")[0].rstrip("/")


def queue(batch: str, templates: str) -> list[dict]:
    """The failing rows in queue order: ``{"round", "family", "id", "dir", "reason"}``."""
    sys.path.insert(0, str(ROOT))
    from core.chat.realset import load_cases, run_case

    def key(text: str) -> str:
        return hashlib.sha256(f"{batch}:{text}".encode("utf-8")).hexdigest()

    # the batch taken from this queue is left out, so the queue prints the same once it exists
    triage = [json.loads(line) for f in sorted((ROOT / "tests" / "data" / "triage").glob("*.jsonl"))
              if f.name != f"{batch}.jsonl" for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    used_sources = {_bare(t["source"]) for t in triage}
    used_inputs = {t["input"].strip() for t in triage}
    by_family: dict[str, list[dict]] = {}
    for d in BATCHES[batch]:
        for case in load_cases(str(ROOT / "tests" / "data" / d)):
            if _bare(case.source) in used_sources or case.output.strip() in used_inputs:
                continue
            result = run_case(case, templates, "llama.cpp")
            if not result.ok:
                by_family.setdefault(case.family, []).append(
                    {"family": case.family, "id": case.id, "dir": d, "reason": result.reason})
    families = sorted(by_family, key=key)
    for rows in by_family.values():
        rows.sort(key=lambda r: key(r["id"]))
    out = []
    for rnd in range(max((len(v) for v in by_family.values()), default=0)):
        for fam in families:
            if rnd < len(by_family[fam]):
                out.append({"round": rnd + 1, **by_family[fam][rnd]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("batch", choices=sorted(BATCHES))
    ap.add_argument("--templates", default=os.path.join(ROOT.parent, "shared", "templates"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = queue(args.batch, args.templates)
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=1))
    else:
        for i, r in enumerate(rows, 1):
            taken = "" if i <= SIZE.get(args.batch, 40) else "  (beyond the batch's size)"
            print(f"{i:3d} r{r['round']} {r['family']:20s} {r['dir']:20s} {r['id']}{taken}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
