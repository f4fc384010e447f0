"""JSON schemas as a small typed model: the subset llama.cpp's grammar converter handles.

``schema_from_json(schema)`` turns a JSON-schema dict into a :class:`SchemaDocument` (a root
:class:`SchemaNode` plus the ``#/...`` targets of its ``$ref``\\ s), following llama.cpp ``common/json-schema.cpp``:
``oneOf``/``anyOf`` and ``type`` arrays become :class:`AnyOf`; ``const``, ``enum``, ``allOf``; objects with
properties (schema order, ``required``) and ``additionalProperties``; arrays / tuples (``items``,
``prefixItems``, ``minItems``/``maxItems``); strings (``pattern``, ``format``, ``minLength``/``maxLength``);
integers with inclusive bounds (exclusive ones folded in, fractional ones rounded inwards); number, boolean,
null; anything else (``{}``) is :class:`AnySchema`.

:func:`may_be_string` tells whether a value of the schema may be a string through any branch: the tagged tool
formats take such arguments as raw text (parser notes §3.6.3).

Errors: :class:`SchemaError` (a ``ValueError``) naming the JSON pointer of the bad part.
:func:`schema_from_json_lenient` never raises: an unsupported part becomes "any value".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


class SchemaError(ValueError):
    """A JSON schema outside the supported subset; the message names the path (``#/properties/x``)."""


@dataclass(eq=False)
class SchemaNode:
    """Base of all schema kinds; ``kind`` is the llama.cpp kind name."""

    kind = "any"


@dataclass(eq=False)
class AnySchema(SchemaNode):
    """Any JSON value (``{}``, ``true``, or an unsupported part read leniently); llama.cpp kind ``any``."""
    kind = "any"


@dataclass(eq=False)
class RefSchema(SchemaNode):
    """``{"$ref": "#/..."}``; ``target`` is filled once the whole document is built (cycles allowed)."""

    ref: str = ""
    target: SchemaNode | None = None
    kind = "ref"


@dataclass(eq=False)
class AnyOf(SchemaNode):
    """One of ``children`` (from ``oneOf`` / ``anyOf``, or a ``type`` array expanded one schema per type).

    Follows llama.cpp ``common/json-schema.cpp`` (``oneOf`` is treated like ``anyOf``).
    """
    children: list[SchemaNode] = field(default_factory=list)
    kind = "anyOf"


@dataclass(eq=False)
class AllOf(SchemaNode):
    """``allOf``: every one of ``children`` (schema order); used for untyped, object or string schemas."""
    children: list[SchemaNode] = field(default_factory=list)
    kind = "allOf"


@dataclass(eq=False)
class ConstSchema(SchemaNode):
    """``const``: exactly ``value`` (any JSON value, as decoded)."""
    value: Any = None
    kind = "const"


@dataclass(eq=False)
class EnumSchema(SchemaNode):
    """``enum``: one of ``values`` (a non-empty list of JSON values, schema order)."""
    values: list[Any] = field(default_factory=list)
    kind = "enum"


@dataclass(eq=False)
class NullSchema(SchemaNode):
    """``type: null``: the JSON ``null``."""
    kind = "null"


@dataclass(eq=False)
class BooleanSchema(SchemaNode):
    """``type: boolean``: ``true`` or ``false``."""
    kind = "boolean"


@dataclass(eq=False)
class NumberSchema(SchemaNode):
    """``type: number``: any JSON number (bounds are not kept)."""
    kind = "number"


@dataclass(eq=False)
class IntegerSchema(SchemaNode):
    """Inclusive bounds; ``None`` = unbounded."""

    minimum: int | None = None
    maximum: int | None = None
    kind = "integer"


@dataclass(eq=False)
class StringSchema(SchemaNode):
    """``format`` is one of "", "uuid", "date", "time", "date-time"."""

    pattern: str = ""
    format: str = ""
    min_length: int = 0
    max_length: int = -1
    kind = "string"


@dataclass(eq=False)
class ArraySchema(SchemaNode):
    """``type: array`` with one ``items`` schema (default any) and ``minItems``..``maxItems``.

    ``max_items == -1`` means unbounded; a list-valued ``items`` / ``prefixItems`` is a :class:`TupleSchema`.
    """
    items: SchemaNode = field(default_factory=AnySchema)
    min_items: int = 0
    max_items: int = -1
    kind = "array"


@dataclass(eq=False)
class TupleSchema(SchemaNode):
    """A fixed-length array (``items`` / ``prefixItems`` given as a list): one schema per position."""
    items: list[SchemaNode] = field(default_factory=list)
    kind = "tuple"


@dataclass(eq=False)
class Property:
    """One object property: its ``name``, value ``schema`` and whether it is in ``required``."""
    name: str
    schema: SchemaNode
    required: bool = False


@dataclass(eq=False)
class ObjectSchema(SchemaNode):
    """Properties in schema order; ``additional`` is ``None`` when extra keys are not allowed."""

    properties: list[Property] = field(default_factory=list)
    additional: SchemaNode | None = None
    kind = "object"


@dataclass(eq=False)
class SchemaDocument:
    """A parsed schema: ``root`` and the ``$ref`` targets by reference string."""

    root: SchemaNode
    refs: dict[str, SchemaNode] = field(default_factory=dict)


_UUID_FORMATS = {"uuid", "uuid1", "uuid2", "uuid3", "uuid4", "uuid5"}


class _Builder:
    def __init__(self, root: Any, lenient: bool, strict_refs: bool = False):
        self.root = root
        self.lenient = lenient
        self.strict_refs = strict_refs  # lenient elsewhere, but a bad $ref raises (llama.cpp fails those too)
        self.refs: dict[str, SchemaNode | None] = {}
        self.pending: list[RefSchema] = []

    def fail(self, path: str, msg: str) -> SchemaNode:
        if self.lenient:
            return AnySchema()
        raise SchemaError(f"JSON schema error at {path}: {msg}")

    @staticmethod
    def _count(schema: dict, key: str, default: int) -> int | None:
        if key not in schema:
            return default
        v = schema[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            return None
        return v

    def _format(self, schema: dict) -> str:
        fmt = schema.get("format")
        if not isinstance(fmt, str):
            return ""
        if fmt in ("date", "time", "date-time"):
            return fmt
        if fmt in _UUID_FORMATS:
            return "uuid"
        return ""

    def _resolve(self, ref: str, path: str) -> Any:
        target: Any = self.root
        tokens = ref[1:].split("/")
        for sel in tokens[1:]:
            if isinstance(target, dict) and sel in target:
                target = target[sel]
            elif isinstance(target, list):
                try:
                    idx = int(sel)
                except ValueError:
                    idx = len(target)
                if not 0 <= idx < len(target):
                    raise SchemaError(f"JSON schema error at {path}: cannot resolve $ref {ref}, {sel} is out of range")
                target = target[idx]
            else:
                raise SchemaError(f"JSON schema error at {path}: cannot resolve $ref {ref}, {sel} not found")
        return target

    def _fail_ref(self, path: str, msg: str) -> SchemaNode:
        if self.strict_refs:
            raise SchemaError(f"JSON schema error at {path}: {msg}")
        return self.fail(path, msg)

    def build_ref(self, value: Any, path: str) -> SchemaNode:
        if not isinstance(value, str):
            return self._fail_ref(path, "$ref must be a string")
        if not value.startswith("#/"):
            return self._fail_ref(path, f"unsupported $ref {value}, only references into the same document are "
                                        "supported")
        if value not in self.refs:
            self.refs[value] = None
            try:
                target = self._resolve(value, path)
            except SchemaError:
                if not self.lenient or self.strict_refs:
                    raise
                target = {}
            self.refs[value] = self.build(target, value)
        node = RefSchema(ref=value)
        self.pending.append(node)
        return node

    def build_alternatives(self, cls: type, alts: Any, path: str) -> SchemaNode:
        if not isinstance(alts, list):
            return self.fail(path, "must be an array of schemas")
        if not alts:
            return self.fail(path, "must not be empty")
        return cls(children=[self.build(a, f"{path}/{i}") for i, a in enumerate(alts)])

    def build_object(self, schema: dict, path: str) -> SchemaNode:
        node = ObjectSchema()
        required = {r for r in schema.get("required") or [] if isinstance(r, str)} \
            if isinstance(schema.get("required"), list) else set()
        if "properties" in schema:
            props = schema["properties"]
            if not isinstance(props, dict):
                return self.fail(path, "properties must be an object")
            for name, prop in props.items():
                node.properties.append(Property(name, self.build(prop, f"{path}/properties/{name}"),
                                                name in required))
        if "additionalProperties" in schema:
            add = schema["additionalProperties"]
            if isinstance(add, bool):
                if add:
                    node.additional = AnySchema()
            elif isinstance(add, dict):
                node.additional = self.build(add, f"{path}/additionalProperties")
            else:
                return self.fail(path, "additionalProperties must be a boolean or a schema")
        elif "properties" not in schema:
            node.additional = AnySchema()
        return node

    def build_array(self, schema: dict, path: str) -> SchemaNode:
        node = ArraySchema()
        if "items" in schema or "prefixItems" in schema:
            key = "items" if "items" in schema else "prefixItems"
            items = schema[key]
            if isinstance(items, list):
                return TupleSchema(items=[self.build(it, f"{path}/{key}/{i}") for i, it in enumerate(items)])
            node.items = self.build(items, f"{path}/{key}")
        mn = self._count(schema, "minItems", 0)
        mx = self._count(schema, "maxItems", -1)
        if mn is None or mx is None:
            return self.fail(path, "minItems/maxItems must be non-negative integers")
        node.min_items, node.max_items = mn, mx
        return node

    def build_string(self, schema: dict, path: str) -> SchemaNode:
        node = StringSchema()
        if "pattern" in schema:
            if not isinstance(schema["pattern"], str):
                return self.fail(path, "pattern must be a string")
            node.pattern = schema["pattern"]
        node.format = self._format(schema)
        mn = self._count(schema, "minLength", 0)
        mx = self._count(schema, "maxLength", -1)
        if mn is None or mx is None:
            return self.fail(path, "minLength/maxLength must be non-negative integers")
        node.min_length, node.max_length = mn, mx
        return node

    def build_integer(self, schema: dict, path: str) -> SchemaNode:
        node = IntegerSchema()

        def bound(key: str, lower: bool, up: bool) -> int | None:
            # llama.cpp reads the bounds as int64_t: a bound past that range on its own side bounds nothing (and
            # its digit-range grammar would grow with the digits); past it on the other side no int64 fits it.
            v = schema[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and math.isnan(v)):
                raise SchemaError(f"JSON schema error at {path}: {key} must be a number")
            if v < _INT64_MIN if lower else v > _INT64_MAX:
                return None
            if v > _INT64_MAX if lower else v < _INT64_MIN:
                raise SchemaError(f"JSON schema error at {path}: {key} is outside the 64-bit integer range")
            if isinstance(v, int):
                return v
            return int(math.ceil(v) if up else math.floor(v))

        try:
            if "minimum" in schema:
                node.minimum = bound("minimum", True, True)
            elif "exclusiveMinimum" in schema:
                lo = bound("exclusiveMinimum", True, False)
                node.minimum = None if lo is None else lo + 1
            if "maximum" in schema:
                node.maximum = bound("maximum", False, False)
            elif "exclusiveMaximum" in schema:
                hi = bound("exclusiveMaximum", False, True)
                node.maximum = None if hi is None else hi - 1
        except SchemaError:
            if not self.lenient:
                raise
            return AnySchema()
        return node

    def build(self, schema: Any, path: str) -> SchemaNode:  # noqa: C901 - mirrors the keyword precedence
        if not isinstance(schema, dict):
            if schema is True:
                return AnySchema()
            return self.fail(path, "schema must be an object")
        if "$ref" in schema:
            return self.build_ref(schema["$ref"], path)
        if "oneOf" in schema or "anyOf" in schema:
            key = "oneOf" if "oneOf" in schema else "anyOf"
            return self.build_alternatives(AnyOf, schema[key], f"{path}/{key}")
        typ = schema.get("type")
        if isinstance(typ, list):
            if not typ:
                return self.fail(path, "type must not be empty")
            alts = []
            for i, t in enumerate(typ):
                alt = dict(schema)
                alt["type"] = t
                alts.append(self.build(alt, f"{path}/type/{i}"))
            return AnyOf(children=alts)
        if "const" in schema:
            return ConstSchema(value=schema["const"])
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                return self.fail(path, "enum must be a non-empty array")
            return EnumSchema(values=list(values))
        if typ is not None and not isinstance(typ, str):
            return self.fail(path, "type must be a string or an array of strings")
        has_properties = "properties" in schema or (
            "additionalProperties" in schema and schema["additionalProperties"] is not True)
        if not typ:
            if has_properties:
                return self.build_object(schema, path)
            if "allOf" in schema:
                return self.build_alternatives(AllOf, schema["allOf"], f"{path}/allOf")
            if "items" in schema or "prefixItems" in schema:
                return self.build_array(schema, path)
            if any(k in schema for k in ("pattern", "minLength", "maxLength")) or self._format(schema):
                return self.build_string(schema, path)
            return AnySchema()
        if typ == "object":
            if not has_properties and "allOf" in schema:
                return self.build_alternatives(AllOf, schema["allOf"], f"{path}/allOf")
            return self.build_object(schema, path)
        if typ == "string":
            if "allOf" in schema:
                return self.build_alternatives(AllOf, schema["allOf"], f"{path}/allOf")
            return self.build_string(schema, path)
        if typ == "array":
            return self.build_array(schema, path)
        if typ == "integer":
            return self.build_integer(schema, path)
        if typ == "number":
            return NumberSchema()
        if typ == "boolean":
            return BooleanSchema()
        if typ == "null":
            return NullSchema()
        return self.fail(path, f"unrecognized type {typ}")

    def document(self) -> SchemaDocument:
        root = self.build(self.root, "#")
        refs = {k: (v if v is not None else AnySchema()) for k, v in self.refs.items()}
        for node in self.pending:
            node.target = refs.get(node.ref)
        return SchemaDocument(root=root, refs=refs)


def schema_from_json(schema: Any) -> SchemaDocument:
    """Parse a JSON schema; raises :class:`SchemaError` (naming the path) outside the supported subset."""
    return _Builder(schema, lenient=False).document()


def schema_from_json_lenient(schema: Any) -> SchemaNode:
    """Root node of a JSON schema; unsupported or invalid parts become :class:`AnySchema` (never raises)."""
    try:
        return _Builder(schema, lenient=True).document().root
    except (SchemaError, RecursionError):
        return AnySchema()


def check_refs(schema: Any) -> str | None:
    """The first bad ``$ref`` in ``schema`` (a JSON-schema dict) as a message, or ``None`` when every ``$ref``
    resolves. Walks the schema as :func:`schema_from_json_lenient` reads it (other unsupported parts are still
    accepted) and reports a ``$ref`` that is not a string, not local (``#/…``) or names nothing, e.g.
    ``"JSON schema error at #/properties/q: cannot resolve $ref #/definitions/nowhere, definitions not found"``.
    Follows llama.cpp ``common/json-schema.cpp`` (``build_ref`` / ``resolve_ref`` throw, so the request fails)
    instead of reading the value as "any value". Never raises (a schema nested too deeply returns ``None``;
    request validation limits depth first)."""
    if not isinstance(schema, dict):
        return None
    try:
        _Builder(schema, lenient=True, strict_refs=True).document()
    except SchemaError as e:
        return str(e)
    except RecursionError:
        return None
    return None


def may_be_string(node: SchemaNode | None, _visiting: set[int] | None = None) -> bool:
    """Whether a value of ``node`` may be a string through any branch (a ``$ref`` cycle counts as no)."""
    if node is None:
        return False
    visiting = _visiting if _visiting is not None else set()
    if isinstance(node, StringSchema):
        return True
    if isinstance(node, ConstSchema):
        return isinstance(node.value, str)
    if isinstance(node, EnumSchema):
        return any(isinstance(v, str) for v in node.values)
    if isinstance(node, RefSchema):
        t = node.target
        if t is None or id(t) in visiting:
            return False
        visiting.add(id(t))
        try:
            return may_be_string(t, visiting)
        finally:
            visiting.discard(id(t))
    if isinstance(node, AnyOf):
        return any(may_be_string(c, visiting) for c in node.children)
    if isinstance(node, AllOf):
        seen = False
        for c in node.children:
            if isinstance(c, AnySchema):
                continue
            if not may_be_string(c, visiting):
                return False
            seen = True
        return seen
    return False


def tool_parameters(function: dict) -> dict:
    """The parameters schema of an OpenAI function, ``{"type": "object", "properties": {}}`` when absent or
    empty (llama.cpp ``common_chat_tool_parameters``)."""
    params = function.get("parameters") if isinstance(function, dict) else None
    if params is None or (isinstance(params, dict) and not params):
        return {"type": "object", "properties": {}}
    return params


ALL_TYPES = frozenset({"null", "boolean", "number", "integer", "string", "array", "object"})


def json_type(v: Any) -> str:
    """The JSON type name of a decoded JSON value (``null``, ``boolean``, ``integer``, ``number``, ``string``,
    ``array``, ``object``), as llama.cpp's schema helpers name a ``const`` / ``enum`` value's type."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


SCALAR_TYPES = frozenset({"number", "integer", "boolean", "null"})
"""JSON types whose values end where their text ends (repair ``mistyped-value-as-string`` takes other text for a
parameter of only these types as a string)."""
NUMBER_TYPES = frozenset({"number", "integer"})
"""The numeric JSON types (repair ``quoted-number`` reads a number in string quotes for a parameter of only these)."""


def value_types(node: SchemaNode | None, _visiting: set[int] | None = None) -> frozenset[str]:
    """JSON types a value of ``node`` may have (llama.cpp ``value_types``): ``number`` implies ``integer``,
    ``anyOf`` unions, ``allOf`` intersects, a ``$ref`` cycle contributes nothing, "any" is every type."""
    if node is None:
        return frozenset()
    visiting = _visiting if _visiting is not None else set()
    if isinstance(node, NullSchema):
        return frozenset({"null"})
    if isinstance(node, BooleanSchema):
        return frozenset({"boolean"})
    if isinstance(node, NumberSchema):
        return frozenset({"number", "integer"})
    if isinstance(node, IntegerSchema):
        return frozenset({"integer"})
    if isinstance(node, StringSchema):
        return frozenset({"string"})
    if isinstance(node, (ArraySchema, TupleSchema)):
        return frozenset({"array"})
    if isinstance(node, ObjectSchema):
        return frozenset({"object"})
    if isinstance(node, ConstSchema):
        return frozenset({json_type(node.value)})
    if isinstance(node, EnumSchema):
        return frozenset(json_type(v) for v in node.values)
    if isinstance(node, RefSchema):
        t = node.target
        if t is None or id(t) in visiting:
            return frozenset()
        visiting.add(id(t))
        try:
            return value_types(t, visiting)
        finally:
            visiting.discard(id(t))
    if isinstance(node, AnyOf):
        out: frozenset[str] = frozenset()
        for c in node.children:
            out |= value_types(c, visiting)
        return out
    if isinstance(node, AllOf):
        acc = ALL_TYPES
        for c in node.children:
            acc &= value_types(c, visiting)
        return acc
    return ALL_TYPES  # any
