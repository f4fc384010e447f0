"""Faster drop-in versions of jinja2's tree-walking primitives, in place only while one of our compiles runs.

Compiling a template walks its tree many times: jinja2's code generator asks every ``for`` loop whether its body
reads ``loop`` or holds a scoped block (``find_all`` over the loop's subtree), its symbol tracker and dependency
finder visit every frame, the parser sets the environment on every node, and the rewriters of
:mod:`core.templating` and :mod:`core.analysis.caps` add their passes. jinja2 implements the walks with nested
generators — ``find_all`` re-yields every match through one generator per level of depth, and
``iter_child_nodes`` runs a generator over another (``iter_fields``) — and finds each visitor method by formatting
``"visit_" + class name`` on every node. On the corpus these primitives were about a third of a compile
(cProfile of ``Environment._generate``, issue 14).

The replacements give exactly the same values in the same order (``find_all`` and the read-only visitors read a
node's fields when the walk enters it rather than one by one, which differs only for a caller changing nodes
during the walk: none of a compile's callers does); only the call overhead differs. ``tests/test_perf.py`` checks
the compiled code of corpus templates is the same bytes with and without them, and the walks' sequences, the
dependency and undeclared-name finders' and the symbol tracker's results on every corpus tree.

Scope: :func:`active` puts them on jinja2's classes for the duration of a compile of ours
(``core.templating._LimitedSandbox.compile``) and takes them away when the last such compile ends, so a plain
jinja2 environment elsewhere in the process (transformers') runs jinja2's own methods (tested).

* ``Node.iter_fields`` / ``Node.iter_child_nodes`` without ``exclude``/``only`` (the only way jinja2 calls them in
  hot paths) read the instance dictionary directly and fall back to ``getattr`` for anything not in it
  (``iter_child_nodes`` yields :func:`child_nodes`' list); with ``exclude``/``only`` the original runs.
* ``Node.__init__`` writes the instance dictionary directly; ``Node.set_environment`` walks with a list.
* ``Node.find_all`` walks with an explicit stack instead of one generator per level (pre-order, as before).
* ``NodeVisitor.get_visitor`` looks the ``visit_<Class>`` method name up in a per-class table.
* ``NodeVisitor.generic_visit`` of jinja2's read-only visitors (dependency finder, undeclared-name finder, symbol
  tracker) walks with an explicit stack instead of one ``visit`` → ``generic_visit`` recursion per node.
* ``NodeTransformer.generic_visit`` calls the handlers of a transformer that keeps jinja2's ``visit`` directly.
* :func:`absent_from` lets the code generator skip its searches for node classes a template does not contain, and
  (``jinja2.compiler.find_undeclared``) for names its source never writes; :func:`names_unread` for names the
  caller knows a subtree does not read.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

import jinja2.compiler
import jinja2.idtracking
import jinja2.nodes
import jinja2.visitor

_Node = jinja2.nodes.Node
_MISSING = object()

_ORIGINAL: dict[str, Any] = {
    "iter_fields": _Node.iter_fields,
    "iter_child_nodes": _Node.iter_child_nodes,
    "find_all": _Node.find_all,
    "get_visitor": jinja2.visitor.NodeVisitor.get_visitor,
}


def iter_fields(self: Any, exclude: Any = None, only: Any = None) -> Iterator[tuple[str, Any]]:
    """``Node.iter_fields``: ``(name, value)`` of every field set on the node, in ``fields`` order."""
    if exclude is not None or only is not None:
        yield from _ORIGINAL["iter_fields"](self, exclude, only)
        return
    d = self.__dict__
    for name in self.fields:
        value = d.get(name, _MISSING)
        if value is _MISSING:
            try:
                value = getattr(self, name)
            except AttributeError:
                continue
        yield name, value


def iter_child_nodes(self: Any, exclude: Any = None, only: Any = None) -> Iterator[Any]:
    """``Node.iter_child_nodes``: the nodes held by the node's fields (list fields item by item), in order — the
    list :func:`child_nodes` reads (the fields are read when the first child is asked for, not one by one)."""
    if exclude is not None or only is not None:
        yield from _ORIGINAL["iter_child_nodes"](self, exclude, only)
        return
    yield from child_nodes(self)


_local = threading.local()


def node_init(self: Any, *fields: Any, **attributes: Any) -> None:
    """``Node.__init__``: the fields given positionally, then every attribute (``lineno``, ``environment``) from
    the keywords or None, written to the instance dictionary directly; the parser builds tens of thousands of
    nodes per template. Anything jinja2 would refuse (an abstract class, a wrong number of fields) goes to jinja2's
    own method, which raises its error; an unknown keyword raises jinja2's message."""
    cls = type(self)
    if cls.abstract or (fields and len(fields) != len(cls.fields)):
        _ORIGINAL["__init__"](self, *fields, **attributes)
        return
    d = self.__dict__
    if fields:
        d.update(zip(cls.fields, fields))
    for attr in cls.attributes:
        d[attr] = attributes.pop(attr, None)
    if attributes:
        raise TypeError(f"unknown attribute {next(iter(attributes))!r}")


#: Node classes whose fields hold only strings and constants (as jinja2's parser builds them): names, constants
#: and template text, most of a chat template's nodes; a walk does not look into them.
_LEAVES = frozenset({jinja2.nodes.Name, jinja2.nodes.Const, jinja2.nodes.TemplateData})
_NO_CHILDREN: list[Any] = []


def child_nodes(node: Any) -> list[Any]:
    """The children ``node.iter_child_nodes()`` yields, as a list (all fields read now; the caller may change
    it, except the shared empty list given for a leaf of :data:`_LEAVES`, which it must only read)."""
    if type(node) in _LEAVES:
        return _NO_CHILDREN
    d = node.__dict__
    node_cls = _Node
    out = []
    for name in node.fields:
        item = d.get(name, _MISSING)
        if item is _MISSING:
            try:
                item = getattr(node, name)
            except AttributeError:
                continue
        if isinstance(item, list):
            for n in item:
                if isinstance(n, node_cls):
                    out.append(n)
        elif isinstance(item, node_cls):
            out.append(item)
    return out


def set_environment(self: Any, environment: Any) -> Any:
    """``Node.set_environment``: ``environment`` set on the node and every descendant (depth-first here, breadth-first
    in jinja2: the same attribute on the same nodes); returns the node. The parser's last step."""
    stack = [self]
    pop, extend = stack.pop, stack.extend
    while stack:
        node = pop()
        node.environment = environment
        extend(child_nodes(node))
    return self


def find_all(self: Any, node_type: Any) -> Iterator[Any]:
    """``Node.find_all``: every descendant that is a ``node_type`` (a class or tuple of classes), pre-order.
    A node's fields are read when the walk enters it (after it was yielded), all at once rather than one by one
    as jinja2's nested generators do: the same sequence unless the caller changes nodes during the walk, which
    none of the compile's callers do (jinja2's code generator and parser, our rewriters). Yields nothing at once
    for a class :func:`absent_from` vouched for (see there)."""
    if node_type in getattr(_local, "absent", ()):
        return
    stack = child_nodes(self)[::-1]
    pop, extend = stack.pop, stack.extend
    while stack:
        node = pop()
        if isinstance(node, node_type):
            yield node
        kids = child_nodes(node)
        if kids:
            kids.reverse()
            extend(kids)


def find_undeclared(nodes: Any, names: Any) -> set[str]:
    """``jinja2.compiler.find_undeclared``: which of ``names`` the nodes read before setting them. Inside
    :func:`absent_from` given the template's source text, names none of which occur in that text answer the
    empty set at once — every ``Name`` node comes from an identifier of the source (the rewriters add only filter
    and test calls) — which spares jinja2's walk of the whole template for ``self`` and of every loop body for
    ``loop`` when the template never writes it."""
    text = getattr(_local, "text", None)
    unread = getattr(_local, "unread", ())
    if text is not None or unread:
        names = tuple(names)
        if all(name in unread or (text is not None and name not in text) for name in names):
            return set()
    return _ORIGINAL["find_undeclared"](nodes, names)


@contextlib.contextmanager
def names_unread(names: tuple[str, ...]) -> Iterator[None]:
    """Context manager: inside the block (on this thread), :func:`find_undeclared` answers the empty set for a
    search of only ``names`` and names absent from the source text — the caller vouches that every search made
    inside the block looks only at nodes that read none of ``names``. Replaces the enclosing block's names, so
    a nested block with ``()`` takes the promise back (the code generator sets it per ``for`` loop)."""
    previous = getattr(_local, "unread", ())
    _local.unread = names
    try:
        yield
    finally:
        _local.unread = previous


@contextlib.contextmanager
def absent_from(tree: Any, kinds: tuple[type, ...], known: frozenset[type] | None = None,
                text: str | None = None) -> Iterator[frozenset[type]]:
    """Context manager for a walk of ``tree`` that searches it and its subtrees for node classes it rarely holds:
    those of ``kinds`` with no instance anywhere in ``tree`` (found by one walk) make every ``find_all`` of
    them on this thread yield nothing at once inside the block. Yields that set of classes.

    Only for code that searches nodes of ``tree`` alone and adds no node of those classes while it runs —
    jinja2's code generator, which per template looks for ``Extends``, ``Block`` and ``ImportedName`` in the
    whole tree and for ``Block`` again in every ``for`` loop (a chat template has none of them), and whose
    constant folder only ever adds ``Const`` nodes.

    ``known``: the classes of ``kinds`` the caller vouches for (found absent by a walk of its own, or — the code
    generator's ``Name`` — present, but no search of them inside the block would act on what it found); the
    walk is skipped when that is all of ``kinds``. ``text``: the source ``tree`` was parsed from (by the
    project's parser, then rewritten by its rewriters), for :func:`find_undeclared`."""
    if known is not None and known.issuperset(kinds):
        absent = frozenset(kinds)
    else:
        present = {type(n) for n in find_all(tree, _Node)}
        absent = frozenset(k for k in kinds if not any(issubclass(p, k) for p in present))
    previous = getattr(_local, "absent", frozenset())
    previous_text = getattr(_local, "text", None)
    _local.absent = previous | absent
    _local.text = text
    try:
        yield absent
    finally:
        _local.absent = previous
        _local.text = previous_text


_VISIT_NAMES: dict[type, str] = {}


def get_visitor(self: Any, node: Any) -> Any:
    """``NodeVisitor.get_visitor``: the bound ``visit_<NodeClass>`` method of the visitor, or None."""
    tp = type(node)
    name = _VISIT_NAMES.get(tp)
    if name is None:
        name = _VISIT_NAMES[tp] = f"visit_{tp.__name__}"
    return getattr(self, name, None)


def generic_visit(self: Any, node: Any, *args: Any, **kwargs: Any) -> None:
    """``NodeVisitor.generic_visit``: visit every child of ``node`` (and, for children without a handler, their
    children in turn). For the read-only visitors of :data:`_PURE_VISITORS` the subtree is walked with an explicit
    stack, calling each handler in the very order jinja2's recursion calls it (pre-order, fields in order) with the
    same arguments; any other visitor gets jinja2's own method (it may override ``visit``, or change the tree)."""
    cls = type(self)
    if cls not in _PURE_VISITORS:
        return _ORIGINAL["generic_visit"](self, node, *args, **kwargs)
    table = _HANDLERS.get(cls)
    if table is None:
        table = _HANDLERS[cls] = {}
    known = getattr(_local, "children", None) or _NO_KIDS
    stack = [node]
    first = True
    while stack:
        n = stack.pop()
        if first:
            first = False
        else:
            tp = type(n)
            try:
                handler = table[tp]
            except KeyError:
                handler = table[tp] = getattr(cls, f"visit_{tp.__name__}", None)
            if handler is not None:
                handler(self, n, *args, **kwargs)
                continue
        children = known.get(id(n))  # pushed last-first, so the first child is visited next
        if children is None:
            children = child_nodes(n)
            children.reverse()
            stack.extend(children)
        else:
            stack.extend(reversed(children))
    return None


_NO_KIDS: dict[int, list[Any]] = {}


@contextlib.contextmanager
def known_children(children: dict[int, list[Any]]) -> Iterator[None]:
    """Context manager: inside the block (on this thread), the read-only visitors' walks take a node's children
    from ``children`` (``id(node)`` -> what :func:`child_nodes` gave for it, which they do not change) instead of
    reading its fields again. Only for a tree no one changes inside the block whose nodes all outlive it (ids
    are not reused): the code generator's, whose survey of the tree read every node's children once already."""
    previous = getattr(_local, "children", None)
    _local.children = children
    try:
        yield
    finally:
        _local.children = previous


def transform_children(self: Any, node: Any, *args: Any, **kwargs: Any) -> Any:
    """``NodeTransformer.generic_visit``: replace each child of ``node`` by what visiting it returns (None removes
    it; a list field takes a returned sequence's items in its place), field by field, each field read when its
    turn comes; returns ``node``. For a transformer that overrides neither ``visit`` nor ``get_visitor`` (the probe
    rewriter) the handlers are called directly; any other gets jinja2's own method."""
    cls = type(self)
    if cls.visit is not _VISIT or cls.get_visitor is not get_visitor:
        return _ORIGINAL["transform_children"](self, node, *args, **kwargs)
    table = _HANDLERS.get(cls)
    if table is None:
        table = _HANDLERS[cls] = {}
    node_cls = _Node
    d = node.__dict__
    for name in node.fields:
        old = d.get(name, _MISSING)
        if old is _MISSING:
            try:
                old = getattr(node, name)
            except AttributeError:
                continue
        if isinstance(old, list):
            new_values = []
            for value in old:
                if isinstance(value, node_cls):
                    tp = type(value)
                    try:
                        handler = table[tp]
                    except KeyError:
                        handler = table[tp] = getattr(cls, f"visit_{tp.__name__}", None)
                    value = (handler(self, value, *args, **kwargs) if handler is not None
                             else cls.generic_visit(self, value, *args, **kwargs))
                    if value is None:
                        continue
                    if not isinstance(value, node_cls):
                        new_values.extend(value)
                        continue
                new_values.append(value)
            old[:] = new_values
        elif isinstance(old, node_cls):
            tp = type(old)
            try:
                handler = table[tp]
            except KeyError:
                handler = table[tp] = getattr(cls, f"visit_{tp.__name__}", None)
            new_node = (handler(self, old, *args, **kwargs) if handler is not None
                        else cls.generic_visit(self, old, *args, **kwargs))
            if new_node is None:
                delattr(node, name)
            else:
                setattr(node, name, new_node)
    return node


#: jinja2's visitors that only read the tree and do not override ``visit``/``get_visitor``: the dependency finder
#: (filters and tests a template uses), the undeclared-name finder (``loop``, ``caller``…) and the symbol tracker.
_PURE_VISITORS: frozenset[type] = frozenset({jinja2.compiler.DependencyFinderVisitor,
                                             jinja2.compiler.UndeclaredNameVisitor,
                                             jinja2.idtracking.FrameSymbolVisitor})
_HANDLERS: dict[type, dict[type, Any]] = {}  # visitor class -> node class -> unbound visit_<Class> or None

_ORIGINAL["generic_visit"] = jinja2.visitor.NodeVisitor.generic_visit
_ORIGINAL["__init__"] = _Node.__init__
_ORIGINAL["set_environment"] = _Node.set_environment
_ORIGINAL["find_undeclared"] = jinja2.compiler.find_undeclared
_ORIGINAL["transform_children"] = jinja2.visitor.NodeTransformer.generic_visit
_VISIT = jinja2.visitor.NodeVisitor.visit

_FAST = {"iter_fields": iter_fields, "iter_child_nodes": iter_child_nodes, "find_all": find_all,
         "get_visitor": get_visitor, "generic_visit": generic_visit, "transform_children": transform_children,
         "__init__": node_init, "set_environment": set_environment, "find_undeclared": find_undeclared}

_lock = threading.Lock()
_depth = 0        # compiles of ours running now, on any thread (the fast walks are in place while > 0)
_enabled = True   # False: our compiles use jinja2's own walks too (tests compare both)


def _put(table: dict[str, Any]) -> None:
    for name in ("iter_fields", "iter_child_nodes", "find_all", "__init__", "set_environment"):
        setattr(_Node, name, table[name])
    jinja2.visitor.NodeVisitor.get_visitor = table["get_visitor"]
    jinja2.visitor.NodeVisitor.generic_visit = table["generic_visit"]
    jinja2.visitor.NodeTransformer.generic_visit = table["transform_children"]
    jinja2.compiler.find_undeclared = table["find_undeclared"]


@contextlib.contextmanager
def active() -> Iterator[None]:
    """Context manager: the fast walks are on jinja2's ``Node`` and ``NodeVisitor`` inside the block (unless
    :func:`enable` turned them off), jinja2's own outside every such block. Re-entrant and thread-safe: the
    first block to start puts them in place, the last to end takes them away. Another thread compiling with a
    plain jinja2 environment meanwhile gets the fast walks too, which yield exactly what jinja2's yield; once no
    compile of ours runs, the process sees jinja2 unchanged (tested)."""
    global _depth
    with _lock:
        if _depth == 0 and _enabled:
            _put(_FAST)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _put(_ORIGINAL)


def enable(flag: bool = True) -> None:
    """Whether :func:`active` blocks put the fast walks in place (``False``: jinja2's own; the tests compare both
    ways). Takes effect at the next block that starts when none runs; call it while no compile runs."""
    global _enabled
    with _lock:
        _enabled = flag
        if _depth:
            _put(_FAST if flag else _ORIGINAL)


def forget() -> None:
    """Empty the per-class dispatch tables (refilled on the next walk; ``core.memo.clear_caches`` calls this)."""
    _HANDLERS.clear()
    _VISIT_NAMES.clear()


def installed() -> bool:
    """True while the fast walks are in place (inside an :func:`active` block)."""
    return _Node.find_all is find_all
