"""What the suites of real outputs share (:mod:`core.chat.realset`, :mod:`core.chat.drift`): reading their
``*.jsonl`` case files, and parsing one case's output one-shot and streamed."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from ..inputs import JsonLineError, read_json_lines
from .request import ChatRequest

CASE_FIELDS = ("id", "source", "template", "request", "output", "expect")
"""The fields every case of these suites has (:class:`OutputCase`)."""


@dataclass
class OutputCase:
    """A real model output with its public ``source`` (URL), the ``template`` file of ``../shared/templates`` and
    the ``request`` it answered, and ``expect``, the OpenAI assistant message a user would call right."""

    id: str
    source: str
    template: str
    request: dict[str, Any]
    output: str
    expect: dict[str, Any]


def read_jsonl_cases(files: Iterable[str], required: tuple[str, ...], label: Callable[[str], str] = str
                     ) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(file, case)`` for every non-blank line of ``files``, in order. Raises ``ValueError`` naming the file (as
    ``label`` gives it) and line of a line that is not JSON, lacks a ``required`` field, or repeats an ``id``."""
    seen: set[str] = set()
    for path in files:
        try:
            rows = list(read_json_lines(path, "cases file"))
        except JsonLineError as e:
            raise ValueError(f"{label(path)}:{e.line}: {e.problem}") from None
        for n, d in rows:
            where = f"{label(path)}:{n}"
            missing = [k for k in required if k not in d]
            if missing:
                raise ValueError(f"{where}: missing field {missing[0]!r}")
            if d["id"] in seen:
                raise ValueError(f"{where}: duplicate id {d['id']!r}")
            seen.add(d["id"])
            yield path, d


def parse_case(templates_dir: str, template_name: str, request: dict[str, Any], output: str, fidelity: str,
               **options: Any) -> tuple[Any, Any]:
    """``(parser, one-shot message)`` of ``output`` for the template file ``template_name`` of ``templates_dir``
    and ``request`` at ``fidelity`` (``options``: more of :func:`core.chat.pipeline.build_chat_parser_or_content`'s).
    Raises ``OSError`` for a missing template and the project's errors for a bad request."""
    from ..jinja.template import ChatTemplate
    from .pipeline import build_chat_parser_or_content

    with open(os.path.join(templates_dir, template_name), encoding="utf-8") as f:
        template = ChatTemplate(f.read(), template_name)
    parser = build_chat_parser_or_content(template, ChatRequest.from_dict(request), fidelity=fidelity,
                                          **options).parser
    return parser, parser.parse(output, False)


def streamed(parser: Any, pieces: Iterable[str]) -> Any:
    """The message a :class:`~core.chat.stream.StreamingParser` of ``parser`` holds after ``pieces`` and finish."""
    from .stream import StreamingParser

    sp = StreamingParser(parser)
    for piece in pieces:
        sp.feed(piece)
    sp.finish()
    return sp.message
