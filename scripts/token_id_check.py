"""Exports through transformers' token-id path: the reference cases of a template parsed from token ids.

    python scripts/token_id_check.py TOKENIZER TEMPLATE [TEMPLATE ...] [--cases ../shared/reference/cases.jsonl]

TOKENIZER is a tokenizer directory (``tokenizer.json`` beside its ``tokenizer_config.json``) or a GGUF file with a
vocabulary (llama.cpp's ``models/ggml-vocab-*.gguf``, any model GGUF): its tokenizer is built by transformers' own
GGUF conversion (``transformers.integrations.gguf.gguf_tokenizer_mapping``) from the metadata the ``gguf`` package
reads, so no torch is needed. For each template: export its response_template (llama.cpp fidelity), set the template
as the tokenizer's ``chat_template`` (transformers takes the control tokens from it), then for each reference case
encode the case's output and the prompt our pipeline renders as token ids (special tokens whole, as a model
generates them) and compare transformers' ``parse_response(ids, prefix=prompt_ids, tokenizer=…)`` and its
``ResponseParser`` fed one id at a time with our parser's message (which equals llama.cpp's).
The same cases through the text path are ``python -m core export T --verify --cases …``. Nothing here is imported
by the library; docs/export.md gives the measured figures.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def load_tokenizer(path: Path) -> Any:
    """A fast transformers tokenizer from a tokenizer directory or a GGUF vocabulary."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if path.is_dir():
        return AutoTokenizer.from_pretrained(str(path))
    import gguf
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_TOKENIZER_MAPPING, convert_gguf_tokenizer

    reader = gguf.GGUFReader(str(path))
    meta = {}
    for key, fld in reader.fields.items():
        if key.startswith(("tokenizer.", "general.architecture")):
            meta[key] = fld.contents()
    tokenizer_dict = {name: meta[f"tokenizer.{key}"] for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items()
                      if f"tokenizer.{key}" in meta}
    backend, _ = convert_gguf_tokenizer(meta["general.architecture"], tokenizer_dict)
    return PreTrainedTokenizerFast(tokenizer_object=backend)


def check_template(tokenizer: Any, template_path: Path, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """One row: the template, its export status, and per case one-shot / streamed agreement via token ids."""
    from transformers.utils.chat_parsing import ResponseParser, parse_response

    from core.chat.pipeline import build_chat_parser
    from core.chat.request import ChatRequest
    from core.chat.roundtrip import compare_messages
    from core.export.response_template import export_response_template
    from core.export.verify import _from_flavour
    from core.inputs import load_chat_template

    template = load_chat_template(str(template_path))
    res = export_response_template(template)
    row: dict[str, Any] = {"template": template.name, "exported": res.response_template is not None, "cases": []}
    if res.response_template is None:
        row["reasons"] = res.reasons
        return row
    tokenizer.chat_template = template.source
    for case in cases:
        req = dict(case)
        if req.get("reasoning_format") == "none":
            req["reasoning_format"] = "auto"      # a response_template always separates reasoning
        out: dict[str, Any] = {"id": case["id"]}
        if req.get("json_schema"):
            out["status"] = "not run (json_schema)"
            row["cases"].append(out)
            continue
        bundle = build_chat_parser(template, ChatRequest.from_dict(req))
        ours = bundle.parser.parse(case["input"], bool(case.get("is_partial"))).to_openai()
        ids = tokenizer.encode(case["input"], add_special_tokens=False)
        prefix = tokenizer.encode(bundle.prompt, add_special_tokens=False)
        tools = case.get("tools") or None
        try:
            rt = res.response_template
            one = _from_flavour(parse_response(ids, rt, prefix=prefix, tools=tools, tokenizer=tokenizer))
            stream = ResponseParser(rt, prefix=prefix, tools=tools, tokenizer=tokenizer)
            for token_id in ids:
                stream.feed([token_id])
            streamed = _from_flavour(stream.finalize()[0])
        except Exception as e:  # noqa: BLE001 - transformers raising is a finding
            out["status"] = f"transformers raised {type(e).__name__}: {str(e).splitlines()[0][:120]}"
            row["cases"].append(out)
            continue
        why = compare_messages(ours, one) or (f"streamed: {w}" if (w := compare_messages(ours, streamed)) else None)
        out["tokens"] = len(ids)
        out["status"] = "agree" if why is None else f"differ: {why}"
        row["cases"].append(out)
    return row


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring): one JSON row per template on stdout, its count on stderr;
    exit 2 when the tokenizer is missing."""
    ap = argparse.ArgumentParser(prog="token_id_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("tokenizer", type=Path)
    ap.add_argument("templates", type=Path, nargs="+")
    ap.add_argument("--cases", type=Path, default=Path(__file__).resolve().parent.parent.parent / "shared" /
                    "reference" / "cases.jsonl")
    args = ap.parse_args(argv)
    if not args.tokenizer.exists():
        print(f"token_id_check: {args.tokenizer}: no such tokenizer file or directory", file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in args.cases.read_text(encoding="utf-8").splitlines() if line.strip()]
    tokenizer = load_tokenizer(args.tokenizer)
    for path in args.templates:
        cases = [r for r in rows if r["template"] == path.name]
        row = check_template(tokenizer, path, cases)
        agree = sum(c["status"] == "agree" for c in row["cases"])
        print(json.dumps(row, ensure_ascii=False))
        print(f"{row['template']}: {agree}/{len(row['cases'])} cases agree through token ids", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
