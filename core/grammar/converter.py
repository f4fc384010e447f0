"""GBNF rules from JSON schemas, and the rule table a whole grammar is collected in.

:class:`GrammarBuilder` is llama.cpp's ``common_grammar_builder`` + ``common_chat_schema_converter``
(``common/json-schema-to-grammar.cpp``), written anew: ``add_rule(name, rhs)`` (sanitized names; identical
re-definitions are no-ops, conflicting ones get a numeric suffix), ``add_schema(name, schema)`` (rules for a
:mod:`core.grammar.json_schema` node, returns the rule to use) and ``format()`` (all rules sorted by name, one
``name ::= rhs`` per line; the ``space`` rule is always present).

Primitive rules (``integer``, ``number``, ``string``, ``char``, ``value``, ``object``, ``array``, ``boolean``,
``null``, ``uuid``, date/time formats) carry no trailing ``space`` (the newer converter); objects list required
properties in order, then optional ones as nested optional chains; integer bounds become digit-range rules;
``pattern`` (anchored ``^...$``) becomes rules, unsupported regex syntax falls back to any string (recorded in
``warnings``).
"""

from __future__ import annotations

import json
import re

from . import json_schema as S

SPACE_RULE = '| " " | "\\n"{1,2} [ \\t]{0,20}'

_PRIMITIVES: dict[str, tuple[str, list[str]]] = {
    "boolean": ('("true" | "false")', []),
    "decimal-part": ("[0-9]{1,16}", []),
    "integral-part": ("[0] | [1-9] [0-9]{0,15}", []),
    "number": ('("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?',
               ["integral-part", "decimal-part"]),
    "integer": ('("-"? integral-part)', ["integral-part"]),
    "value": ("object | array | string | number | boolean | null",
              ["object", "array", "string", "number", "boolean", "null"]),
    "object": ('"{" space ( string ":" space value ("," space string ":" space value)* )? space "}"',
               ["string", "value"]),
    "array": ('"[" space ( value ("," space value)* )? space "]"', ["value"]),
    "uuid": ('"\\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" '
             '[0-9a-fA-F]{12} "\\""', []),
    "char": ('[^"\\\\\\x7F\\x00-\\x1F] | [\\\\] (["\\\\bfnrt] | "u" [0-9a-fA-F]{4})', []),
    "string": ('"\\"" char* "\\""', ["char"]),
    "null": ('"null"', []),
}

_FORMATS: dict[str, tuple[str, list[str]]] = {
    "date": ('[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )', []),
    "time": ('([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) '
             '( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )', []),
    "date-time": ('date "T" time', ["date", "time"]),
    "date-string": ('"\\"" date "\\""', ["date"]),
    "time-string": ('"\\"" time "\\""', ["time"]),
    "date-time-string": ('"\\"" date-time "\\""', ["date-time"]),
}

_RESERVED = {"root"} | set(_PRIMITIVES) | set(_FORMATS)
_INVALID_RULE_CHARS = re.compile(r"[^a-zA-Z0-9-]+")
_LITERAL_ESCAPES = {"\r": "\\r", "\n": "\\n", '"': '\\"', "\\": "\\\\"}
_LITERAL_ESCAPE_RE = re.compile(r'[\r\n"\\]')
_NON_LITERAL = set("|.()[]{}*+?^$")
_ESCAPED_IN_REGEX_NOT_LITERAL = set("^$.[]()|{}*+?")
_MAX_PATTERN_DEPTH = 100
_INT_MAX = 2 ** 31 - 1


def format_literal(text: str) -> str:
    """A GBNF string literal: ``"..."`` with \\r, \\n, ``"`` and ``\\`` escaped (other characters as is)."""
    return '"' + _LITERAL_ESCAPE_RE.sub(lambda m: _LITERAL_ESCAPES[m.group(0)], text) + '"'


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def build_repetition(item: str, lo: int, hi: int, sep: str = "") -> str:
    """``item{lo,hi}`` in GBNF, with an optional separator rule between items; ``hi = _INT_MAX``: unbounded."""
    has_max = hi != _INT_MAX
    if hi == 0:
        return ""
    if lo == 0 and hi == 1:
        return item + "?"
    if not sep:
        if lo == 1 and not has_max:
            return item + "+"
        if lo == 0 and not has_max:
            return item + "*"
        return item + "{" + str(lo) + "," + (str(hi) if has_max else "") + "}"
    result = item + " " + build_repetition("(" + sep + " " + item + ")", 0 if lo == 0 else lo - 1,
                                           hi - 1 if has_max else hi)
    return "(" + result + ")?" if lo == 0 else result


def _gbnf_escape_length(pattern: str, pos: int) -> int:
    if pos + 1 >= len(pattern) or pattern[pos] != "\\":
        return 0
    c = pattern[pos + 1]
    n_hex = {"x": 2, "u": 4, "U": 8}.get(c)
    if n_hex is None:
        return 2 if c in 'trn\\"[]-' else 0
    digits = pattern[pos + 2:pos + 2 + n_hex]
    if len(digits) != n_hex or not all(h in "0123456789abcdefABCDEF" for h in digits):
        return 0
    return 2 + n_hex


def _min_max_int(lo: int | None, hi: int | None, out: list[str], decimals_left: int = 16,
                 top_level: bool = True) -> None:
    """Digit-range GBNF for integers in ``[lo, hi]`` (``None`` = unbounded), appended to ``out``."""

    def digit_range(a: str, b: str) -> None:
        out.append("[" + (a if a == b else a + "-" + b) + "]")

    def more_digits(mn: int, mx: int) -> None:
        out.append("[0-9]")
        if mn == mx == 1:
            return
        out.append("{" + str(mn))
        if mx != mn:
            out.append(",")
            if mx != _INT_MAX:
                out.append(str(mx))
        out.append("}")

    def uniform_range(frm: str, to: str) -> None:
        i = 0
        while i < len(frm) and i < len(to) and frm[i] == to[i]:
            i += 1
        if i > 0:
            out.append('"' + frm[:i] + '"')
        if i < len(frm) and i < len(to):
            if i > 0:
                out.append(" ")
            sub_len = len(frm) - i - 1
            if sub_len > 0:
                frm_sub, to_sub = frm[i + 1:], to[i + 1:]
                zeros, nines = "0" * sub_len, "9" * sub_len
                to_reached = False
                out.append("(")
                if frm_sub == zeros:
                    digit_range(frm[i], chr(ord(to[i]) - 1))
                    out.append(" ")
                    more_digits(sub_len, sub_len)
                else:
                    out.append("[" + frm[i] + "] ")
                    out.append("(")
                    uniform_range(frm_sub, nines)
                    out.append(")")
                    if ord(frm[i]) < ord(to[i]) - 1:
                        out.append(" | ")
                        if to_sub == nines:
                            digit_range(chr(ord(frm[i]) + 1), to[i])
                            to_reached = True
                        else:
                            digit_range(chr(ord(frm[i]) + 1), chr(ord(to[i]) - 1))
                        out.append(" ")
                        more_digits(sub_len, sub_len)
                if not to_reached:
                    out.append(" | ")
                    digit_range(to[i], to[i])
                    out.append(" ")
                    uniform_range(zeros, to_sub)
                out.append(")")
            else:
                out.append("[" + frm[i] + "-" + to[i] + "]")

    if lo is not None and hi is not None:
        if lo < 0 and hi < 0:
            out.append('"-" (')
            _min_max_int(-hi, -lo, out, decimals_left, True)
            out.append(")")
            return
        if lo < 0:
            out.append('"-" (')
            _min_max_int(0, -lo, out, decimals_left, True)
            out.append(") | ")
            lo = 0
        min_s, max_s = str(lo), str(hi)
        for digits in range(len(min_s), len(max_s)):
            uniform_range(min_s, "9" * digits)
            min_s = "1" + "0" * digits
            out.append(" | ")
        uniform_range(min_s, max_s)
        return

    less = max(decimals_left - 1, 1)
    if lo is not None:
        if lo < 0:
            out.append('"-" (')
            _min_max_int(None, -lo, out, decimals_left, False)
            out.append(") | [0] | [1-9] ")
            more_digits(0, decimals_left - 1)
        elif lo == 0:
            if top_level:
                out.append("[0] | [1-9] ")
                more_digits(0, less)
            else:
                more_digits(1, decimals_left)
        elif lo <= 9:
            c = str(lo)
            range_start = "1" if top_level else "0"
            if c > range_start:
                digit_range(range_start, chr(ord(c) - 1))
                out.append(" ")
                more_digits(1, less)
                out.append(" | ")
            digit_range(c, "9")
            out.append(" ")
            more_digits(0, less)
        else:
            min_s = str(lo)
            c = min_s[0]
            if c > "1":
                digit_range("1" if top_level else "0", chr(ord(c) - 1))
                out.append(" ")
                more_digits(len(min_s), less)
                out.append(" | ")
            digit_range(c, c)
            out.append(" (")
            _min_max_int(int(min_s[1:]), None, out, less, False)
            out.append(")")
            if c < "9":
                out.append(" | ")
                digit_range(chr(ord(c) + 1), "9")
                out.append(" ")
                more_digits(len(min_s) - 1, less)
        return
    if hi is not None:
        if hi >= 0:
            if top_level:
                out.append('"-" [1-9] ')
                more_digits(0, less)
                out.append(" | ")
            _min_max_int(0, hi, out, decimals_left, True)
        else:
            out.append('"-" (')
            _min_max_int(-hi, None, out, decimals_left, False)
            out.append(")")
        return
    raise ValueError("at least one of the integer bounds must be set")


class _Unsupported(Exception):
    pass


class _Invalid(Exception):
    pass


class GrammarBuilder:
    """Collects GBNF rules (see module doc); ``.`` in patterns matches any character but a line break.

    ``errors`` / ``warnings``: problems met while converting schemas (an invalid ``pattern`` is an error, an
    unsupported one a warning; both leave a usable grammar).
    """

    def __init__(self) -> None:
        self.rules: dict[str, str] = {"space": SPACE_RULE}
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self._refs_in_progress: set[str] = set()

    # -- rule table -----------------------------------------------------------------------------------------
    def add_rule(self, name: str, rhs: str) -> str:
        """Add ``name ::= rhs`` (name sanitized); returns the name actually used."""
        esc = _INVALID_RULE_CHARS.sub("-", name)
        if esc not in self.rules or self.rules[esc] == rhs:
            self.rules[esc] = rhs
            return esc
        i = 0
        while f"{esc}{i}" in self.rules and self.rules[f"{esc}{i}"] != rhs:
            i += 1
        key = f"{esc}{i}"
        self.rules[key] = rhs
        return key

    def add_schema(self, name: str, schema: S.SchemaNode | dict) -> str:
        """Rules for ``schema``; returns the rule name (or expression) to reference. ``name == "root"`` is the
        grammar root."""
        node = schema if isinstance(schema, S.SchemaNode) else S.schema_from_json_lenient(schema)
        return self.visit(node, "" if name == "root" else name)

    def format(self) -> str:
        """All rules sorted by name, ``name ::= rhs`` one per line (trailing newline)."""
        return "".join(f"{k} ::= {self.rules[k]}\n" for k in sorted(self.rules))

    # -- schema conversion ----------------------------------------------------------------------------------
    def _add_primitive(self, name: str, rule: tuple[str, list[str]]) -> str:
        n = self.add_rule(name, rule[0])
        for dep in rule[1]:
            dep_rule = _PRIMITIVES.get(dep) or _FORMATS.get(dep)
            if dep_rule is None:
                self.errors.append(f"Rule {dep} not known")
                continue
            if dep not in self.rules:
                self._add_primitive(dep, dep_rule)
        return n

    def _visit_primitive(self, rule_name: str, typ: str) -> str:
        return self._add_primitive("root" if rule_name == "root" else typ, _PRIMITIVES[typ])

    def _union(self, name: str, alts: list[S.SchemaNode]) -> str:
        return " | ".join(self.visit(a, name + ("alternative-" if not name else "-") + str(i))
                          for i, a in enumerate(alts))

    def _resolve_ref(self, node: S.RefSchema) -> str:
        frag = node.ref[node.ref.find("#") + 1:] if "#" in node.ref else node.ref
        ref_name = "ref" + _INVALID_RULE_CHARS.sub("-", frag)
        if ref_name not in self.rules and node.ref not in self._refs_in_progress:
            if node.target is None:
                self.errors.append(f"Unresolved $ref {node.ref}")
                return ""
            self._refs_in_progress.add(node.ref)
            ref_name = self.visit(node.target, ref_name)
            self._refs_in_progress.discard(node.ref)
        return ref_name

    def _not_strings(self, strings: list[str]) -> str:
        """A JSON string that is none of ``strings`` (trie over code points)."""
        trie: dict = {}
        for s in strings:
            cur = trie
            for ch in s:
                cur = cur.setdefault(ch, {})
            cur[None] = True
        char_rule = self._add_primitive("char", _PRIMITIVES["char"])
        out: list[str] = ['["] ( ']

        def visit(node: dict) -> None:
            rejects = []
            first = True
            for ch in sorted(k for k in node if k is not None):
                child = node[ch]
                rejects.append(_class_char(ch))
                if not first:
                    out.append(" | ")
                first = False
                out.append("[" + _class_char(ch) + "]")
                if any(k is not None for k in child):
                    out.append(" (")
                    visit(child)
                    out.append(")")
                else:
                    out.append(" " + char_rule + "+")
            if any(k is not None for k in node):
                out.append(' | [^"' + "".join(rejects) + "] " + char_rule + "*")

        visit(trie)
        out.append(" )")
        if None not in trie:
            out.append("?")
        out.append(' ["]')
        return "".join(out)

    def _object_rule(self, properties: list[tuple[str, S.SchemaNode]], required: set[str], name: str,
                     additional: S.SchemaNode | None) -> str:
        sep = "-" if name else ""
        required_props: list[str] = []
        optional_props: list[str] = []
        kv: dict[str, str] = {}
        prop_names: list[str] = []
        for pname, pschema in properties:
            prule = self.visit(pschema, name + sep + pname)
            kv[pname] = self.add_rule(name + sep + pname + "-kv",
                                      format_literal(_dump(pname)) + ' space ":" space ' + prule)
            (required_props if pname in required else optional_props).append(pname)
            prop_names.append(pname)
        if additional is not None:
            sub = name + sep + "additional"
            value_rule = self.visit(additional, sub + "-value") if not isinstance(additional, S.AnySchema) \
                else self._add_primitive("value", _PRIMITIVES["value"])
            key_rule = self._add_primitive("string", _PRIMITIVES["string"]) if not prop_names \
                else self.add_rule(sub + "-k", self._not_strings(prop_names))
            kv["*"] = self.add_rule(sub + "-kv", key_rule + ' ":" space ' + value_rule)
            optional_props.append("*")
        if not required_props and not optional_props:
            return '"{" space "}"'
        rule = '"{" space '
        rule += ' "," space '.join(kv[p] for p in required_props)
        if optional_props:
            rule += " ("
            if required_props:
                rule += ' "," space ( '

            def chain(keys: list[str], first_optional: bool) -> str:
                if not keys:
                    return ""
                k = keys[0]
                comma_ref = '( "," space ' + kv[k] + " )"
                if first_optional:
                    res = comma_ref + ("*" if k == "*" else "?")
                else:
                    res = kv[k] + (" " + comma_ref + "*" if k == "*" else "")
                if len(keys) > 1:
                    res += " " + self.add_rule(name + sep + k + "-rest", chain(keys[1:], True))
                return res

            rule += " | ".join(chain(optional_props[i:], False) for i in range(len(optional_props)))
            if required_props:
                rule += " )"
            rule += " )?"
        rule += ' space "}"'
        return rule

    def _all_of(self, node: S.AllOf, name: str, rule_name: str) -> str:
        required: set[str] = set()
        properties: list[tuple[str, S.SchemaNode]] = []
        enum_counts: dict[str, int] = {}

        def add(comp: S.SchemaNode, is_required: bool) -> None:
            if isinstance(comp, S.RefSchema):
                if comp.target is not None:
                    add(comp.target, is_required)
            elif isinstance(comp, S.ObjectSchema):
                for prop in comp.properties:
                    properties.append((prop.name, prop.schema))
                    if is_required:
                        required.add(prop.name)
            elif isinstance(comp, S.EnumSchema):
                for v in comp.values:
                    key = format_literal(_dump(v))
                    enum_counts[key] = enum_counts.get(key, 0) + 1

        for child in node.children:
            if isinstance(child, S.AnyOf):
                for alt in child.children:
                    add(alt, False)
            else:
                add(child, True)
        if enum_counts:
            inter = [k for k in sorted(enum_counts) if enum_counts[k] == len(node.children)]
            if inter:
                return self.add_rule(rule_name, "(" + " | ".join(inter) + ")")
        return self.add_rule(rule_name, self._object_rule(properties, required, name, None))

    def visit(self, node: S.SchemaNode, name: str) -> str:  # noqa: C901 - one branch per schema kind
        """Rules for ``node`` named after ``name`` ("" = root); returns the rule name to reference."""
        rule_name = name + "-" if name in _RESERVED else (name or "root")
        sub = name + ("-" if name else "")
        if isinstance(node, S.RefSchema):
            return self.add_rule(rule_name, self._resolve_ref(node))
        if isinstance(node, S.AnyOf):
            return self.add_rule(rule_name, self._union(name, node.children))
        if isinstance(node, S.AllOf):
            return self._all_of(node, name, rule_name)
        if isinstance(node, S.ConstSchema):
            return self.add_rule(rule_name, format_literal(_dump(node.value)))
        if isinstance(node, S.EnumSchema):
            return self.add_rule(rule_name, "(" + " | ".join(format_literal(_dump(v)) for v in node.values) + ")")
        if isinstance(node, S.ObjectSchema):
            if not node.properties and isinstance(node.additional, S.AnySchema):
                return self.add_rule(rule_name, self._add_primitive("object", _PRIMITIVES["object"]))
            props = [(p.name, p.schema) for p in node.properties]
            required = {p.name for p in node.properties if p.required}
            return self.add_rule(rule_name, self._object_rule(props, required, name, node.additional))
        if isinstance(node, S.TupleSchema):
            rule = '"[" space ' + ' "," space '.join(self.visit(it, f"{sub}tuple-{i}")
                                                      for i, it in enumerate(node.items)) + ' space "]"'
            return self.add_rule(rule_name, rule)
        if isinstance(node, S.ArraySchema):
            if isinstance(node.items, S.AnySchema) and node.min_items == 0 and node.max_items < 0:
                return self._visit_primitive(rule_name, "array")
            item = self.visit(node.items, sub + "item")
            hi = _INT_MAX if node.max_items < 0 else node.max_items
            return self.add_rule(rule_name, '"[" space ' + build_repetition(item, node.min_items, hi, '"," space')
                                 + ' space "]"')
        if isinstance(node, S.StringSchema):
            if node.pattern:
                return self._visit_pattern(node.pattern, rule_name)
            if node.format == "uuid":
                return self._visit_primitive(rule_name, "uuid")
            if node.format:
                prim = node.format + "-string"
                return self.add_rule(rule_name, self._add_primitive(prim, _FORMATS[prim]))
            if node.min_length > 0 or node.max_length >= 0:
                char = self._add_primitive("char", _PRIMITIVES["char"])
                hi = _INT_MAX if node.max_length < 0 else node.max_length
                return self.add_rule(rule_name, '"\\"" ' + build_repetition(char, node.min_length, hi) + ' "\\""')
            return self._visit_primitive(rule_name, "string")
        if isinstance(node, S.IntegerSchema):
            if node.minimum is None and node.maximum is None:
                return self._visit_primitive(rule_name, "integer")
            out: list[str] = ["("]
            _min_max_int(node.minimum, node.maximum, out)
            out.append(")")
            return self.add_rule(rule_name, "".join(out))
        if isinstance(node, S.NumberSchema):
            return self._visit_primitive(rule_name, "number")
        if isinstance(node, S.BooleanSchema):
            return self._visit_primitive(rule_name, "boolean")
        if isinstance(node, S.NullSchema):
            return self._visit_primitive(rule_name, "null")
        return self.add_rule(rule_name, self._add_primitive("value", _PRIMITIVES["value"]))

    # -- regex patterns -------------------------------------------------------------------------------------
    def _visit_pattern(self, pattern: str, name: str) -> str:
        snapshot = dict(self.rules)
        try:
            return self._pattern_to_rule(pattern, name)
        except _Unsupported as e:
            self.rules = snapshot
            self.warnings.append(f"pattern {pattern} is not supported ({e}), accepting any string")
            return self.add_rule(name, self._add_primitive("string", _PRIMITIVES["string"]))
        except _Invalid as e:
            self.rules = snapshot
            self.errors.append(f"Invalid pattern {pattern}: {e}")
            return self.add_rule(name, self._add_primitive("string", _PRIMITIVES["string"]))

    def _pattern_to_rule(self, pattern: str, name: str) -> str:  # noqa: C901 - a small regex parser
        if len(pattern) < 2 or pattern[0] != "^" or pattern[-1] != "$":
            raise _Unsupported("not anchored with '^' and '$'")
        sub = pattern[1:-1]
        length = len(sub)
        state = {"i": 0, "depth": 0}
        sub_rule_ids: dict[str, str] = {}

        def to_rule(item: tuple[str, bool]) -> str:
            return '"' + item[0] + '"' if item[1] else item[0]

        def get_dot() -> str:
            return self.add_rule("dot", "[^\\x0A\\x0D]")

        def transform() -> tuple[str, bool]:
            seq: list[tuple[str, bool]] = []

            def join_seq() -> tuple[str, bool]:
                ret: list[tuple[str, bool]] = []
                lit = ""
                for text, is_lit in seq:
                    if is_lit:
                        lit += text
                    else:
                        if lit:
                            ret.append((lit, True))
                            lit = ""
                        ret.append((text, False))
                if lit:
                    ret.append((lit, True))
                return " ".join(to_rule(x) for x in ret), False

            while state["i"] < length:
                i = state["i"]
                c = sub[i]
                if c == ".":
                    seq.append((get_dot(), False))
                    state["i"] += 1
                elif c == "(":
                    state["i"] += 1
                    if state["i"] < length and sub[state["i"]] == "?":
                        if state["i"] + 1 < length and sub[state["i"] + 1] == ":":
                            state["i"] += 2
                        else:
                            raise _Unsupported("unsupported group syntax")
                    state["depth"] += 1
                    if state["depth"] > _MAX_PATTERN_DEPTH:
                        raise _Unsupported("pattern nesting too deep")
                    seq.append(("(" + to_rule(transform()) + ")", False))
                elif c == ")":
                    state["i"] += 1
                    if state["depth"] == 0:
                        raise _Invalid("unbalanced parentheses")
                    state["depth"] -= 1
                    return join_seq()
                elif c in "^$":
                    raise _Unsupported("anchor inside the pattern")
                elif c == "[":
                    br = "["
                    j = i + 1
                    while j < length and sub[j] != "]":
                        if sub[j] == "\\":
                            n = _gbnf_escape_length(sub, j)
                            if n == 0:
                                raise _Unsupported("unsupported escape in character class: " + sub[j:j + 2])
                            br += sub[j:j + n]
                            j += n
                        else:
                            br += sub[j]
                            j += 1
                    if j >= length:
                        raise _Invalid("unterminated character class")
                    state["i"] = j + 1
                    seq.append((br + "]", False))
                elif c == "|":
                    seq.append(("|", False))
                    state["i"] += 1
                elif c in "*+?":
                    if not seq:
                        raise _Invalid("nothing to repeat")
                    seq[-1] = (to_rule(seq[-1]) + c, False)
                    state["i"] += 1
                elif c == "{":
                    j = i + 1
                    while j < length and sub[j] != "}":
                        j += 1
                    if j >= length:
                        raise _Unsupported("unterminated curly brackets")
                    nums = sub[i + 1:j].split(",")
                    state["i"] = j + 1
                    if len(nums) not in (1, 2):
                        raise _Unsupported("wrong number of values in curly brackets")
                    try:
                        if len(nums) == 1:
                            lo = hi = int(nums[0])
                        else:
                            lo = int(nums[0]) if nums[0] else 0
                            hi = int(nums[1]) if nums[1] else _INT_MAX
                    except ValueError:
                        raise _Unsupported("invalid number in curly brackets") from None
                    if not seq:
                        raise _Invalid("nothing to repeat")
                    text, is_lit = seq[-1]
                    if not is_lit:
                        sid = sub_rule_ids.get(text)
                        if sid is None:
                            sid = self.add_rule(f"{name}-{len(sub_rule_ids) + 1}", text)
                            sub_rule_ids[text] = sid
                        text = sid
                    seq[-1] = (build_repetition('"' + text + '"' if is_lit else text, lo, hi), False)
                else:
                    lit = ""
                    j = i
                    while j < length:
                        if sub[j] == "\\":
                            if j == length - 1:
                                raise _Invalid("trailing backslash")
                            nxt = sub[j + 1]
                            if nxt in _ESCAPED_IN_REGEX_NOT_LITERAL:
                                lit += nxt
                                j += 2
                            else:
                                n = _gbnf_escape_length(sub, j)
                                if n == 0:
                                    raise _Unsupported("unsupported escape: " + sub[j:j + 2])
                                lit += sub[j:j + n]
                                j += n
                        elif sub[j] == '"':
                            lit += '\\"'
                            j += 1
                        elif sub[j] not in _NON_LITERAL and (
                                j == length - 1 or not lit or sub[j + 1] == "." or sub[j + 1] not in _NON_LITERAL):
                            lit += sub[j]
                            j += 1
                        else:
                            break
                    if not lit:
                        raise _Unsupported("unsupported character: " + c)
                    state["i"] = j
                    seq.append((lit, True))
            return join_seq()

        rule = to_rule(transform())
        if state["depth"] != 0:
            raise _Invalid("unbalanced parentheses")
        return self.add_rule(name, '"\\"" (' + rule + ') "\\""')


def _class_char(ch: str) -> str:
    if ch in '-]["\\^':
        return "\\" + ch
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    return ch


def json_schema_to_grammar(schema: dict) -> str:
    """A complete grammar for values of ``schema`` (root rule ``root``); raises
    :class:`core.grammar.json_schema.SchemaError` for an unsupported schema."""
    doc = S.schema_from_json(schema)
    gb = GrammarBuilder()
    gb.visit(doc.root, "")
    if gb.errors:
        raise S.SchemaError("JSON schema conversion failed: " + "; ".join(gb.errors))
    return gb.format()

