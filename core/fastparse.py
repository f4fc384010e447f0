"""A faster parser for the project's jinja2 environments: the same node tree as ``jinja2.parser.Parser``, in fewer
Python calls (issue 14, cold analysis with an empty compiled-code cache).

jinja2 parses every expression through one method per precedence level — conditional, ``or``, ``and``, ``not``,
comparison, ``+``/``-``, ``~``, ``*``/``/``/``//``/``%``, ``**``, unary, primary: a dozen calls for a bare name —
and tests every token with ``Token.test("name:if")``, which splits the string each time. On the corpus the parser
was ~1.6 ms of the ~9.5 ms CPU a cold template costs.

:class:`FastParser` keeps jinja2's grammar and builds the same nodes (class, fields, children order, ``lineno``,
``ctx``, ``environment``), but

* parses an expression with one loop per level inside a single method (:meth:`FastParser._expr`), returning at
  once when the operand is followed by no binary operator — the common case;
* reads tokens directly (``type``/``value`` comparisons instead of ``Token.test``) and builds nodes without
  ``Node.__init__``, with the environment set, so the parser's last walk over the whole tree (``set_environment``)
  is needed only over the subtrees of statements parsed elsewhere (by an extension or jinja2's method);
* parses ``if``/``elif``/``else``, ``for``, ``set`` and ``macro`` itself; every other tag (``block``, ``call``,
  ``filter``, ``with``, ``include``, the extensions' tags …) goes to jinja2's own ``parse_statement``.

The ``lineno`` of every node follows jinja2's rules, including its less obvious ones: a chain of binary operators
of one level takes the line of the operator token (``a + b + c``: the outer ``Add`` has the second ``+``'s line), a
comparison takes the line of the token after its last operand, a tuple the line of its last comma.

Errors are always jinja2's: when this parser fails in any way (a syntax error, an expression nesting deeper than
:data:`MAX_NESTING` allows, a ``RecursionError``), :func:`parse` parses the template again with jinja2's own
``Parser``, whose exception (type, message, line) is the one raised. Only the compile time limit
(:class:`core.errors.TemplateRenderError`, raised by the environment's token stream) passes through at once. A
template that fails is thus lexed and parsed twice, each time within the compile time limit.
``tests/test_fastparse.py`` compares the trees with jinja2's on the corpus, on generated expressions and on
mutated corpus templates.
"""

from __future__ import annotations

from typing import Any

import jinja2
import jinja2.nodes as nodes
import jinja2.parser

from .errors import TemplateRenderError

__all__ = ["FastParser", "JINJA2_VERSIONS", "MAX_NESTING", "SUPPORTED", "parse"]

#: jinja2 releases whose parser this one reproduces (checked by tests/test_fastparse.py): jinja2's grammar and
#: line numbering may change from one release to the next.
JINJA2_VERSIONS = frozenset(["3.1.6"])
#: Whether :func:`parse` uses :class:`FastParser` (the installed jinja2 is one of :data:`JINJA2_VERSIONS`).
SUPPORTED = jinja2.__version__ in JINJA2_VERSIONS

_new = object.__new__
_Name, _Const, _Getattr, _Getitem = nodes.Name, nodes.Const, nodes.Getattr, nodes.Getitem
_Call, _Filter, _Test, _Not = nodes.Call, nodes.Filter, nodes.Test, nodes.Not
_TemplateData, _Output = nodes.TemplateData, nodes.Output


def _binary(cls: type, left: nodes.Expr, right: nodes.Expr, lineno: int, env: Any) -> nodes.Expr:
    """A binary operator node ``cls(left, right)`` (``Pow``, ``Mul`` … ``Or``) at ``lineno``, built as jinja2's
    constructor would leave it, with the environment set."""
    node = _new(cls)
    node.left = left
    node.right = right
    node.lineno = lineno
    node.environment = env
    return node

#: How deep expressions and blocks may nest (in jinja2 parser frames, estimated: an expression inside another
#: costs jinja2 about 13 frames, a block inside another about 4) before :func:`parse` leaves the template to
#: jinja2's parser — which, with more frames per level, is the one to decide whether it nests too deeply for
#: Python's recursion limit. Chat templates stay far below it (the corpus' deepest: 103).
MAX_NESTING = 400
_EXPR_COST = 13
_BLOCK_COST = 4

_MUL_OPS = {"mul": nodes.Mul, "div": nodes.Div, "floordiv": nodes.FloorDiv, "mod": nodes.Mod}
_ADD_OPS = {"add": nodes.Add, "sub": nodes.Sub}
_COMPARE_OPS = frozenset(["eq", "ne", "lt", "lteq", "gt", "gteq"])
# token types that may follow an operand and continue its expression with a binary operator (a name only when it
# is one of _OPERATOR_NAMES); filters, tests, calls and subscripts are parsed with the operand
_OPERATOR_TYPES = frozenset(["pow", "mul", "div", "floordiv", "mod", "tilde", "add", "sub", "name"]) | _COMPARE_OPS
_OPERATOR_NAMES = frozenset(["if", "or", "and", "in", "not"])
_TUPLE_END = frozenset(["variable_end", "block_end", "rparen"])
_TEST_ARG_TYPES = frozenset(["name", "string", "integer", "float", "lparen", "lbracket", "lbrace"])
_BOOLS = {"true": True, "True": True, "false": False, "False": False}
_NONES = frozenset(["none", "None"])
_UNASSIGNABLE = frozenset(["true", "false", "none", "True", "False", "None"])


class _Fallback(Exception):
    """This parser leaves the template to jinja2's (nesting deeper than :data:`MAX_NESTING`)."""


def _names_of(end_tokens: tuple[str, ...]) -> frozenset[str] | None:
    """The tag names of ``end_tokens`` when all are ``"name:<tag>"`` rules (as every caller's are), else None."""
    names = []
    for rule in end_tokens:
        kind, sep, value = rule.partition(":")
        if kind != "name" or not sep:
            return None
        names.append(value)
    return frozenset(names)


_END_NAMES: dict[tuple[str, ...], frozenset[str] | None] = {}


class FastParser(jinja2.parser.Parser):
    """``jinja2.parser.Parser`` with faster expression and common-statement parsing; builds the same tree.

    Used through :func:`parse`, which falls back to jinja2's parser on any failure: the methods here assume the
    template parses and may raise a different error (or none of jinja2's checks' messages) when it does not.
    Extensions' ``parse`` methods and jinja2's statement methods receive this parser and use its methods.
    """

    def __init__(self, environment: jinja2.Environment, source: str, name: str | None = None,
                 filename: str | None = None, state: str | None = None) -> None:
        super().__init__(environment, source, name, filename, state)
        self._env = environment
        self._depth = 0
        self._statements = {"if": self._parse_if, "set": self._parse_set, "for": self._parse_for,
                            "macro": self._parse_macro}

    # -- template and statements ----------------------------------------------------------------------------

    def parse(self) -> nodes.Template:
        """The whole template as a ``Template`` node (``lineno`` 1), every node's ``environment`` set."""
        result = _new(nodes.Template)
        result.body = self.subparse()
        result.lineno = 1
        result.environment = self._env
        return result

    def subparse(self, end_tokens: tuple[str, ...] | None = None) -> list[nodes.Node]:
        """The nodes up to the first block tag matching ``end_tokens`` (stream left on its name) or the end."""
        stream = self.stream
        env = self._env
        body: list[nodes.Node] = []
        data: list[nodes.Node] = []
        end_names = None
        if end_tokens is not None:
            end_names = _END_NAMES.get(end_tokens, False)
            if end_names is False:
                end_names = _END_NAMES.setdefault(end_tokens, _names_of(end_tokens))
        self._depth += _BLOCK_COST
        if self._depth > MAX_NESTING:
            raise _Fallback
        while stream:
            tok = stream.current
            kind = tok.type
            if kind == "data":
                if tok.value:
                    node = _new(_TemplateData)
                    node.data = tok.value
                    node.lineno = tok.lineno
                    node.environment = env
                    data.append(node)
                next(stream)
            elif kind == "variable_begin":
                next(stream)
                data.append(self.parse_tuple(with_condexpr=True))
                if stream.current.type == "variable_end":
                    next(stream)
                else:
                    stream.expect("variable_end")
            elif kind == "block_begin":
                if data:
                    out = _new(_Output)
                    out.nodes = data
                    out.lineno = data[0].lineno
                    out.environment = env
                    body.append(out)
                    data = []
                next(stream)
                if end_tokens is not None:
                    tok = stream.current
                    if end_names is None:
                        if tok.test_any(*end_tokens):
                            self._depth -= _BLOCK_COST
                            return body
                    elif tok.type == "name" and tok.value in end_names:
                        self._depth -= _BLOCK_COST
                        return body
                rv = self.parse_statement()
                if isinstance(rv, list):
                    body.extend(rv)
                else:
                    body.append(rv)
                if stream.current.type == "block_end":
                    next(stream)
                else:
                    stream.expect("block_end")
            else:
                raise AssertionError("internal parsing error")
        if data:
            out = _new(_Output)
            out.nodes = data
            out.lineno = data[0].lineno
            out.environment = env
            body.append(out)
        self._depth -= _BLOCK_COST
        return body

    def parse_statement(self) -> nodes.Node | list[nodes.Node]:
        """One statement: ``if``/``for``/``set``/``macro`` here, any other tag by jinja2's method."""
        tok = self.stream.current
        if tok.type == "name":
            method = self._statements.get(tok.value)
            if method is not None:
                return method()
        # nodes built by jinja2's statement methods or an extension have no environment yet: set it on the
        # statement's subtree (jinja2 sets it on the whole tree at the end; ours are built with it)
        rv = super().parse_statement()
        for node in rv if isinstance(rv, list) else (rv,):
            node.set_environment(self._env)
        return rv

    def parse_statements(self, end_tokens: tuple[str, ...], drop_needle: bool = False) -> list[nodes.Node]:
        """A statement's body up to one of ``end_tokens`` (after an optional colon and the block end)."""
        stream = self.stream
        if stream.current.type == "colon":
            next(stream)
        if stream.current.type == "block_end":
            next(stream)
        else:
            stream.expect("block_end")
        result = self.subparse(end_tokens)
        if stream.current.type == "eof":
            self.fail_eof(end_tokens)
        if drop_needle:
            next(stream)
        return result

    def _parse_if(self) -> nodes.If:
        stream = self.stream
        env = self._env
        result = node = _new(nodes.If)
        node.lineno = next(stream).lineno
        node.environment = env
        while True:
            node.test = self.parse_tuple(with_condexpr=False)
            node.body = self.parse_statements(("name:elif", "name:else", "name:endif"))
            node.elif_ = []
            node.else_ = []
            tok = next(stream)
            if tok.value == "elif":
                node = _new(nodes.If)
                node.lineno = stream.current.lineno
                node.environment = env
                result.elif_.append(node)
                continue
            if tok.value == "else":
                result.else_ = self.parse_statements(("name:endif",), drop_needle=True)
            return result

    def _parse_set(self) -> nodes.Assign | nodes.AssignBlock:
        stream = self.stream
        lineno = next(stream).lineno
        target = self.parse_assign_target(with_namespace=True)
        if stream.current.type == "assign":
            next(stream)
            node = _new(nodes.Assign)
            node.target = target
            node.node = self.parse_tuple()
        else:
            node = _new(nodes.AssignBlock)
            node.target = target
            node.filter = self.parse_filter(None)
            node.body = self.parse_statements(("name:endset",), drop_needle=True)
        node.lineno = lineno
        node.environment = self._env
        return node

    def _parse_for(self) -> nodes.For:
        stream = self.stream
        lineno = next(stream).lineno
        target = self.parse_assign_target(extra_end_rules=("name:in",))
        tok = stream.current
        if tok.type == "name" and tok.value == "in":
            next(stream)
        else:
            stream.expect("name:in")
        iter_ = self.parse_tuple(with_condexpr=False, extra_end_rules=("name:recursive",))
        test = None
        tok = stream.current
        if tok.type == "name" and tok.value == "if":
            next(stream)
            test = self._expr(0)
        tok = stream.current
        recursive = tok.type == "name" and tok.value == "recursive"
        if recursive:
            next(stream)
        body = self.parse_statements(("name:endfor", "name:else"))
        if next(stream).value == "endfor":
            else_ = []
        else:
            else_ = self.parse_statements(("name:endfor",), drop_needle=True)
        node = _new(nodes.For)
        node.target, node.iter, node.body, node.else_, node.test, node.recursive = (
            target, iter_, body, else_, test, recursive)
        node.lineno = lineno
        node.environment = self._env
        return node

    def _parse_macro(self) -> nodes.Macro:
        node = _new(nodes.Macro)
        node.lineno = next(self.stream).lineno
        node.environment = self._env
        node.name = self.parse_assign_target(name_only=True).name
        self.parse_signature(node)
        node.body = self.parse_statements(("name:endmacro",), drop_needle=True)
        return node

    def parse_signature(self, node: Any) -> None:
        """A macro's or call block's ``(name, name=default, …)`` into ``node.args`` / ``node.defaults``."""
        stream = self.stream
        args = node.args = []
        defaults = node.defaults = []
        stream.expect("lparen")
        while stream.current.type != "rparen":
            if args:
                stream.expect("comma")
            arg = self.parse_assign_target(name_only=True)
            arg.ctx = "param"
            if stream.current.type == "assign":
                next(stream)
                defaults.append(self._expr(0))
            elif defaults:
                self.fail("non-default argument follows default argument")
            args.append(arg)
        stream.expect("rparen")

    def parse_assign_target(self, with_tuple: bool = True, name_only: bool = False,
                            extra_end_rules: tuple[str, ...] | None = None,
                            with_namespace: bool = False) -> Any:
        """An assignment target (a name, a tuple of names, ``ns.attr`` with ``with_namespace``), ctx ``store``."""
        if name_only:
            tok = self.stream.current
            if tok.type != "name":
                self.stream.expect("name")
            next(self.stream)
            if tok.value in _UNASSIGNABLE:
                raise _Fallback
            target = _new(_Name)
            target.name = tok.value
            target.ctx = "store"
            target.lineno = tok.lineno
            target.environment = self._env
            return target
        if with_tuple:
            target = self.parse_tuple(simplified=True, extra_end_rules=extra_end_rules,
                                      with_namespace=with_namespace)
        else:
            target = self.parse_primary(with_namespace=with_namespace)
        if type(target) is _Name:
            target.ctx = "store"
        else:
            target.set_ctx("store")
        if not target.can_assign():
            raise _Fallback
        return target

    # -- expressions ----------------------------------------------------------------------------------------

    def parse_expression(self, with_condexpr: bool = True) -> nodes.Expr:
        """An expression; without ``with_condexpr``, one that stops before a top-level ``if``."""
        return self._expr(0 if with_condexpr else 1)

    def parse_condexpr(self) -> nodes.Expr:
        """An expression, conditional ones included (jinja2's entry point of the same name)."""
        return self._expr(0)

    def _expr(self, level: int) -> nodes.Expr:
        """The expression at precedence ``level`` and tighter: 0 conditional, 1 ``or``, 2 ``and``, 3 ``not``,
        4 comparisons, 5 ``+ -``, 6 ``~``, 7 ``* / // %``, 8 ``**`` (jinja2's parse_condexpr … parse_pow).
        Each level's loop runs on the left operand the tighter ones built, with jinja2's line numbers."""
        self._depth += _EXPR_COST
        if self._depth > MAX_NESTING:
            raise _Fallback
        stream = self.stream
        env = self._env
        tok = stream.current
        start = tok.lineno
        if level <= 3 and tok.type == "name" and tok.value == "not":
            next(stream)
            left = _new(_Not)
            left.node = self._expr(3)
            left.lineno = start
            left.environment = env
            if level == 3:
                self._depth -= _EXPR_COST
                return left
            cur = stream.current
        else:
            left = self.parse_unary()
            cur = stream.current
            kind = cur.type
            if kind not in _OPERATOR_TYPES or (kind == "name" and cur.value not in _OPERATOR_NAMES):
                self._depth -= _EXPR_COST
                return left
            lineno = start
            while cur.type == "pow":
                next(stream)
                left = _binary(nodes.Pow, left, self.parse_unary(), lineno, env)
                cur = stream.current
                lineno = cur.lineno
            if level < 8 and cur.type in _MUL_OPS:
                left = self._arithmetic(left, _MUL_OPS, 8, start)
                cur = stream.current
            if level < 7 and cur.type == "tilde":
                operands = [left]
                while cur.type == "tilde":
                    next(stream)
                    operands.append(self._expr(7))
                    cur = stream.current
                left = _new(nodes.Concat)
                left.nodes = operands
                left.lineno = start
                left.environment = env
            if level < 6 and cur.type in _ADD_OPS:
                left = self._arithmetic(left, _ADD_OPS, 6, start)
                cur = stream.current
            if level < 5:
                lineno = start
                ops = []
                while True:
                    kind = cur.type
                    if kind in _COMPARE_OPS:
                        next(stream)
                        op = kind
                    elif kind == "name" and cur.value == "in":
                        next(stream)
                        op = "in"
                    elif kind == "name" and cur.value == "not":
                        ahead = stream.look()
                        if ahead.type != "name" or ahead.value != "in":
                            break
                        stream.skip(2)
                        op = "notin"
                    else:
                        break
                    operand = _new(nodes.Operand)
                    operand.op = op
                    operand.expr = self._expr(5)
                    operand.lineno = None
                    operand.environment = env
                    ops.append(operand)
                    cur = stream.current
                    lineno = cur.lineno
                if ops:
                    node = _new(nodes.Compare)
                    node.expr = left
                    node.ops = ops
                    node.lineno = lineno
                    node.environment = env
                    left = node
        if level < 3:
            lineno = start
            while cur.type == "name" and cur.value == "and":
                next(stream)
                left = _binary(nodes.And, left, self._expr(3), lineno, env)
                cur = stream.current
                lineno = cur.lineno
            if level < 2:
                lineno = start
                while cur.type == "name" and cur.value == "or":
                    next(stream)
                    left = _binary(nodes.Or, left, self._expr(2), lineno, env)
                    cur = stream.current
                    lineno = cur.lineno
            if level == 0:
                lineno = start
                while cur.type == "name" and cur.value == "if":
                    next(stream)
                    node = _new(nodes.CondExpr)
                    node.test = self._expr(1)
                    node.expr1 = left
                    cur = stream.current
                    if cur.type == "name" and cur.value == "else":
                        next(stream)
                        node.expr2 = self._expr(0)
                    else:
                        node.expr2 = None
                    node.lineno = lineno
                    node.environment = env
                    left = node
                    cur = stream.current
                    lineno = cur.lineno
        self._depth -= _EXPR_COST
        return left

    def _arithmetic(self, left: nodes.Expr, ops: dict, level: int, lineno: int) -> nodes.Expr:
        """``left`` followed by one or more of the left-associative operators ``ops`` (token type → node class:
        ``* / // %`` or ``+ -``), each right operand an expression at ``level``; the first node at ``lineno``,
        each later one at its operator's line (jinja2's parse_math1 / parse_math2)."""
        stream = self.stream
        env = self._env
        cur = stream.current
        while cur.type in ops:
            cls = ops[cur.type]
            next(stream)
            left = _binary(cls, left, self._expr(level), lineno, env)
            cur = stream.current
            lineno = cur.lineno
        return left

    def parse_unary(self, with_filter: bool = True) -> nodes.Expr:
        """A primary with its unary ``-``/``+``, subscripts, attribute reads and calls, then (``with_filter``)
        its filters, tests and calls on them."""
        stream = self.stream
        tok = stream.current
        kind = tok.type
        if kind == "name":  # most operands: jinja2's parse_primary for a name, inline
            next(stream)
            value = tok.value
            if value in _BOOLS:
                node = _new(_Const)
                node.value = _BOOLS[value]
            elif value in _NONES:
                node = _new(_Const)
                node.value = None
            else:
                node = _new(_Name)
                node.name = value
                node.ctx = "load"
            node.lineno = tok.lineno
            node.environment = self._env
        elif kind == "sub" or kind == "add":
            self._depth += 1  # jinja2 recurses once per sign as well
            if self._depth > MAX_NESTING:
                raise _Fallback
            next(stream)
            node = _new(nodes.Neg if kind == "sub" else nodes.Pos)
            node.node = self.parse_unary(False)
            self._depth -= 1
            node.lineno = tok.lineno
            node.environment = self._env
        else:
            node = self.parse_primary()
        kind = stream.current.type
        while True:
            if kind == "dot" or kind == "lbracket":
                node = self.parse_subscript(node)
            elif kind == "lparen":
                node = self.parse_call(node)
            else:
                break
            kind = stream.current.type
        if with_filter:
            while True:
                if kind == "pipe":
                    node = self.parse_filter(node)
                elif kind == "name" and stream.current.value == "is":
                    node = self.parse_test(node)
                elif kind == "lparen":
                    node = self.parse_call(node)
                else:
                    break
                kind = stream.current.type
        return node

    def parse_primary(self, with_namespace: bool = False) -> nodes.Expr:
        """A name, constant, string (adjacent strings joined), parenthesized tuple, list or dict literal; with
        ``with_namespace``, ``name.attr`` as an ``NSRef``."""
        stream = self.stream
        env = self._env
        tok = stream.current
        kind = tok.type
        if kind == "name":
            next(stream)
            value = tok.value
            if value in _BOOLS:
                node = _new(_Const)
                node.value = _BOOLS[value]
            elif value in _NONES:
                node = _new(_Const)
                node.value = None
            elif with_namespace and stream.current.type == "dot":
                next(stream)
                attr = stream.current
                if attr.type != "name":
                    stream.expect("name")
                next(stream)
                node = _new(nodes.NSRef)
                node.name = value
                node.attr = attr.value
            else:
                node = _new(_Name)
                node.name = value
                node.ctx = "load"
            node.lineno = tok.lineno
            node.environment = env
            return node
        if kind == "string":
            next(stream)
            value = tok.value
            if stream.current.type == "string":
                parts = [value]
                while stream.current.type == "string":
                    parts.append(stream.current.value)
                    next(stream)
                value = "".join(parts)
            node = _new(_Const)
            node.value = value
            node.lineno = tok.lineno
            node.environment = env
            return node
        if kind == "integer" or kind == "float":
            next(stream)
            node = _new(_Const)
            node.value = tok.value
            node.lineno = tok.lineno
            node.environment = env
            return node
        if kind == "lparen":
            next(stream)
            node = self.parse_tuple(explicit_parentheses=True)
            if stream.current.type == "rparen":
                next(stream)
            else:
                stream.expect("rparen")
            return node
        if kind == "lbracket":
            return self.parse_list()
        if kind == "lbrace":
            return self.parse_dict()
        return super().parse_primary(with_namespace)  # raises jinja2's error

    def parse_tuple(self, simplified: bool = False, with_condexpr: bool = True,
                    extra_end_rules: tuple[str, ...] | None = None, explicit_parentheses: bool = False,
                    with_namespace: bool = False) -> nodes.Expr:
        """An expression, or a ``Tuple`` of comma-separated ones (trailing comma allowed); ``simplified``: of
        primaries only. ``extra_end_rules``: token rules that end the tuple besides ``)``, ``}}`` and ``%}``."""
        stream = self.stream
        level = 0 if with_condexpr else 1
        lineno = stream.current.lineno
        args: list[nodes.Expr] = []
        is_tuple = False
        while True:
            if args:
                if stream.current.type == "comma":
                    next(stream)
                else:
                    stream.expect("comma")
            tok = stream.current
            if tok.type in _TUPLE_END or (extra_end_rules is not None and tok.test_any(*extra_end_rules)):
                break
            if simplified:
                args.append(self.parse_primary(with_namespace=with_namespace))
            else:
                args.append(self._expr(level))
            tok = stream.current
            if tok.type != "comma":
                break
            is_tuple = True
            lineno = tok.lineno
        if not is_tuple:
            if args:
                return args[0]
            if not explicit_parentheses:
                raise _Fallback  # jinja2: "Expected an expression, got …"
        node = _new(nodes.Tuple)
        node.items = args
        node.ctx = "load"
        node.lineno = lineno
        node.environment = self._env
        return node

    def parse_list(self) -> nodes.List:
        """``[a, b, …]`` (trailing comma allowed)."""
        stream = self.stream
        tok = stream.expect("lbracket")
        items: list[nodes.Expr] = []
        while stream.current.type != "rbracket":
            if items:
                stream.expect("comma")
            if stream.current.type == "rbracket":
                break
            items.append(self._expr(0))
        stream.expect("rbracket")
        node = _new(nodes.List)
        node.items = items
        node.lineno = tok.lineno
        node.environment = self._env
        return node

    def parse_dict(self) -> nodes.Dict:
        """``{key: value, …}`` (trailing comma allowed); each ``Pair`` on its key's line."""
        stream = self.stream
        env = self._env
        tok = stream.expect("lbrace")
        items: list[nodes.Pair] = []
        while stream.current.type != "rbrace":
            if items:
                stream.expect("comma")
            if stream.current.type == "rbrace":
                break
            key = self._expr(0)
            stream.expect("colon")
            pair = _new(nodes.Pair)
            pair.key = key
            pair.value = self._expr(0)
            pair.lineno = key.lineno
            pair.environment = env
            items.append(pair)
        stream.expect("rbrace")
        node = _new(nodes.Dict)
        node.items = items
        node.lineno = tok.lineno
        node.environment = env
        return node

    def parse_postfix(self, node: nodes.Expr) -> nodes.Expr:
        """``node`` followed by its subscripts, attribute reads and calls."""
        stream = self.stream
        while True:
            kind = stream.current.type
            if kind == "dot" or kind == "lbracket":
                node = self.parse_subscript(node)
            elif kind == "lparen":
                node = self.parse_call(node)
            else:
                return node

    def parse_filter_expr(self, node: nodes.Expr) -> nodes.Expr:
        """``node`` followed by its filters, tests and calls."""
        stream = self.stream
        while True:
            tok = stream.current
            kind = tok.type
            if kind == "pipe":
                node = self.parse_filter(node)
            elif kind == "name" and tok.value == "is":
                node = self.parse_test(node)
            elif kind == "lparen":
                node = self.parse_call(node)
            else:
                return node

    def parse_subscript(self, node: nodes.Expr) -> nodes.Getattr | nodes.Getitem:
        """``.name``, ``.0`` or ``[…]`` (slices, several subscripts as a tuple) applied to ``node``."""
        stream = self.stream
        env = self._env
        tok = next(stream)
        if tok.type == "dot":
            attr = stream.current
            next(stream)
            if attr.type == "name":
                rv = _new(_Getattr)
                rv.node = node
                rv.attr = attr.value
                rv.ctx = "load"
                rv.lineno = tok.lineno
                rv.environment = env
                return rv
            if attr.type != "integer":
                raise _Fallback  # jinja2: "expected name or number"
            arg = _new(_Const)
            arg.value = attr.value
            arg.lineno = attr.lineno
            arg.environment = env
        elif tok.type == "lbracket":
            args: list[nodes.Expr] = []
            while stream.current.type != "rbracket":
                if args:
                    stream.expect("comma")
                args.append(self.parse_subscribed())
            next(stream)
            if len(args) == 1:
                arg = args[0]
            else:
                arg = _new(nodes.Tuple)
                arg.items = args
                arg.ctx = "load"
                arg.lineno = tok.lineno
                arg.environment = env
        else:
            raise _Fallback  # jinja2: "expected subscript expression"
        rv = _new(_Getitem)
        rv.node = node
        rv.arg = arg
        rv.ctx = "load"
        rv.lineno = tok.lineno
        rv.environment = env
        return rv

    def parse_subscribed(self) -> nodes.Expr:
        """One subscript: an expression or a ``start:stop:step`` slice (each part optional)."""
        stream = self.stream
        lineno = stream.current.lineno
        if stream.current.type == "colon":
            next(stream)
            start = None
        else:
            start = self._expr(0)
            if stream.current.type != "colon":
                return start
            next(stream)
        kind = stream.current.type
        if kind == "colon" or kind == "rbracket" or kind == "comma":
            stop = None
        else:
            stop = self._expr(0)
        step = None
        if stream.current.type == "colon":
            next(stream)
            kind = stream.current.type
            if kind != "rbracket" and kind != "comma":
                step = self._expr(0)
        node = _new(nodes.Slice)
        node.start, node.stop, node.step = start, stop, step
        node.lineno = lineno
        node.environment = self._env
        return node

    def parse_call_args(self) -> tuple[list[nodes.Expr], list[nodes.Keyword], nodes.Expr | None,
                                       nodes.Expr | None]:
        """``(args, kwargs, *dyn_args, **dyn_kwargs)`` of a call: ``(args, keywords, dyn_args, dyn_kwargs)``."""
        stream = self.stream
        stream.expect("lparen")
        args: list[nodes.Expr] = []
        kwargs: list[nodes.Keyword] = []
        dyn_args = dyn_kwargs = None
        require_comma = False
        while True:
            tok = stream.current
            kind = tok.type
            if kind == "rparen":
                break
            if require_comma:
                if kind != "comma":
                    stream.expect("comma")
                next(stream)
                tok = stream.current
                kind = tok.type
                if kind == "rparen":
                    break
            if kind == "mul":
                if dyn_args is not None or dyn_kwargs is not None:
                    raise _Fallback  # jinja2: "invalid syntax for function call expression"
                next(stream)
                dyn_args = self._expr(0)
            elif kind == "pow":
                if dyn_kwargs is not None:
                    raise _Fallback
                next(stream)
                dyn_kwargs = self._expr(0)
            elif kind == "name" and stream.look().type == "assign":
                if dyn_kwargs is not None:
                    raise _Fallback
                stream.skip(2)
                keyword = _new(nodes.Keyword)
                keyword.key = tok.value
                keyword.value = value = self._expr(0)
                keyword.lineno = value.lineno
                keyword.environment = self._env
                kwargs.append(keyword)
            else:
                if dyn_args is not None or dyn_kwargs is not None or kwargs:
                    raise _Fallback
                args.append(self._expr(0))
            require_comma = True
        next(stream)
        return args, kwargs, dyn_args, dyn_kwargs

    def parse_call(self, node: nodes.Expr) -> nodes.Call:
        """``node(…)``: a ``Call`` on the line of its ``(``."""
        lineno = self.stream.current.lineno
        call = _new(_Call)
        call.node = node
        call.args, call.kwargs, call.dyn_args, call.dyn_kwargs = self.parse_call_args()
        call.lineno = lineno
        call.environment = self._env
        return call

    def parse_filter(self, node: nodes.Expr | None, start_inline: bool = False) -> nodes.Expr | None:
        """``node | name(args) | …`` (dotted filter names allowed); ``start_inline``: the first filter's name
        comes without its ``|`` (``{% filter %}`` blocks)."""
        stream = self.stream
        while stream.current.type == "pipe" or start_inline:
            if not start_inline:
                next(stream)
            tok = stream.current
            if tok.type != "name":
                stream.expect("name")
            next(stream)
            name = tok.value
            while stream.current.type == "dot":
                next(stream)
                name += "." + stream.expect("name").value
            filt = _new(_Filter)
            filt.node = node
            filt.name = name
            if stream.current.type == "lparen":
                filt.args, filt.kwargs, filt.dyn_args, filt.dyn_kwargs = self.parse_call_args()
            else:
                filt.args, filt.kwargs, filt.dyn_args, filt.dyn_kwargs = [], [], None, None
            filt.lineno = tok.lineno
            filt.environment = self._env
            node = filt
            start_inline = False
        return node

    def parse_test(self, node: nodes.Expr) -> nodes.Expr:
        """``node is [not] name [arg | (args)]`` (dotted test names allowed); ``Not`` around it when negated."""
        stream = self.stream
        env = self._env
        lineno = next(stream).lineno
        tok = stream.current
        negated = tok.type == "name" and tok.value == "not"
        if negated:
            next(stream)
        name = stream.expect("name").value
        while stream.current.type == "dot":
            next(stream)
            name += "." + stream.expect("name").value
        test = _new(_Test)
        test.node = node
        test.name = name
        tok = stream.current
        kind = tok.type
        if kind == "lparen":
            test.args, test.kwargs, test.dyn_args, test.dyn_kwargs = self.parse_call_args()
        else:
            if kind in _TEST_ARG_TYPES and not (kind == "name" and tok.value in ("else", "or", "and")):
                if kind == "name" and tok.value == "is":
                    raise _Fallback  # jinja2: "You cannot chain multiple tests with is"
                test.args = [self.parse_postfix(self.parse_primary())]
            else:
                test.args = []
            test.kwargs, test.dyn_args, test.dyn_kwargs = [], None, None
        test.lineno = lineno
        test.environment = env
        if not negated:
            return test
        rv = _new(_Not)
        rv.node = test
        rv.lineno = lineno
        rv.environment = env
        return rv


def parse(environment: jinja2.Environment, source: str, name: str | None = None,
          filename: str | None = None) -> nodes.Template:
    """The tree of ``source`` as ``jinja2.parser.Parser(environment, source, name, filename).parse()`` builds
    it, parsed by :class:`FastParser`. The drop-in for ``Environment._parse``.

    With a jinja2 release other than :data:`JINJA2_VERSIONS` (whose grammar this parser was checked against),
    jinja2's parser parses every template.

    Raises what jinja2's parser raises (``jinja2.TemplateSyntaxError`` and its subclasses, ``RecursionError``):
    any failure of the fast parser re-parses the template with jinja2's, so the error is exactly jinja2's. The
    environment's own errors of :class:`core.errors.TemplateRenderError` (the compile time limit) pass through.
    """
    if SUPPORTED:
        try:
            return FastParser(environment, source, name, filename).parse()
        except TemplateRenderError:
            raise
        except Exception:  # RecursionError included
            pass  # parsed again below, outside this handler: jinja2's error carries no context of ours
    return jinja2.parser.Parser(environment, source, name, filename).parse()
