"""Faster drop-in versions of jinja2's tree-walking primitives, installed once by :mod:`core.templating`.

Compiling a template walks its tree many times: jinja2's code generator asks every ``for`` loop whether its body
reads ``loop`` or holds a scoped block (``find_all`` over the loop's subtree), its symbol tracker and dependency
finder visit every frame, the constant folder revisits every expression, and the probe rewriter of
:mod:`core.analysis.caps` adds another pass. jinja2 implements the
walks with nested generators — ``find_all`` re-yields every match through one generator per level of depth, and
``iter_child_nodes`` runs a generator over another (``iter_fields``) — and finds each visitor method by formatting
``"visit_" + class name`` on every node. On the corpus these primitives were about a third of a compile
(cProfile of ``Environment._generate``, issue 14).

The replacements yield exactly the same values in the same order, just as lazily (a field is read when the walk
reaches it, so a transformer that replaces a field while walking sees what it saw before); only the call overhead
differs. ``tests/test_perf.py`` checks the compiled code of corpus templates is the same bytes with and without
them, and the walks' sequences on every corpus tree.

* ``Node.iter_fields`` / ``Node.iter_child_nodes`` without ``exclude``/``only`` (the only way jinja2 calls them in
  hot paths) read the instance dictionary directly and fall back to ``getattr`` for anything not in it; with
  ``exclude``/``only`` the original runs.
* ``Node.find_all`` walks with an explicit stack instead of one generator per level (pre-order, as before).
* ``NodeVisitor.get_visitor`` looks the ``visit_<Class>`` method name up in a per-class table.
* :func:`absent_from` lets the code generator skip its searches for node classes a template does not contain.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

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
    """``Node.iter_child_nodes``: the nodes held by the node's fields (list fields item by item), in order."""
    if exclude is not None or only is not None:
        yield from _ORIGINAL["iter_child_nodes"](self, exclude, only)
        return
    d = self.__dict__
    node_cls = _Node
    for name in self.fields:
        item = d.get(name, _MISSING)
        if item is _MISSING:
            try:
                item = getattr(self, name)
            except AttributeError:
                continue
        if isinstance(item, list):
            for n in item:
                if isinstance(n, node_cls):
                    yield n
        elif isinstance(item, node_cls):
            yield item


_local = threading.local()


def find_all(self: Any, node_type: Any) -> Iterator[Any]:
    """``Node.find_all``: every descendant that is a ``node_type`` (a class or tuple of classes), pre-order.
    Yields nothing at once for a class :func:`absent_from` vouched for (see there)."""
    if node_type in getattr(_local, "absent", ()):
        return
    stack = [self.iter_child_nodes()]
    while stack:
        for child in stack[-1]:
            if isinstance(child, node_type):
                yield child
            stack.append(child.iter_child_nodes())
            break
        else:
            stack.pop()


@contextlib.contextmanager
def absent_from(tree: Any, kinds: tuple[type, ...]) -> Iterator[frozenset[type]]:
    """Context manager for a walk of ``tree`` that searches it and its subtrees for node classes it rarely holds:
    those of ``kinds`` with no instance anywhere in ``tree`` (found by one walk) make every ``find_all`` of
    them on this thread yield nothing at once inside the block. Yields that set of classes.

    Only for code that searches nodes of ``tree`` alone and adds no node of those classes while it runs —
    jinja2's code generator, which per template looks for ``Extends``, ``Block`` and ``ImportedName`` in the
    whole tree and for ``Block`` again in every ``for`` loop (a chat template has none of them), and whose
    constant folder only ever adds ``Const`` nodes."""
    present = {type(n) for n in find_all(tree, _Node)}
    absent = frozenset(k for k in kinds if not any(issubclass(p, k) for p in present))
    previous = getattr(_local, "absent", frozenset())
    _local.absent = previous | absent
    try:
        yield absent
    finally:
        _local.absent = previous


_VISIT_NAMES: dict[type, str] = {}


def get_visitor(self: Any, node: Any) -> Any:
    """``NodeVisitor.get_visitor``: the bound ``visit_<NodeClass>`` method of the visitor, or None."""
    tp = type(node)
    name = _VISIT_NAMES.get(tp)
    if name is None:
        name = _VISIT_NAMES[tp] = f"visit_{tp.__name__}"
    return getattr(self, name, None)


_FAST = {"iter_fields": iter_fields, "iter_child_nodes": iter_child_nodes, "find_all": find_all,
         "get_visitor": get_visitor}


def install(enabled: bool = True) -> None:
    """Put the fast walks on jinja2's ``Node`` and ``NodeVisitor`` (``enabled=False`` puts jinja2's own back;
    the tests compare both). Idempotent; affects every jinja2 environment of the process, which is safe because
    the results are the same."""
    table = _FAST if enabled else _ORIGINAL
    for name in ("iter_fields", "iter_child_nodes", "find_all"):
        setattr(_Node, name, table[name])
    jinja2.visitor.NodeVisitor.get_visitor = table["get_visitor"]


def installed() -> bool:
    """True when the fast walks are in place."""
    return _Node.find_all is find_all
