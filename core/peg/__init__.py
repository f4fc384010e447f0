"""PEG combinators with partial (streaming) parsing and GBNF emission — llama.cpp's ``peg-parser`` in Python.

Build with :class:`Builder` (or :class:`~core.peg.chat.ChatBuilder` for the chat tag vocabulary), get an
:class:`Arena` from ``build(root)``, then ``arena.parse(text)`` -> :class:`ParseResult`,
``arena.to_gbnf(lazy)`` -> GBNF text, ``arena.describe()`` -> readable PEG.
"""

from .builder import Arena, Builder, P, PegError, build_peg_parser
from .chat import ChatBuilder, build_chat_peg_parser
from .engine import AstNode, ParseCache, ParseResult, ResultType, parse
from .nodes import sanitize_rule_name

__all__ = [
    "Arena", "Builder", "P", "PegError", "build_peg_parser", "ChatBuilder", "build_chat_peg_parser",
    "AstNode", "ParseCache", "ParseResult", "ResultType", "parse", "sanitize_rule_name",
]
