"""JSON schemas and GBNF: the schema model (:mod:`.json_schema`) and the rule table / schema-to-GBNF converter
(:mod:`.converter`). Grammars of whole chat formats are emitted from parsers by :mod:`core.peg.gbnf`."""

from .converter import GrammarBuilder, format_literal, json_schema_to_grammar
from .json_schema import SchemaDocument, SchemaError, SchemaNode, may_be_string, schema_from_json

__all__ = [
    "GrammarBuilder", "format_literal", "json_schema_to_grammar",
    "SchemaDocument", "SchemaError", "SchemaNode", "may_be_string", "schema_from_json",
]
