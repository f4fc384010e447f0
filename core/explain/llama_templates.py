"""The templates of the project's corpus that are llama.cpp's own ``models/templates/`` files, by their file name in
the corpus: the ones a ``peg_tester("models/templates/…")`` line of llama.cpp's ``tests/test-chat.cpp`` reads as
they are (:func:`core.explain.reproducer.peg_tester_snippet`).

From the corpus's ``MANIFEST.tsv``: the rows whose source is ``ggml-org/llama.cpp`` at the version the reference
reproduces (the llama.cpp vendored in llama-cpp-python 0.3.36, and three files read at a pinned commit of its
repository), path ``models/templates/NAME``. The corpus keeps llama.cpp's own edit of a template as
``NAME.llamacpp-edit.jinja`` (llama.cpp's ``NAME.jinja``) beside the model author's first version ``NAME.jinja``,
which an older llama.cpp (0.3.16) held: that first version is not listed, llama.cpp's file of its name now holds the
edit. Then the three templates llama.cpp added up to b11549, the version this project follows (their copies are
in ``tests/data/b11549``). ``tests/test_reproducer_settings.py`` checks the list against the manifest where the
corpus is present.
"""

from __future__ import annotations

LLAMA_CPP_EDIT = ".llamacpp-edit"
"""What the corpus adds to the name of llama.cpp's edit of a template (``NAME.llamacpp-edit.jinja``)."""

LLAMA_CPP_TEMPLATES = frozenset({
    "Apertus-8B-Instruct.jinja",
    "Apriel-1.6-15b-Thinker-fixed.jinja",
    "Bielik-11B-v3.0-Instruct.jinja",
    "ByteDance-Seed-OSS.jinja",
    "Cohere2MoE.jinja",
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.llamacpp-edit.jinja",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.llamacpp-edit.jinja",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.llamacpp-edit.jinja",
    "deepseek-ai-DeepSeek-V3.1.jinja",
    "deepseek-ai-DeepSeek-V3.2.jinja",
    "deepseek-ai-DeepSeek-V4-Flash-0731.jinja",
    "deepseek-ai-DeepSeek-V4.jinja",
    "fireworks-ai-llama-3-firefunction-v2.llamacpp-edit.jinja",
    "GigaChat3-10B-A1.8B.jinja",
    "GigaChat3.1-10B-A1.8B.jinja",
    "GLM-4.6.jinja",
    "GLM-4.7-Flash.jinja",
    "glm_4_5.jinja",
    "google-gemma-2-2b-it.jinja",
    "google-gemma-4-31B-it-interleaved.jinja",
    "google-gemma-4-31B-it.jinja",
    "HuggingFaceTB-SmolLM3-3B.jinja",
    "ibm-granite-granite-3.3-2B-Instruct.jinja",
    "ibm-granite-granite-4.0.jinja",
    "ibm-granite-granite-4.1.jinja",
    "inclusionai-ling-3.0-flash.jinja",
    "Kimi-K2-Instruct.jinja",
    "Kimi-K2-Thinking.jinja",
    "Kimi-K3.jinja",
    "LFM2-8B-A1B.jinja",
    "LFM2.5-8B-A1B.jinja",
    "LFM2.5-Instruct.jinja",
    "llama-cpp-deepseek-r1.llamacpp-edit.jinja",
    "llama-cpp-rwkv-world.jinja",
    "meetkai-functionary-medium-v3.1.llamacpp-edit.jinja",
    "meetkai-functionary-medium-v3.2.jinja",
    "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "meta-llama-Llama-3.2-3B-Instruct.jinja",
    "microsoft-Phi-3.5-mini-instruct.jinja",
    "MiMo-VL.jinja",
    "MiniMax-M1.jinja",
    "MiniMax-M2.jinja",
    "MiniMax-M3.jinja",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja",
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    "mistralai-Mistral-Small-3.1-24B-Instruct-2503.jinja",
    "moonshotai-Kimi-K2.llamacpp-edit.jinja",
    "muse-glimmer.jinja",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
    "nvidia-Llama-3_3-Nemotron-Super-49B-v1_5.jinja",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja",
    "NVIDIA-Nemotron-Nano-v2.jinja",
    "openai-gpt-oss-120b.jinja",
    "openbmb-MiniCPM5-1B.jinja",
    "poolside-Laguna-S-2.1.jinja",
    "poolside-Laguna-XS-2.1.jinja",
    "poolside-Laguna-XS.2.jinja",
    "Qwen-Qwen2.5-7B-Instruct.jinja",
    "Qwen-Qwen3-0.6B.jinja",
    "Qwen-QwQ-32B.llamacpp-edit.jinja",
    "Qwen3-Coder.jinja",
    "Qwen3.5-4B.jinja",
    "Reka-Edge.jinja",
    "Spark2.5.jinja",
    "StepFun3.5-Flash.jinja",
    "tencent-Hy3.jinja",
    "unsloth-Apriel-1.5.jinja",
    "unsloth-mistral-Devstral-Small-2507.jinja",
    "upstage-Solar-Open-100B.jinja",
    # added in b11435-b11549 (docs/llama-cpp-sync.md)
    "google-translategemma-4b-it.jinja",
    "IFM-K2-Horizon.jinja",
    "llm-jp-llm-jp-4.1-8b-thinking.jinja",
})
"""Corpus file names of llama.cpp's ``models/templates/`` files (``NAME`` there, without :data:`LLAMA_CPP_EDIT`)."""


def llama_cpp_file(name: str) -> str | None:
    """The file name in llama.cpp's ``models/templates/`` of the corpus template ``name``, else None."""
    return name.replace(LLAMA_CPP_EDIT, "") if name in LLAMA_CPP_TEMPLATES else None
