"""Jinja, sandboxed: the one place the project renders templates.

* :mod:`.limits` — render limits (time, output, range, integer size, memory), the analysis and command budgets,
  projected sizes;
* :mod:`.sandbox` — jinja2's immutable sandbox with every limit enforced from its hooks;
* :mod:`.hf` — the transformers dialect (the project's environment, as ``apply_chat_template`` configures it);
* :mod:`.cache` — the compiled-template store (memory and disk), syntax checks, source digests;
* :mod:`.template` — :class:`~core.jinja.template.ChatTemplate` and :func:`~core.jinja.template.apply_template`;
* :mod:`.usage` — usage tracking (which inputs a template reads, as llama.cpp records it);
* :mod:`.llama` — the llama.cpp dialect: the capability probes' tracked renders and the analysis' renders.
"""
