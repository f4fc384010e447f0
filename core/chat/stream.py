"""Streaming: feed model output piece by piece, get OpenAI delta chunks.

:class:`StreamingParser` wraps any :class:`~core.chat.base.ChatOutputParser`. After each ``feed`` it parses the
text so far as partial (llama.cpp ``task_result_state::update_chat_msg``: re-parse, diff against the previous
message, emit the diffs — parser notes §5.5) and returns the deltas. Guarantees:

* it never takes back text it emitted: a partial parse that does not extend what was already emitted (content
  or reasoning rewritten, a tool call lost or renamed, arguments rewritten) is *held back* — nothing is emitted
  for it and the next parse is diffed against the last emitted message instead;
* the deltas accumulated so far equal the last emitted parse, which is the parse of the current prefix unless a
  step was held back;
* ``finish()`` parses the whole text as final and emits what is left.

Resuming instead of re-parsing everything per token:

* parsers built on :mod:`core.peg` (the generator's :class:`~core.chat.generator.GeneratedParser` and the PEG
  special handlers) stream through a :class:`PegStreamSession`: the engine's :class:`~core.peg.ParseCache`
  memoizes every rule/tag result that did not look at the end of the input and remembers how far each
  ``until`` searched, and :class:`IncrementalMapper` re-maps only the part of the parse tree after the longest
  unchanged prefix (memoized nodes are the very same objects from one parse to the next); deltas are computed
  from the last tool call on, as llama.cpp's ``compute_diffs`` does;
* a parser with ``session()`` (an object with ``parse(text, is_partial)``) or incremental state
  (``new_state()`` / a ``state`` keyword on ``parse``) is driven through it;
* otherwise each step re-parses the whole prefix. A feed that adds no text does not parse at all.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable

from ..peg import ParseCache
from ..peg import nodes as N
from ..peg.engine import NodeRun, ResultType, parse_next as _parse_next
from ..peg.scanners import OK as _OK_STATUS
from .generator import (MAIN_REST, PREFIX_REST, RECOVER_CONTENT, RECOVER_TRAILING, ParserState, Probe, ViewMemo,
                        consistent_view, covering_message, covers, held_view, prefix_rest)
from .grammar_after import grammar_after
from .mapper import ACTIONS, HOOK_STRINGS, HOOK_TAGS, ChatMapper, escape_json_inner, json_brace_depth, map_parse
from .message import (AssistantMessage, MessageDelta, StreamRetractionError, ToolCall, ToolCallDelta, apply_deltas,
                      tool_call_delta)
from .repairs import is_json_object
from .turn_end import turn_end_hold, turn_end_tokens

# --------------------------------------------------------------------------------------------------------------
# messages made per parsing feed: the dataclasses' fields set directly (a class call through a Python
# ``__init__`` costs about twice the attribute stores; a stream's parsing feed makes a message, a call or two and
# a delta). tests/test_stream_incremental.py checks each against its dataclass.

_new = object.__new__


def _call(name: str, arguments: str, cid: str) -> ToolCall:
    """``ToolCall(name, arguments, cid)``."""
    c = _new(ToolCall)
    c.name = name
    c.arguments = arguments
    c.id = cid
    return c


def _message(content: str, reasoning: str, calls: list, role: str) -> AssistantMessage:
    """``AssistantMessage(content, reasoning, calls, role)``."""
    m = _new(AssistantMessage)
    m.content = content
    m.reasoning_content = reasoning
    m.tool_calls = calls
    m.role = role
    m.repairs = []
    return m


def _call_delta(i: int, cid: str, name: str, arguments: str) -> MessageDelta:
    """``MessageDelta(tool_call=ToolCallDelta(i, cid, name, arguments))``."""
    t = _new(ToolCallDelta)
    t.index = i
    t.id = cid
    t.name = name
    t.arguments = arguments
    d = _new(MessageDelta)
    d.content = ""
    d.reasoning_content = ""
    d.tool_call = t
    return d


# --------------------------------------------------------------------------------------------------------------
# incremental mapping of chat parse trees


# Tags whose mapping action does not depend on the node's own text (pure grouping); anything else, including
# unknown tags, is treated as text-dependent.
_GROUPING_TAGS = frozenset({"", "tool", "tool-arg", "reasoning-block"})
# tags whose mapping does not read the node's text at all (only that the node is there)
_TEXTLESS_TAGS = _GROUPING_TAGS | {"tool-open", "tool-close", "tool-arg-open", "tool-arg-close"}
# tags whose mapping reads the node's own text and nothing else (not the text's length, as the Python-literal
# repair's cut value does, nor the subtree, as a value hook does)
_SPAN_TAGS = frozenset({"content", "reasoning", "tool-name", "tool-id", "tool-args", "tool-args-encoded",
                        "tool-arg-name", "tool-arg-value", "tool-arg-string-value"})


class _Token:
    """The identity of an :class:`IncrementalMapper`'s live calls (``shared_calls = (token, n)``: the first ``n``
    calls of a message made under the token are the mapper's live objects). A restore that replaces a shared
    call starts a new token whose ``parent`` is the old one: the calls before ``floor`` are the same objects
    under both, so consecutive messages keep sharing them (comparing or copying the whole call list per parse
    made the cost of a stream of many calls grow with their number)."""

    __slots__ = ("parent", "floor")

    def __init__(self, parent: "_Token | None" = None, floor: int = 0):
        self.parent = parent
        self.floor = floor


def _shared_count(old: tuple, token: _Token, n: int) -> int:
    """How many first calls a message with ``shared_calls`` ``old`` shares with one of ``token`` that claims
    ``n`` (0 when the tokens are not the same or one link apart)."""
    if old[0] is token:
        return old[1] if old[1] < n else n
    if token.parent is not None and old[0] is token.parent:
        return min(old[1], n, token.floor)
    return 0


class IncrementalMapper:
    """Maps successive parse trees of a growing text to messages, reusing work on the unchanged prefix.

    Wraps :class:`core.chat.mapper.ChatMapper` (same actions, same result as ``map_parse``). What is kept of
    the previous tree is its *right spine*: the top-level nodes, the last of them, its last child, and so on
    while the last child has children. Each spine level is a frame ``[node, children, states]``: ``states[i]``
    is a snapshot of the mapper state before child ``i`` (after the node's own action). A parse re-creates
    only nodes that looked at the end of the text, which lie on that spine; the nodes before them are the very
    same objects. So on the next tree, each level's children are compared by identity (the engine's
    ``AstNode.base`` says which need no reading); where the first different child is the old last one and is
    a re-created node with the same rule, tag and start (and, for text-dependent tags, the same end), the walk
    goes down into it; elsewhere the state is restored to the snapshot before the first different child (a child
    made again that maps as before, :func:`_equivalent`, is not different) and the rest of that level (and, on
    the way back up, of every level above) is mapped afresh — the children that are not last plainly, the last
    one as the new spine. Between two maps the live state is the state after the whole tree, so a tree that only
    grew maps its new nodes from there without a restore.
    Snapshots are O(1): strings are immutable and only the last / pending tool call can still change.
    Raises nothing. :meth:`map` returns a fresh :class:`AssistantMessage`, except when no action ran and nothing
    was restored (the message is then the same): it returns the message it made last time, unless that one
    was given back (:meth:`recycle`) or changed by its receiver (:meth:`touched`).
    """

    def __init__(self) -> None:
        self._Mapper = ChatMapper
        self._actions = ACTIONS
        self._hook_tags = HOOK_TAGS
        self.m: Any = None
        self.frames: list[list[Any]] = []   # the right spine of the last tree: [node, children, states]
        # ``shared_calls`` of the messages made: (token, n) = the first n calls are live objects of the mapper
        # that stay untouched while the token stays; a restore that cuts or replaces one of the calls
        # published under the token starts a new one, which shares the calls before the cut with the one before
        # (see _Token, stream_deltas_between)
        self._token = _Token()
        self._published = 0
        # the tool-call list of a message its receiver is done with (recycle): the next message's list is
        # that one brought up to date, so a message costs the calls that changed, not a copy of all of them
        self._spare: tuple | None = None
        # the message made last, while it is still the mapping of the last tree: an unchanged tree (a parse
        # that only settled what the fast path saw, like a marker's last character) gives it again
        self._last: AssistantMessage | None = None
        self._live: tuple | None = None   # a snapshot of the live state while no action ran since it was taken
        self._acted = False
        # the spine below a level that _map_from left for children after it, by level: (states list of that
        # level, their count then, the node the spine went into, its frames). A tree where those later children
        # are gone again takes that node's spine back instead of mapping the node again: Gemma 4, at the level of
        # the calls (the end of a call is an answer, until the next call's ``<``); tagged arguments, at the level
        # of a call's arguments (after an argument's close, another argument's start, until ``</`` closes the
        # call). Every call of a stream does it
        self._stash: dict[int, tuple] = {}
        # map() may grow ``current`` in place (see map): set by a receiver that takes the growth as its delta and
        # never replaces the message it gets back
        self.grow_current = False

    @property
    def prev_nodes(self) -> tuple:
        """The top-level nodes of the tree mapped last (``()`` before the first)."""
        return self.frames[0][1] if self.frames else ()

    def release(self) -> None:
        """Forget the source text until the next :meth:`map` (which gives it again): a stream's session
        grows its text in place only when nothing else holds it."""
        if self.m is not None:
            self.m.source = ""

    def recycle(self, msg: AssistantMessage) -> None:
        """Take back the tool-call list of ``msg``, a message :meth:`map` made that nobody will read again
        (:class:`StreamingParser` once it has moved on to the next one): it becomes the next message's list."""
        if getattr(msg, "recycler", None) is self:
            msg.recycler = None
            self._spare = (getattr(msg, "shared_calls", None), msg.tool_calls)
            if msg is self._last:
                self._last = None

    def touched(self, msg: AssistantMessage) -> None:
        """``msg``, a message :meth:`map` made, was changed by its receiver: it is no longer the mapping of any
        tree, so it is not given again for an unchanged tree."""
        if msg is self._last:
            self._last = None

    @staticmethod
    def usable() -> bool:
        """Whether the installed mapper exposes the state this class snapshots."""
        m = ChatMapper("")
        return all(hasattr(m, a) for a in ("msg", "pending", "current", "arg_count", "quote_pending",
                                           "args_buffer", "source", "map", "finish"))

    def current_is_last_named(self) -> bool:
        """After :meth:`map`: the call being written is the last call of the message and has a name."""
        m = self.m
        if m is None or not m.msg.tool_calls:
            return False
        last = m.msg.tool_calls[-1]
        return m.current is last and bool(last.name) and m.pending is None

    def reset(self) -> None:
        """Drop all mapping state; the next :meth:`map` maps its tree from scratch."""
        self.m = None
        self.frames = []
        self._token = _Token()
        self._published = 0
        self._spare = None
        self._last = None
        self._live = None
        self._stash = {}

    # -- snapshots -----------------------------------------------------------------------------------------------
    def _snap(self) -> tuple:
        m = self.m
        msg = m.msg
        calls = msg.tool_calls
        cur = m.current
        pend = m.pending
        orphan = None
        if calls:
            last = calls[-1]
            lt: tuple | None = (last.name, last.arguments, last.id)
        else:
            last = lt = None
        if cur is None:
            kind = 0
        elif cur is pend:
            kind = 1
        elif cur is last:
            kind = 2
        else:
            kind, orphan = 3, (cur.name, cur.arguments, cur.id)
        return (msg.content, msg.reasoning_content, len(calls), lt,
                (pend.name, pend.arguments, pend.id) if pend is not None else None,
                kind, orphan, m.arg_count, m.quote_pending, m.args_buffer)

    def _restore(self, s: tuple) -> None:
        (content, reasoning, n, last, pend, kind, orphan, arg_count, quote, buf) = s
        cut = n - 1 if last is not None else n   # the calls before it stay the same objects
        token = self._token
        if cut < self._published:   # a shared call is cut or replaced: a new token, sharing what is before the cut
            token.parent = None     # (one link back: an older message compares its calls in full)
            self._token = _Token(token, cut)
            self._published = 0
        elif token.parent is not None and cut < token.floor:
            token.floor = cut
        m = self.m
        m.msg.content = content
        m.msg.reasoning_content = reasoning
        calls = m.msg.tool_calls
        del calls[n:]
        if last is not None:
            calls[-1] = _call(*last)   # a fresh object: earlier messages may share the old one
        m.pending = _call(*pend) if pend is not None else None
        m.current = (None, m.pending, calls[-1] if calls else None,
                     _call(*orphan) if orphan is not None else None)[kind]
        m.arg_count = arg_count
        m.quote_pending = quote
        m.args_buffer = buf

    # -- walking -------------------------------------------------------------------------------------------------
    @staticmethod
    def _first_diff(ch: tuple, och: tuple, node: Any, old: Any, c: int) -> int:
        """The index of the first of the first ``c`` children of ``ch`` that is not the very same object as in
        ``och`` (the children of ``node`` and of ``old``, None for the top level), else ``c``. The engine's
        ``AstNode.base`` says which children are shared without reading them; otherwise the last candidates
        are checked first, then the prefix is compared at C speed (identity first)."""
        if c == 0:
            return 0
        if node is not None:
            nb = node.base
            if nb is not None:
                ob = old.base
                if ob is not None and nb[2] == ob[2]:
                    off = nb[2]
                    lo = 0
                    if nb[0] is ob[0]:
                        lo = off + len(nb[0])
                    elif nb[1] is ob[0]:
                        lo = off + len(ob[0])
                    if lo:
                        for j in range(off):   # the children before the replayed ones, one by one
                            if ch[j] is not och[j]:
                                return j
                        if lo > c:
                            return c
                        while lo < c and ch[lo] is och[lo]:
                            lo += 1
                        return lo
        # each failed slice comparison copies both prefixes: the likely last shared child is checked first
        if ch[c - 1] is och[c - 1] and ch[:c] == och[:c]:
            return c
        if c > 1 and ch[c - 2] is och[c - 2] and ch[:c - 1] == och[:c - 1]:
            return c - 1
        m = 0
        while m < c and ch[m] is och[m]:
            m += 1
        return m

    def _map_from(self, d: int, ch: tuple, r: int, state: tuple | None) -> tuple | None:
        """Map the children ``ch[r:]`` of spine level ``d`` afresh, the live state being the state before
        ``ch[r]`` (``state``: its snapshot, or None when not taken yet); the last child with children becomes
        the spine below (its frames are built level by level), the others are mapped plainly. Returns the
        snapshot of the live state after them, or None when an action ran after the last one taken (then
        ``_acted`` is set)."""
        frames = self.frames
        stash = self._stash
        if stash and max(stash) >= d:   # the frames of this level and those below change: their stashes go
            for k in [k for k in stash if k >= d]:
                del stash[k]
        if r and len(frames) > d + 1 and frames[d + 1][0] is ch[r - 1]:
            stash[d] = (frames[d][2], r, ch[r - 1], frames[d + 1:])
        del frames[d + 1:]
        states = frames[d][2]
        m_ = self.m
        actions = self._actions
        hook_tags = self._hook_tags
        snap = self._snap
        while True:
            last = len(ch) - 1
            for i in range(r, last + 1):
                c = ch[i]
                if state is None:
                    state = snap()
                states.append(state)
                if c.tag:
                    act = actions.get(c.tag)
                    if act is not None:    # only an action changes the state (``tool`` and the like have none)
                        act(m_, c)
                        state = None
                        self._acted = True
                        if c.tag in hook_tags:   # a value hook read the subtree (mapper.HOOK_TAGS)
                            continue
                cc = c.children
                if not cc:
                    continue
                if i == last:
                    break
                if m_.map_nodes(cc):
                    state = None
                    self._acted = True
            else:
                return state
            states = []
            frames.append([c, cc, states])   # the spine goes on in the last child
            ch, r = cc, 0

    def map(self, nodes: tuple, source: str, current: AssistantMessage | None = None) -> AssistantMessage:
        """The message for a parse tree (top-level ``nodes``) over ``source``. ``current``: the message its
        receiver holds (the stream's emitted one, which it may have grown in place since this mapper made it);
        when the tree maps to a message equal to it, ``current`` itself is returned (nothing is built). With
        :attr:`grow_current`, also when it differs from ``current`` only in that its last call's arguments
        extend or a call was added after it: ``current`` is made equal to it in place (as the stream's fold
        writes a fast feed's text), and ``current.grown`` is the one delta that took it there, for the receiver
        to take (and remove)."""
        frames = self.frames
        m_ = self.m
        if m_ is None or not frames:
            m_ = self.m = self._Mapper(source)
            self._token = _Token()
            self._published = 0
            self._stash = {}
            self.frames = [[None, nodes, []]]
            self._live = self._map_from(0, nodes, 0, None)
            return self._result()
        m_.source = source
        p = m_.pending
        if p is not None and p.name:
            # a named pending call was published with the earlier calls (see _result): the last call may be
            # shared, and mapping on writes to it; a restore makes it a fresh object
            self._live = self._snap()
            self._restore(self._live)
        self._acted = False
        # down the old spine while the new tree re-created its nodes (same rule, tag, start; same end when the
        # node's action reads its text): the state before each of their children is still the logged one
        top = len(frames) - 1
        d = 0
        ch = nodes
        node = None
        path: list[Any] = []    # (level, children, index gone down into) where later children follow
        stashes = self._stash
        while True:
            fr = frames[d]
            och = fr[1]
            if d in stashes:
                stash = stashes[d]
                k = stash[1]
                if len(ch) == k < len(och) and stash[0] is fr[2]:
                    c = ch[k - 1]
                    oc = stash[2]
                    if c is oc or (c.start == oc.start and c.tag == oc.tag and c.rule == oc.rule):
                        # the level shrank back to the children it had when its spine went into its last
                        # child, that child the same or re-created: the old tree becomes that one (its spine
                        # again, the state after it), then the walk goes on as usual
                        below = stash[3]
                        for k2 in [k2 for k2 in stashes if k2 >= d]:   # (the frames below are replaced)
                            del stashes[k2]
                        states = fr[2]
                        state = states[k]
                        self._restore(state)
                        self._live = state
                        self._acted = True
                        del states[k:]
                        frames[d + 1:] = below
                        och = fr[1] = tuple(och[:k])
                        top = len(frames) - 1
            if ch.__class__ is NodeRun and och.__class__ is NodeRun:
                # the items of a repetition resumed from the engine's cache (tool calls): read from the runs'
                # parts, without the tuple protocol's calls (see _run_item, _run_shared)
                nch = ch._n
                n_old = och._n
                j = n_old - 1
                if d < top and j < nch:
                    c = _run_item(ch, j)
                    oc = _run_item(och, j)
                    if (c is not oc and c.start == oc.start and c.tag == oc.tag and c.rule == oc.rule
                            and (c.end == oc.end or c.tag in _TEXTLESS_TAGS) and _run_shared(ch, och, j) == j):
                        fr[0] = node
                        fr[1] = ch
                        if j + 1 < nch:
                            path.append((d, ch, j))
                        d += 1
                        node = c
                        ch = c.children
                        continue
                j = _run_shared(ch, och, nch if nch < n_old else n_old)
                fr[0] = node
                fr[1] = ch
                break
            nch = len(ch)
            j = len(och) - 1
            if d < top and j < nch:
                c = ch[j]
                oc = och[j]
                if (c is not oc and c.start == oc.start and (tag := c.tag) == oc.tag and c.rule == oc.rule
                        and (tag in _TEXTLESS_TAGS or c.end == oc.end
                             or (tag == "tool-args" and source[c.start:c.start + 1] != "{"))
                        and (j == 0 or ch[j - 1] is och[j - 1]
                             and (j == 1 or (ch[:j - 1] == och[:j - 1] if j < 8   # a few siblings: at C speed
                                             else self._first_diff(ch, och, node, fr[0], j - 1) == j - 1)))):
                    fr[0] = node
                    fr[1] = ch
                    if j + 1 < nch:
                        path.append((d, ch, j))
                    d += 1
                    node = c
                    ch = c.children
                    continue
            n_old = len(och)
            c = nch if nch < n_old else n_old
            j = self._first_diff(ch, och, node, fr[0], c)
            while j < c and _equivalent(ch[j], och[j]):
                # a node made again that maps as before (a call's opening that took the whitespace after the
                # name, a complete value): the first difference is after it
                j += 1
                while j < c and ch[j] is och[j]:
                    j += 1
            fr[0] = node
            fr[1] = ch
            break
        if j < n_old:
            # the first difference (or the level shrank: then its new last child is mapped again so that it
            # has its frame): back to the state before it
            r = j if j < nch else max(nch - 1, 0)
            states = fr[2]
            state = states[r]
            self._restore(state)
            self._acted = True
            del states[r:]
            state = self._map_from(d, ch, r, state)
        elif j < nch:   # only new children after the old ones: mapped on from the live state
            state = self._map_from(d, ch, j, self._live)
        else:
            state = self._live
        # on the way back up: the children after the one gone down into, in the levels above
        while path:
            d, ch, j = path.pop()
            state = self._map_from(d, ch, j + 1, state)
        self._live = state
        if not self._acted and self._last is not None:
            # no action ran and nothing was restored: the message is the one made last time, which nobody
            # has given back or changed (a parse that only settled what the fast path saw, a marker's nodes)
            return self._last
        if current is not None:
            grown = self._grown_from(current, self.grow_current)
            if grown is not None:
                # actions ran (or a restore) but the message is the one the receiver holds (a parse that changed
                # no field: an empty value starting, a call closing with complete arguments, a literal
                # completing), or that one grown in place (a value or key closing or opening: the last call's
                # arguments; a name completing: a call added): no message built, no diff of two messages
                self._last = current if getattr(current, "recycler", None) is self else None
                if grown:
                    current.grown = grown
                return current
        return self._result()

    def _grown_from(self, msg: AssistantMessage, grow: bool) -> MessageDelta | str | None:
        """The empty string when :meth:`_result` would give a message equal to ``msg`` (compared field by field;
        the calls before the last one only through ``shared_calls``: the same live objects of this mapper,
        untouched while its token stays — otherwise None, and the message is built); with ``grow``, when it
        would differ only in that its last call's arguments extend ``msg``'s (those are written into ``msg``: a
        fresh last call, the list copied unless this mapper made it) or that it has one call more
        (:meth:`_call_added`), ``msg`` made equal to it in place and the one delta from the old ``msg`` to it;
        else None. Raises nothing."""
        m = self.m
        mm = m.msg
        calls = mm.tool_calls
        mc = msg.tool_calls
        p = m.pending
        named = p is not None and p.name
        # the number of calls first: a parse that names a new call (a delta) is told apart at once
        k = len(mc)
        if k != (len(calls) + 1 if named else len(calls)):
            return self._call_added(msg, k) if grow and k + 1 == (len(calls) + 1 if named else len(calls)) else None
        if msg.content != mm.content or msg.role != mm.role:
            return None
        r = mm.reasoning_content
        if r != msg.reasoning_content and (msg.reasoning_content or r.strip(" \n\r\t")):
            return None
        if named:
            args = m.args_buffer or p.arguments
            if m.quote_pending and args:
                args += '"'
            last = mc[-1]
            old = last.arguments
            grew = args != old
            if (grew and not (grow and args.startswith(old))) or last.name != p.name or last.id != p.id:
                return None
            live = len(calls)
        elif calls:
            last = mc[-1]
            c = calls[-1]
            args = c.arguments
            old = last.arguments
            grew = args != old
            if (grew and not (grow and args.startswith(old))) or last.name != c.name or last.id != c.id:
                return None
            live = len(calls) - 1
        else:
            return ""
        if live:
            shared = getattr(msg, "shared_calls", None)
            if shared is None or shared[0] is not self._token or shared[1] < live:
                return None
        if not grew:
            return ""
        out = msg.tool_calls
        if getattr(msg, "recycler", None) is not self:   # a list others may hold: copied (ours is the receiver's)
            out = msg.tool_calls = list(out)
        out[-1] = _call(last.name, args, last.id)
        return _call_delta(k - 1, "", "", args[len(old):])

    def _call_added(self, msg: AssistantMessage, k: int) -> MessageDelta | None:
        """:meth:`_grown_from` for a mapping with one call more than ``msg`` (its ``k`` calls): when ``msg``'s
        content, reasoning and role are the mapping's and its calls those of the mapping before the new one (the
        earlier ones the same live objects, through ``shared_calls``; its last one equal), the new call is
        appended to ``msg`` and ``msg`` becomes what :meth:`_result` would give (the calls before the new one the
        live objects, ``shared_calls`` as it sets them); the new call's delta is returned. Else None."""
        m = self.m
        mm = m.msg
        if msg.content != mm.content or msg.role != mm.role:
            return None
        r = mm.reasoning_content
        if r != msg.reasoning_content and (msg.reasoning_content or r.strip(" \n\r\t")):
            return None
        calls = mm.tool_calls
        if k:
            if k > 1:
                shared = getattr(msg, "shared_calls", None)
                if shared is None or shared[0] is not self._token or shared[1] < k - 1:
                    return None
            last = msg.tool_calls[-1]
            live = calls[k - 1]
            if last.arguments != live.arguments or last.name != live.name or last.id != live.id:
                return None
        p = m.pending
        if p is not None and p.name:
            args = m.args_buffer or p.arguments
            if m.quote_pending and args:
                args += '"'
            new = _call(p.name, args, p.id)
        else:
            c = calls[k]
            new = _call(c.name, c.arguments, c.id)
        out = msg.tool_calls
        if getattr(msg, "recycler", None) is not self:   # (as in _grown_from)
            out = msg.tool_calls = list(out)
        if k:
            out[k - 1] = live
        out.append(new)
        n = len(calls) - 1
        if n > 0:
            if n > self._published:
                self._published = n
            msg.shared_calls = (self._token, n)
        else:
            msg.__dict__.pop("shared_calls", None)
        return _call_delta(k, new.id, new.name, new.arguments)

    def _result(self) -> AssistantMessage:
        """What ``ChatMapper.finish()`` returns, computed without touching the live state (which must stay
        reusable): a named pending call is appended with its buffered arguments and pending quote, reasoning
        that is only whitespace becomes "". The last call is a fresh object (the live one may still change);
        the earlier ones are shared. ``tests/test_stream_incremental.py`` checks it against ``map_parse``."""
        m = self.m
        msg = m.msg
        calls = msg.tool_calls
        p = m.pending
        fresh: ToolCall | None = None
        if p is not None and p.name:
            args = m.args_buffer or p.arguments
            if m.quote_pending and args:
                args += '"'
            fresh = _call(p.name, args, p.id)
            live = len(calls)
        elif calls:
            last = calls[-1]
            fresh = _call(last.name, last.arguments, last.id)
            live = len(calls) - 1
        else:
            live = 0
        spare = self._spare
        if spare is not None:
            # a recycled list: its first ``shared`` calls are still the live ones while the token stays
            self._spare = None
            shared, out_calls = spare
            keep = _shared_count(shared, self._token, live) if shared is not None else 0
            del out_calls[keep:]
            if live > keep:
                out_calls += calls[keep:live]
        else:
            out_calls = calls[:live]
        if fresh is not None:
            out_calls.append(fresh)
        r = msg.reasoning_content
        if r and not r.strip(" \n\r\t"):
            r = ""
        out = _message(msg.content, r, out_calls, msg.role)
        # the receiver holds the only reference to out_calls; it may give it back (recycle) or change its
        # last call (StreamingParser._fold)
        out.recycler = self
        # the calls before the live last one are never changed again by mapping forward (only the last or
        # the pending call is written to); _restore changes the token before cutting one of them
        n = len(calls) - 1
        if n > 0:
            if n > self._published:
                self._published = n
            out.shared_calls = (self._token, n)
        self._last = out
        return out


def _equivalent(c: Any, oc: Any) -> bool:
    """Whether ``c``, a node of the new tree, maps as ``oc`` of the old one did: made again (it looked at the end)
    for the same rule or tag at the same start, over the very same children (a tuple, compared item by item by
    identity), and either its tag's action reads no text (:data:`_TEXTLESS_TAGS`, or the tag has no action) or it
    ends where it did (the same text: the stream's text only grows) and its action reads nothing else
    (:data:`_SPAN_TAGS`)."""
    tag = c.tag
    return (c.start == oc.start and tag == oc.tag and c.rule == oc.rule
            and (tag in _TEXTLESS_TAGS or tag not in ACTIONS or (c.end == oc.end and tag in _SPAN_TAGS))
            and c.children.__class__ is tuple and c.children == oc.children)


def _run_item(r: NodeRun, i: int) -> Any:
    """``r[i]`` for ``0 <= i < len(r)``, read from the run's parts (``NodeRun.__getitem__`` without its
    generality: negative indices and slices)."""
    t = r._t
    if i >= t:
        return r.tail[i - t]
    head = r.head
    h = len(head)
    if i < h:
        return head[i]
    return r.run[i - h]


def _run_shared(a: NodeRun, b: NodeRun, c: int) -> int:
    """How many of the first ``c`` items of two runs (``c`` at most the length of each) are the very same
    objects: the items both read from one shared list (it only ever grows: its first ``k`` items never change)
    after equal heads are shared without reading them; the rest are compared one by one."""
    lo = 0
    ha = a.head
    if a.run is b.run and (ha is b.head or ha == b.head):
        lo = len(ha) + (a.k if a.k < b.k else b.k)
        if lo >= c:
            return c
    while lo < c and _run_item(a, lo) is _run_item(b, lo):
        lo += 1
    return lo


# --------------------------------------------------------------------------------------------------------------
# sessions


class TurnHeaderCut:
    """Repair ``repeated-turn-header`` (:func:`core.chat.repairs.header_cut`) for a stream that only appends:
    the parsed output is the model's output without a repeated assistant turn header and the whitespace after
    it. While the output may still be (or still grow) that header, it is kept here (a few characters); once a
    character after it decides the cut, appended text is appended to the parsed output unchanged."""

    __slots__ = ("fn", "head", "cut", "prefix")

    def __init__(self, parser: Any):
        self.fn = getattr(parser, "header_cut", None)
        self.head = ""                                # the output while the cut is undecided
        # no header to cut (the parsers' header_cut reads these two): decided at once, nothing called per stream
        none = getattr(parser, "turn_header", None) == "" and not getattr(parser, "content_header", "") \
            and not getattr(parser, "prompt_tails", ())
        self.cut: int | None = None if callable(self.fn) and not none else 0
        self.prefix = ""                              # what was cut

    def append(self, added: str) -> str | None:
        """What ``added`` adds to the parsed output (possibly ""), or None while the whole output is still a
        proper prefix of the header (nothing to show yet)."""
        if self.cut is not None:
            return added
        head = self.head + added
        self.head = head
        cut = self.fn(head, True)
        if cut is None:
            return None
        if cut < len(head):   # a character after the header (and its whitespace), or no header at all
            self.cut, self.prefix, self.head = cut, head[:cut], ""
            return head[cut:]
        return ""             # the header and whitespace so far: the parsed output is still empty

    def raw(self, parsed: str) -> str:
        """The model's output, given the parsed output ``parsed``."""
        return self.prefix + parsed if self.cut is not None else self.head


class PegStreamSession:
    """Incremental parsing for a parser built on :mod:`core.peg` (has ``arena`` and ``generation_prompt``).

    Mirrors :meth:`core.chat.generator.GeneratedParser.parse_detailed`: the main root when it covers the text,
    else the recovery (entries, the main root plus the rest as content, the raw output as content) — for a
    partial parse only when it extends the prefix-consistent view (:func:`core.chat.generator.consistent_view`,
    memoized per stream); each entry keeps its own :class:`~core.peg.ParseCache`, and the mapping of the
    entry in use is incremental.
    """

    # the region after a call's closed wrapper (_after_wrapper): the next call's opening without a parse
    # (fewer parses and less CPU per call; the parse where the next name completes then also does the opening)
    wrapper_after = True

    def __init__(self, parser: Any):
        self.parser = parser
        self._ParseCache = ParseCache
        self.caches: dict[Any, Any] = {}
        self.mappers: dict[Any, IncrementalMapper] = {}

        self.entries: list[Any] = ([RECOVER_CONTENT] if getattr(parser, "eps_fallback", False)
                                   else [None, RECOVER_TRAILING, MAIN_REST, RECOVER_CONTENT, PREFIX_REST])
        self.recovery = [e for e in self.entries if e is not None]
        self.open_region: OpenRegion | None = None
        self._wrappers: dict = {}   # (rule, spine) -> its GrammarAfter or None (see _after_wrapper)
        self._json_scan: tuple | None = None
        self._json_value_scan: tuple | None = None   # (node start, scanned up to, advance_json_value state)
        self._json_rules: dict[str, bool] = {}
        self._rest_msg: AssistantMessage | None = None   # _recover's "main + rest" message of this parse
        # the message of the last parse when it set an open region of a covered text, and how many characters
        # the stream's fast path took after it before this parse (set by StreamingParser): that prefix's view
        # is that message, which the stream has grown in place (see _parse_text's probe)
        self._view: AssistantMessage | None = None
        # the message the stream holds (its emitted one), told by StreamingParser before parse_appended: a parse
        # whose tree maps to an equal message gives it back (IncrementalMapper.map), with no message built
        self.current: AssistantMessage | None = None
        self.settled = 0

        self.memo = ViewMemo()
        self.memo.trust()    # this session checks that texts extend (parse) or is told so (parse_appended)
        self._full: str | None = None    # generation prompt + the output of the last parse (after the cut)
        self._cutter = TurnHeaderCut(parser)
        # request setup, before the first token (llama.cpp builds its parser when the request is applied):
        # the arena's compilation, the tag table of the fast paths and the first entry's cache and mapper,
        # so that the first feed costs a parse like any other
        compile_arena = getattr(parser.arena, "compile", None)
        if compile_arena is not None:
            compile_arena()
        # whether some value hook of the arena declared string values (the fast path of _open_hook_string)
        self._hooked = any(HOOK_STRINGS.get(t) for t in self._tag_delimiters())
        # a recovery that parses the text from an entry of its own (its message may change shape as text comes)
        self._entry_recovery = any(e in parser.arena.entries for e in (RECOVER_TRAILING, RECOVER_CONTENT))
        try:   # what the grammar allows after a call's JSON arguments (kept on the arena, built once)
            grammar_after(parser.arena)
        except Exception:  # noqa: BLE001 - an optimisation: built on first use then
            pass
        self.caches[self.entries[0]] = ParseCache()
        self.mappers[self.entries[0]] = IncrementalMapper()
        if self.entries[0] is None:
            self._prime()
            # the main root's mapping is given the stream's message (``current``, parse_appended) and may grow
            # its last call's arguments in place: StreamingParser takes that as the delta. Not with repair
            # call-ends-reasoning, whose held view may replace the mapped message after the mapping
            self.mappers[None].grow_current = not getattr(parser, "hold_calls_in_reasoning", "")

    def _prime(self) -> None:
        """Request setup, continued: parse and map the generation prompt alone (every text of the stream starts
        with it) into the main root's cache and mapper, so that the first feed resumes from there as a later
        feed resumes from the feed before it (rather than building the stream's first tree and mapper state)."""
        gp = self.parser.generation_prompt
        try:
            r = self._run(None, gp)
            if r is not None and (r.need_more_input or (r.success and r.end >= len(gp))):
                self.mappers[None].map(r.nodes, gp)
                self.mappers[None].release()
        except Exception:  # noqa: BLE001 - an optimisation: without it the first feed starts from scratch
            self.caches[None] = self._ParseCache()
            self.mappers[None] = IncrementalMapper()

    @staticmethod
    def supports(parser: Any) -> bool:
        """Arena-based parser with the standard mapper (not special formats with their own mappers)."""
        arena = getattr(parser, "arena", None)
        return (arena is not None and hasattr(arena, "parse") and isinstance(getattr(parser, "generation_prompt", None), str)
                and getattr(parser, "mapper", None) is None and IncrementalMapper.usable())

    def _run(self, entry: Any, text: str) -> Any:
        cache = self.caches.get(entry)
        if cache is None:
            cache = self.caches[entry] = self._ParseCache()
        try:
            return self.parser.arena.parse(text, lenient=True, entry=entry, cache=cache)
        except (RecursionError, MemoryError):
            return None

    def _map(self, entry: Any, r: Any, text: str) -> tuple[AssistantMessage, "IncrementalMapper | None"]:
        mapper = self.mappers.get(entry)
        if mapper is None:
            mapper = self.mappers[entry] = IncrementalMapper()
        try:
            return mapper.map(r.nodes, text), mapper
        except Exception:  # never leave a half-updated mapping behind: start over, map this tree fully
            mapper.reset()

            return map_parse(r), None

    def parse(self, output: str, is_partial: bool = False) -> AssistantMessage:
        """Message for ``output`` (model text, without the generation prompt), reusing this stream's state.

        Same result as the parser's own ``parse(output, is_partial)``: the main root when it covers the text,
        else the recovery entries; for a partial text, the prefix-consistent view. Never raises on arbitrary
        text (a failed parse falls back to content).
        """
        parser = self.parser
        if not is_partial:   # the final parse is the one-shot parse (settled by core.chat.repairs)
            self.open_region = None
            return parser.parse(output, False)
        self.open_region = None
        cutter = TurnHeaderCut(parser)
        eff = cutter.append(output)
        if eff is None:      # still a prefix of a repeated turn header: nothing to show yet
            return AssistantMessage()
        self._cutter = cutter
        text = parser.generation_prompt + eff
        if self._full is not None and not text.startswith(self._full):
            self.memo = ViewMemo()
            self.memo.trust()
            self._json_scan = None   # the string state scanned in the old text
            self._json_value_scan = None
        self._full = text
        return self._parse_text(text, eff)

    def parse_appended(self, added: str, is_partial: bool = True) -> AssistantMessage:
        """:meth:`parse` of the previous output followed by ``added`` (the caller vouches that the text only
        grew: :class:`StreamingParser`), without comparing the whole text with the previous one."""
        self.open_region = None
        settled, view = self.settled, self._view
        self.settled = 0
        self._view = None
        cutter = self._cutter
        eff = added if cutter.cut is not None else cutter.append(added)   # (decided: the text as it comes)
        if eff is not None:
            full = self._full
            if full is None:
                full = self.parser.generation_prompt
            caches = self.caches.values()
            settled = (len(full) + settled, view) if settled and view is not None else None
            # drop this session's other references to the text so that CPython grows it in place
            # (a copy of the whole text per parse otherwise: ~5 µs at 350 KB): the caches are vouched for
            # again below, the mappers are given the new text when they map
            self._full = None
            for cache in caches:
                cache.text = ""
            for mapper in self.mappers.values():   # (IncrementalMapper.release)
                if mapper.m is not None:
                    mapper.m.source = ""
            full += eff
            self._full = full
            if is_partial:
                for cache in caches:
                    cache.vouch(full)
                current, self.current = self.current, None
                return self._parse_text(full, None, settled, current)
        gp = self.parser.generation_prompt
        if not is_partial:
            return self.parser.parse(self._cutter.raw((self._full or gp)[len(gp):]), False)
        return AssistantMessage()   # still a prefix of a repeated turn header: nothing to show yet

    def tail(self, k: int) -> str:
        """The last ``k`` characters of the output so far (``k`` > 0)."""
        full = self._full or ""
        return full[max(len(self.parser.generation_prompt), len(full) - k):]

    def _parse_text(self, text: str, output: str | None, settled: tuple | None = None,
                    current: AssistantMessage | None = None) -> AssistantMessage:
        """The partial parse of ``text`` (generation prompt + ``output``, the output after a repeated turn
        header; None: sliced when needed). ``settled``: (length, message) of a prefix whose main parse covers it
        with the switches of the last parse, and that message (the stream's fast path took the text from the
        last parse up to there: the same tree, its open region longer). ``current``: the message the stream holds,
        given back when the main root's message equals it (see IncrementalMapper.map)."""
        self.open_region = None
        self._view = None
        main = None
        if self.entries[0] is None:
            try:   # (_run, inlined: the main entry's cache is made with the session)
                cache = self.caches[None]
                # the stream's next parse (the cache's last one was of this arena's main entry, lenient)
                main = (_parse_next(cache, text) if cache.fast is not None
                        else self.parser.arena.parse(text, lenient=True, entry=None, cache=cache))
            except (RecursionError, MemoryError):
                main = None
            if main is not None and not main.switches:
                # the common case first: the main root covers the text (it needs more input, or succeeded up
                # to the end: generator.covers) and abandoned nothing it had shown, so its message is the view
                nmi = main.type is _NEED_MORE_INPUT
                if nmi or (main.type is _SUCCESS and main.end >= len(text)):
                    mapper = self.mappers[None]    # (made with the session; _map's fallback inlined)
                    try:
                        msg = mapper.map(main.nodes, text, current)
                    except Exception:  # never leave a half-updated mapping behind: start over, map fully
                        mapper.reset()

                        msg = map_parse(main)
                        mapper = None
                    memo = self.memo     # (ViewMemo.note, inlined)
                    if memo.text is not None:
                        memo.sync(text)
                    memo.last_len = len(text)
                    memo.last_covers = True
                    memo.last_switches = _NO_SWITCHES
                    if mapper is not None and (nmi or (self.wrapper_after and mapper.m is not None
                                                       and mapper.m.pending is None)):
                        # the region is found on the next feed (resolve_region), before its text is tried on it:
                        # not paid by this parse (the parses that open or close a value, the costliest of a stream
                        # of calls, are followed by fast feeds) — what it reads stays as it is until then
                        region = OpenRegion("lazy", ())
                        region.lazy = (main, len(text), mapper, msg, nmi)
                        self.open_region = region
                    held = held_view(self.parser, main, text, msg)
                    if held is not None:   # repair call-ends-reasoning: the rest waits for the final parse
                        self.open_region = OpenRegion("hidden", ())
                        return held
                    return msg
        is_partial = True
        parser = self.parser
        gp = parser.generation_prompt
        covered: AssistantMessage | None = None
        mapper = None
        if main is not None and covers(main, text):
            msg, mapper = self._map(None, main, text)
            covered = msg      # (switched: the view decides, below)
        if not is_partial or main is None:
            return covered if covered is not None else self._recover(text, output, main)
        gp_len = len(gp)
        arena = parser.arena
        recover = getattr(parser, "_recover", None)

        memo = self.memo
        if settled is not None and memo.last_covers and memo.last_len < settled[0] < len(text):
            memo.last_len = settled[0]   # the texts up to there covered, as the last parse's did

        def probe(k: int) -> Probe:
            if settled is not None and k == settled[0]:
                return Probe(settled[1].copy(), memo.last_switches, lambda: AssistantMessage())
            t = text[:k]
            try:
                r = arena.parse(t, lenient=True)
            except (RecursionError, MemoryError):
                return Probe(None, frozenset(), lambda: AssistantMessage(content=t[gp_len:]))
            return Probe(map_parse(r) if covers(r, t) else None, r.switches,
                         (lambda: recover(t, t[gp_len:], r, None)[0]) if recover is not None
                         else (lambda: AssistantMessage(content=t[gp_len:])))
        self._rest_msg = None
        recovered: list[AssistantMessage] = []

        def recover_top() -> AssistantMessage:
            recovered.append(self._recover(text, output, main))
            return recovered[-1]
        top = Probe(covered, main.switches, recover_top)
        msg = consistent_view(text, gp_len, probe, top, self.memo)
        self.memo.note(text, covered is not None, main.switches)
        if msg is covered and main.need_more_input and mapper is not None:
            # the text's own message is the view: text that only extends its open region keeps it so (the
            # switches, before the region, stay the same)
            self.open_region = self._region_of(main, len(text), mapper, msg)
            if self.open_region is not None:
                self._view = msg
        elif msg is not None and msg is self._rest_msg and main.blind:
            # the main root stopped early without reading the end (a handler's root after its tool call, e.g.
            # GPT-OSS's ``<|call|>``): a longer text parses the same, so the view stays "its message + the rest
            # as content" (the view of the text where it stopped covering is fixed, and this one extends it)
            self.open_region = OpenRegion("content", ())
        elif (main.fail and main.blind and recovered and msg is not recovered[-1] and not self._entry_recovery
              and len(recovered[-1].tool_calls) < len(msg.tool_calls)):
            # the main root failed without reading the end, so it fails the same on any longer text, and the only
            # recovery left is prefix_rest: the longest prefix that parses stays where it is, the recovered message
            # only gains content — never the call the view holds and it dropped. The view is the shorter
            # prefix's, fixed: appended text changes nothing until the final parse
            self.open_region = OpenRegion("hidden", ())
        self._rest_msg = None
        held = held_view(self.parser, main, text, msg) if msg is covered else None
        if held is not None:   # repair call-ends-reasoning (as in the common case above)
            self.open_region = OpenRegion("hidden", ())
            return held
        return msg

    def resolve_region(self, lazy: tuple) -> "OpenRegion | None":
        """The open region of a parse whose region was left to the next feed (``OpenRegion("lazy")``, set by
        :meth:`_parse_text`; ``lazy`` = (parse result, length of its text, mapper, its message, whether it needed
        more input)), or None. Reads only what no feed changes before the next parse: that parse's result, the
        mapper's state after it, the message the stream holds."""
        main, n, mapper, msg, nmi = lazy
        region = None
        if nmi:
            region = (self._pending_literal(main, n, mapper, msg) if main.pending is not None
                      else self._region_of(main, n, mapper, msg))
        if self.wrapper_after and mapper.m is not None and mapper.m.pending is None:
            if region is None:
                # decided when text comes (a fast feed when it holds): the parse closed a call's wrapper
                region = OpenRegion("after", ())
                region.lazy = (self, main, n, mapper)
            elif region.after_rule:
                # text the literal (and what follows it) does not take may still be text after a closed
                # wrapper (Qwen3: after ``}\n``, the ``<`` of ``</tool_call>`` is not the ``,`` of another
                # call): then the region becomes "after" (StreamingParser._fast)
                region.lazy = (self, main, n, mapper)
        if region is not None:
            self._view = msg
        return region

    def _recover(self, text: str, output: str | None, main: Any) -> AssistantMessage:
        """The recovered message of a text the main root does not cover (as the parser's ``_recover``, with
        this session's caches and incremental mapping)."""
        arena = self.parser.arena
        for entry in self.recovery:
            if entry == MAIN_REST:
                if main is not None and main.success:
                    # the main root stopped early: its message, then the rest as content
                    out = map_parse(main)
                    out.content += text[max(main.end, len(self.parser.generation_prompt)):]
                    self._rest_msg = out
                    return out
                continue
            if entry == PREFIX_REST:
                if main is not None and main.fail:
                    self.memo.sync(text)
                    found = prefix_rest(text, len(self.parser.generation_prompt),
                                        lambda k: covering_message(arena, text[:k]), self.memo)
                    if found is not None:
                        return found
                continue
            if entry not in arena.entries:
                continue
            r = self._run(entry, text)
            if r is not None and not r.fail:
                return self._map(entry, r, text)[0]
        return AssistantMessage(content=output if output is not None else text[len(self.parser.generation_prompt):])

    # -- fast path: text that only extends an open ``until`` region ------------------------------------------
    def _tag_delimiters(self) -> dict[str, tuple[str, ...] | None]:
        """For each tag of the arena: the union of the delimiters of the ``until`` parsers it wraps (through
        rules, atomics, schema/gbnf/ac wrappers), or None when some node with that tag wraps anything else."""
        cached = getattr(self, "_tag_delims", None)
        if cached is not None:
            return cached

        arena = self.parser.arena
        shared = getattr(arena, "_stream_tag_delims", None)   # the same for every stream of the arena
        if shared is not None:
            self._tag_delims, self._tag_exact = shared
            return self._tag_delims
        out: dict[str, Any] = {}
        exact: dict[str, set] = {}
        for node in arena.nodes:
            if not isinstance(node, N.Tag):
                continue
            child = arena.nodes[node.child] if node.child >= 0 else None
            for _ in range(32):
                if isinstance(child, N.Rule) and not child.native:
                    child = arena.nodes[child.child]
                elif isinstance(child, (N.Atomic, N.Schema, N.Gbnf, N.Ac)):
                    child = arena.nodes[child.child]
                else:
                    break
            prev = out.get(node.tag, ())
            if isinstance(child, N.Until) and prev is not None:
                out[node.tag] = tuple(dict.fromkeys(prev + tuple(d for d in child.delimiters if d)))
                own = frozenset(d for d in child.delimiters if d)
                if own:  # an until without delimiters takes the rest: it never stops before a cut one
                    exact.setdefault(node.tag, set()).add(own)
            else:
                out[node.tag] = None
        self._tag_delims = out
        # tags all of whose until parsers that can stop at a delimiter stop at the same ones: where a cut
        # delimiter is held back depends on the very set of the until that stopped, which the union may exceed
        self._tag_exact = {t for t, sets in exact.items() if len(sets) == 1 and out.get(t) is not None}
        try:
            arena._stream_tag_delims = (out, self._tag_exact)
        except AttributeError:  # pragma: no cover - an arena that takes no attributes: per stream then
            pass
        return out

    def _region_of(self, r: Any, n: int, mapper: "IncrementalMapper", msg: AssistantMessage) -> "OpenRegion | None":
        """The fast-path region of a NEED_MORE_INPUT parse: a pending literal, else an open region. A parse with
        ``r.pending`` looked at the end only in that literal (and in whitespace runs), while an open region is an
        ``until`` or a JSON string that looked at the end itself: the two never both apply, and the cheap check
        of ``pending`` goes first (half of the parsing feeds of repeated tool calls end inside a literal)."""
        if r.pending is not None:
            return self._pending_literal(r, n, mapper, msg)
        if r.pending_until is not None:
            region = self._hidden_until(r, n)
            if region is not None:
                return region
        elif r.pending_ahead is not None:
            return self._open_region(r, n, mapper, msg, r.pending_ahead)
        return self._open_region(r, n, mapper, msg)

    def _open_region(self, r: Any, n: int, mapper: "IncrementalMapper", msg: AssistantMessage,
                     ahead: tuple | None = None) -> "OpenRegion | None":
        """The open region of a NEED_MORE_INPUT parse that more text can only extend, or None.

        The parse stopped inside an ``until`` that reached the end of the input (nothing was found, not even a
        cut delimiter); everything before it did not look at the end (or the parse would have stopped there).
        So appended text that contains no delimiter and does not end in a cut one leaves the tree as it is, with
        that region (and its ancestors) longer: the message changes by the appended text in one field.

        ``ahead`` (``r.pending_ahead``): the parse also looked at the end in ``opener_ahead`` searches that found
        nothing (repair call-section-omitted's); the region then also needs a parse for text holding one of their
        triggers, and is made only where the until holds back every proper prefix of each trigger (so a trigger
        can only span the feeds from its held start)."""
        if not r.nodes:
            return None
        x = r.nodes[-1]
        if not x.partial:
            return None
        path = [x]
        while True:   # down the partial last children
            ch = x.children
            if not ch:
                break
            x = ch[-1]
            if not x.partial:
                break
            path.append(x)
        if self._hooked:
            for i, x in enumerate(path):
                if x.tag in HOOK_TAGS:
                    return self._open_hook_string(r, n, mapper, msg, path, i)
        action = None
        for i in range(len(path) - 1, -1, -1):
            if path[i].tag not in _GROUPING_TAGS:
                action = i
                break
        if action is None:
            return None
        node = path[action]
        if any(x.tag for x in path[action + 1:]):
            return None
        src = r.text
        for x in path[:action]:     # ancestors: grouping, or tool-args whose text does not start a JSON object
            if x.tag in _GROUPING_TAGS:
                continue
            if x.tag == "tool-args" and not src[x.start:x.end].lstrip(" \t\n\v\f\r").startswith("{"):
                continue
            return None
        held = ""
        if node.end != n:
            # the region stopped before a cut delimiter at the very end (``<`` of ``<tool_call>``): more text
            # either completes it (a parse decides) or shows it was text — then the region just grew
            held = src[node.end:n]
            if node.tag not in ("content", "reasoning", "tool-arg-string-value") or node.end <= node.start:
                return None
        empty_value = node.start >= n
        if empty_value and node.tag != "tool-arg-string-value":
            # (an empty string value maps to an opening quote already: its first characters just append —
            # unless they are whitespace, which the grammar may skip before the value, see OpenRegion.fresh)
            return None
        if node.tag == "tool-args":
            leaf = path[-1]
            if leaf is not node and leaf.start == node.start and self._json_rule(leaf.rule):
                return self._open_json_value(src, node, mapper, path[:action])
            return self._open_json_string(src, node, mapper)
        if node.tag == "tool-arg-value" and not held:
            # one tagged JSON value read by the native scanner: copied as it is (valid JSON has nothing that
            # normalize_python_value rewrites), so the same whole-value path as verbatim arguments, none after it
            leaf = path[-1]
            if leaf is not node and leaf.start == node.start and self._json_rule(leaf.rule):
                return self._open_json_value(src, node, mapper, None, value=True)
        delims = self._tag_delimiters().get(node.tag)
        if delims is None:
            return None
        tag = node.tag
        if tag == "content":
            field = "content"
        elif tag == "reasoning":
            if not msg.reasoning_content:      # whitespace-only reasoning is dropped: not a plain append
                return None
            field = "reasoning_content"
        elif tag == "tool-arg-string-value":
            if not mapper.current_is_last_named():
                return None
            field = "arguments"
        elif tag == "tool-arg-value":
            # a raw (JSON) value is copied into the arguments unless normalize_python_value rewrites it: a
            # value without a quote ' or a capital T, F, N grows by what is appended
            if not mapper.current_is_last_named() or _RAW_UNSAFE.search(src, node.start, node.end) is not None:
                return None
            field = "raw-arguments"
        else:
            return None
        exact = tag in self._tag_exact
        pu = r.pending_until if ahead is None else ahead[0]
        if pu is not None:
            # the parse looked at the end in one ``until`` only (the engine says where it stopped and what
            # ends it): the one that made this node, so its own delimiters are the region's, exactly — an
            # until without any (it takes the rest) holds nothing back, even when another until of the same
            # tag would (granite 3.2: content after a call is the rest of the text)
            delims = pu[1]
            exact = True
        region = OpenRegion(field, delims)
        region.fresh = empty_value
        if held:
            if not exact or not any(len(d) > len(held) and d.startswith(held) for d in delims):
                return None
            region.held = held
        elif exact and delims:
            region.can_hold = True   # text ending in a cut delimiter holds it back as the until does
        if ahead is not None:
            triggers = ahead[1]
            if not delims or not all(any(d.startswith(t[:k]) for d in delims) for t in triggers
                                     for k in range(1, len(t))):
                return None
            region.triggers = triggers
        return region

    def _open_hook_string(self, r: Any, n: int, mapper: "IncrementalMapper", msg: AssistantMessage, path: list,
                          h: int) -> "OpenRegion | None":
        """Fast path inside a value hook's arguments (``path[h]``, :data:`core.chat.mapper.HOOK_TAGS`): the parse
        stopped in a raw string value the hook declared (:data:`core.chat.mapper.HOOK_STRINGS`), the one
        ``until`` that looked at the end (``r.pending_until``: its delimiters are exactly the region's). The
        hook's arguments then end with that string escaped and left open, so text without a delimiter appends
        its escape to the last call's arguments, as a tagged string value's does."""
        leaf = path[-1]
        if (leaf.tag or leaf.rule) not in HOOK_STRINGS.get(path[h].tag, ()) or r.pending_until is None:
            return None
        src = r.text
        for x in path[:h]:
            if x.tag not in _GROUPING_TAGS:
                return None
        if not mapper.current_is_last_named() or not msg.tool_calls:
            return None
        # the hook showed the string as declared: its last characters, escaped, end the arguments
        args = msg.tool_calls[-1].arguments
        if not args.endswith(escape_json_inner(src[max(leaf.start, leaf.end - 8):leaf.end])) or (
                leaf.end <= leaf.start and not args.endswith('"')):
            return None
        delims = r.pending_until[1]
        region = OpenRegion("arguments", delims)
        region.fresh = leaf.start >= n
        if leaf.end != n:
            held = src[leaf.end:n]
            if leaf.end <= leaf.start or not any(len(d) > len(held) and d.startswith(held) for d in delims):
                return None
            region.held = held
        elif delims:
            region.can_hold = True
        return region

    @staticmethod
    def _hidden_until(r: Any, n: int) -> "OpenRegion | None":
        """The parse needed more input only because one ``until`` reached the end (``r.pending_until``) and
        every node still open reads no text: that until's text is in no node the message is made of (an
        ``atomic`` drops the nodes it has not finished, a call id read up to ``[ARGS]``). Text that holds no
        delimiter only makes it longer: a region "hidden" (nothing to emit) that holds a cut delimiter back
        as the until does."""
        stop, delims = r.pending_until
        node = r.nodes[-1] if r.nodes else None
        while node is not None and node.partial:
            if node.tag not in _TEXTLESS_TAGS and not (node.tag == "tool-args" and _markup_args(r.text, node, n)):
                return None
            node = node.children[-1] if node.children else None
        region = OpenRegion("hidden", delims)
        region.held = r.text[stop:n]
        return region

    def _pending_literal(self, r: Any, n: int, mapper: "IncrementalMapper | None" = None,
                         msg: AssistantMessage | None = None) -> "OpenRegion | None":
        """The parse needed more input only because the text ends inside a literal (``r.pending``: nothing
        else looked at the end, see :class:`core.peg.engine.ParseResult`), and every node still open reads
        no text when mapped: text that keeps the rest a proper prefix of that literal changes nothing in
        the message (a marker being streamed, ``<tool_ca``). A region "pending" with that rest held.

        The "literal" may be empty: a JSON value starts at the end. Then only whitespace before it keeps
        the message; and when that value is the (still empty) arguments of the named last call, whose
        arguments are ``{`` already (the mapper starts them so), an object opening there continues as the
        whole-value fast path (``json_start``)."""
        pend = r.pending
        if pend is None or not r.nodes:
            return None
        lit = pend[1]
        node = r.nodes[-1]
        args = leaf = None
        while node.partial:
            tag = node.tag
            if tag not in _TEXTLESS_TAGS:
                if tag != "tool-args":
                    return None
                if lit or node.start != n:
                    if not _markup_args(r.text, node, n):
                        return None
                else:
                    args = node
            leaf = node
            children = node.children
            if not children:
                break
            node = children[-1]
        region = OpenRegion("pending", ())
        if not node.tag and (node.rule if not node.partial else not node.children):
            # the spine reaches a finished rule node (or a rule node begun at the end, nothing in it yet): the
            # text may be what follows a closed wrapper (see _after_wrapper, _parse_text)
            region.after_rule = True
        region.held = r.text[pend[0]:n]
        region.lit = lit
        region.chain = r.pending_chain
        if r.pending_ws:
            # decided when whitespace comes (_fast): the walk over the nodes ending at the end of the text is
            # not paid by this parsing feed, one of the costliest of a tool call (after `"arguments":`)
            region.ws = None
            region.ws_at = (r.nodes, n)
        if (args is not None and leaf is not args and leaf.start == n and self._json_rule(leaf.rule)
                and mapper is not None and msg is not None and mapper.current_is_last_named()
                and msg.tool_calls and msg.tool_calls[-1].arguments == "{"):
            region.json_start = True
            # what text after the value does (region.after) is read when the value closes, many feeds later,
            # and depends on nothing that changes before (no parse in between): decided then, not paid here
            region.after_of = (self, mapper, r.nodes[-1], args)
        return region

    def _json_rule(self, name: str) -> bool:
        """Whether the rule ``name`` is run by the engine's native JSON value scanner (an object, array or any
        value: :func:`core.peg.scanners.scan_json_value`), whose partial-input semantics
        :func:`advance_json_value` follows."""
        known = self._json_rules
        hit = known.get(name)
        if hit is None:
            arena = self.parser.arena
            try:
                hit = getattr(arena.nodes[arena.rule_id(name)], "native", None) in _JSON_NATIVE
            except Exception:  # noqa: BLE001 - not a registered rule: not the scanner
                hit = False
            known[name] = hit
        return hit

    def _open_json_value(self, src: str, node: Any, mapper: "IncrementalMapper",
                         above: list | None = None, value: bool = False) -> "OpenRegion | None":
        """Fast path inside verbatim JSON arguments scanned by the native JSON scanner: the parse stopped
        anywhere inside the value (a string, a number, a literal, between tokens), which reaches the end of the
        text. Text that keeps the value a valid open prefix extends the arguments verbatim (trailing whitespace
        and a cut escape held back, as the parse reports them); the value's close, or anything invalid, needs a
        parse. The JSON state is scanned on from where the previous parse left it. ``value``: ``node`` is one
        tagged argument value (any JSON value; its close needs a parse)."""
        # (a value: an array or an object only, whose state the scan keeps until it closes; a number or a
        # literal ends where the text after it says, which takes a parse)
        if not mapper.current_is_last_named() or not src.startswith(("{", "[") if value else "{", node.start):
            return None
        if value and src[node.end - 1] in _WS:
            return None
        st = self._json_value_scan
        if st is None or st[0] != node.start or st[1] > node.end:
            st = (node.start, node.start, JSON_VALUE_START)
        state = advance_json_value(src, st[1], node.end, st[2], [])
        if state is None or state[3] or state[0] == _JCLOSED:   # invalid, an escape in the node, closed
            self._json_value_scan = None
            return None
        self._json_value_scan = (node.start, node.end, state)
        region = OpenRegion("json-arguments", ())
        region.json = state
        region.value = value
        region.after = None if value else self._after_arguments(mapper, above)
        return region

    def _after_wrapper(self, r: Any, n: int, mapper: "IncrementalMapper") -> "OpenRegion | None":
        """A region "after" for the text after a call's wrapper closed (``</tool_call>``): the shallowest rule
        node on the parse's right spine that is final — the engine memoized it, so it did not look at the end
        and a longer text parses it the same — under ones that are not; then what the grammar proves of the
        text after it (:func:`core.chat.grammar_after.grammar_after` of that rule, for the ways up whose nodes
        are its ancestors): the next call's opening streams without a parse up to where its name completes.
        A rule node begun at the very end with nothing in it yet, after a final sibling, counts as not there
        (the parse stopped on the next wrapper's first character). Only while closing a call cannot change the
        message (no call yet, or the last one named, its arguments balanced, no quote pending)."""
        nodes = r.nodes
        if not nodes:
            return None
        m = mapper.m
        if m is None or m.quote_pending or m.pending is not None:
            return None
        cur = m.current
        if cur is not None:
            calls = m.msg.tool_calls
            # arguments not ending in "}" are open (or not JSON): no need to count their braces, which costs a
            # scan of the whole arguments on every feed while a long value grows
            args = cur.arguments
            if not calls or calls[-1] is not cur or not cur.name or not args.endswith("}") or json_brace_depth(args) > 0:
                return None
        cache = self.caches.get(None)
        if cache is None:
            return None
        memo = cache.memo
        rules = self.parser.arena.rules
        above: list = []
        node = nodes[-1]
        while True:
            if node.tag:
                if node.tag not in _GROUPING_TAGS:
                    return None
            elif node.rule:
                got = memo.get((rules.get(node.rule), node.start))
                if got is not None:
                    if got.__class__ is list:
                        got = got[0]
                    if got[0] == _OK_STATUS and got[2] and got[2][0] is node:
                        break
            above.append(node)
            ch = node.children
            if not ch:
                return None
            node = ch[-1]
            if node.partial and not node.children and not node.tag and len(ch) > 1:
                # a rule node begun at the end with nothing in it yet (the next wrapper, its opening literal cut:
                # ``</tool_call><``): the text after the final one before it is what the grammar decides
                prev = ch[-2]
                if prev.rule and not prev.tag:
                    got = memo.get((rules.get(prev.rule), prev.start))
                    if got is not None:
                        if got.__class__ is list:
                            got = got[0]
                        if got[0] == _OK_STATUS and got[2] and got[2][0] is prev:
                            node = prev
                            break
        key = (node.rule, tuple([(x.rule, x.tag) for x in above]))
        known = self._wrappers
        ga = known.get(key, False)
        if ga is False:
            ga = grammar_after(self.parser.arena, node.rule)
            if ga is not None:
                ga = ga.select(key[1])
            if len(known) < 64:
                known[key] = ga
        if ga is None:
            return None
        held = r.text[node.end:n]
        if len(held) > 64 or not ga(held):
            return None
        region = OpenRegion("after", ())
        region.after = ga
        region.held = held
        return region

    def _after_arguments(self, mapper: "IncrementalMapper", above: list | None) -> "Callable[[str], bool] | str | None":
        """What text after the last call's JSON arguments does (OpenRegion.after): the parser's own answer
        (``after_arguments`` of a handler), else the grammar's (:func:`core.chat.grammar_after.grammar_after`:
        the call's closing and the next call's opening literals keep the message), for the ways up from the
        arguments whose nodes are ``above`` (the parse's nodes from the top down to the arguments' parent),
        while closing the call cannot change it (no quote pending: the arguments are a whole JSON value when
        it is asked)."""
        own = getattr(self.parser, "after_arguments", None)
        if own is not None or above is None:
            return own
        m = mapper.m
        if m is None or m.quote_pending:
            return None

        ga = grammar_after(self.parser.arena)
        if ga is None:
            return None
        return ga.select(tuple([(x.rule, x.tag) for x in above]))

    def _open_json_string(self, src: str, node: Any, mapper: "IncrementalMapper") -> "OpenRegion | None":
        """Fast path inside verbatim JSON arguments: the parse stopped inside a JSON string (no escape pending),
        so text without ``"`` or ``\\`` extends the arguments verbatim (trailing whitespace is held back, as the
        mapper right-strips the arguments). The string state is scanned incrementally per arguments node."""
        if not mapper.current_is_last_named():
            return None
        text = src[node.start:node.end]
        if not text.lstrip(_WS).startswith("{"):
            return None
        st = self._json_scan
        if st is None or st[0] != node.start or st[1] > node.end:
            st = (node.start, node.start, False, False)
        _, pos, in_str, esc = st
        in_str, esc = advance_json_string(src, pos, node.end, in_str, esc)
        self._json_scan = (node.start, node.end, in_str, esc)
        if not in_str or esc:
            return None
        return json_arguments_region(text)


def _markup_args(src: str, node: Any, n: int) -> bool:
    """Whether the open ``tool-args`` ``node`` (up to ``n``, the end of the text) holds tagged arguments, not
    verbatim JSON: its text already starts with something other than ``{``, so the mapper's ``tool-args``
    action (which only takes text starting with ``{``) ignores it however it grows — textless, as its
    children's tags decide the arguments."""
    i = node.start
    while i < n and src[i] in _WS:
        i += 1
    return i < n and src[i] != "{"


# tags whose mapping does not change when whitespace is appended to their text (textless, or right-stripped)
_WS_INVARIANT_TAGS = _TEXTLESS_TAGS | {"tool-name", "tool-id", "tool-args"}


def _ws_invariant_end(nodes: tuple, n: int) -> bool:
    """True when every tagged node ending at ``n`` (the end of the text) maps the same with whitespace appended
    to it: the nodes a whitespace run at the end belongs to grow with it (:attr:`ParseResult.pending_ws`)."""
    stack: list = []
    for x in reversed(nodes):
        if x.end < n:
            break
        stack.append(x)
    while stack:
        x = stack.pop()
        if x.tag and x.tag not in _WS_INVARIANT_TAGS:
            return False
        for c in reversed(x.children):
            if c.end < n:
                break
            stack.append(c)
    return True


_NO_SWITCHES: frozenset = frozenset()
_NEED_MORE_INPUT = ResultType.NEED_MORE_INPUT
_SUCCESS = ResultType.SUCCESS


_WS = " \t\n\v\f\r"
_JSON_ESCAPED = re.compile(r'[\x00-\x1f\\"]')
# what may make mapper.normalize_python_value change a raw value (a quote, the start of True / False / None)
_RAW_UNSAFE = re.compile("[TFN']")
_HAS_WS = re.compile(r"[ \t\n\v\f\r]")
_HEX = frozenset("0123456789abcdefABCDEF")


_STRING_STOP = re.compile(r'["\\]')


def advance_json_string(s: str, i: int, end: int, in_str: bool, esc: bool) -> tuple[bool, bool]:
    """The JSON string state ``(in_str, esc)`` after scanning ``s[i:end]`` from state ``(in_str, esc)``: inside
    a double-quoted string (jumping to its next quote or backslash), and whether an escape is pending. The
    streaming fast paths (PEG sessions and hand-written handlers) resume it feed after feed."""
    while i < end:
        if esc:
            esc = False
            i += 1
            continue
        if in_str:
            m = _STRING_STOP.search(s, i, end)
            if m is None:
                return True, False
            i = m.start()
            if s[i] == "\\":
                esc = True
            else:
                in_str = False
            i += 1
            continue
        if s[i] == '"':
            in_str = True
        i += 1
    return in_str, esc


_JSON_NATIVE = frozenset({"json-value", "json-object", "json-array"})
# advance_json_value modes: expecting a value / after "{" / a key after "," / ":" / after a value / after "[" /
# in a key string / in a value string / in a number / in true, false, null
(_JV, _JOBJ, _JKEY, _JCOLON, _JAFTER, _JARR, _JSKEY, _JSVAL, _JNUM, _JLIT) = range(10)
_NUMBER_CONT = frozenset("0123456789.eE+-")
_NUM_PREFIX = re.compile(r"-?(?:(?:0|[1-9][0-9]*)(?:\.[0-9]*|\.[0-9]+[eE][+-]?[0-9]*|[eE][+-]?[0-9]*)?)?").fullmatch
_NUM_DONE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?").fullmatch
_CLOSE = {"{": "}", "[": "]"}
JSON_VALUE_START = (_JV, "", "", "", "")
_JCLOSED = 10
JSON_VALUE_CLOSED = (_JCLOSED, "", "", "", "")


def _grow_escape(esc: str, c: str) -> "tuple[str, bool] | None":
    """The JSON string escape ``esc`` (its backslash first) with ``c`` appended, and whether it is complete
    (``\\n`` and the like after 2 characters, ``\\uXXXX`` after 6); None when ``c`` cannot continue it, as
    JSON's grammar of escapes says."""
    esc += c
    if len(esc) == 2:
        if c == "u":
            return esc, False
        return (esc, True) if c in '"\\/bfnrt' else None
    if c not in _HEX:
        return None
    return esc, len(esc) == 6


def _closed(i: int, end: int, add: str, out: list[str]) -> tuple | None:
    """The outermost container closed at ``i``: complete arguments when that is the last character scanned."""
    if i + 1 != end:
        return None
    out.append(add)
    return JSON_VALUE_CLOSED


def advance_json_value(s: str, i: int, end: int, state: tuple, out: list[str]) -> tuple | None:
    """Scan ``s[i:end]`` on from ``state`` through an open JSON value as the engine's native scanner reads it
    (:func:`core.peg.scanners._slow_value`, lenient: ASCII whitespace including VT and FF between tokens,
    the string escapes of JSON, JSON numbers, ``true``/``false``/``null``). Appends to ``out`` the text the
    value's verbatim, right-stripped form gains — trailing whitespace and a cut escape are held in the state
    until a character after them arrives, as the scanner's partial result leaves them out.

    ``state``: ``(mode, open containers, number or literal token, pending escape, held whitespace)``, starting
    at :data:`JSON_VALUE_START`. Returns the new state, or None when the text closes the outermost container
    or is not a valid continuation (only a parse can tell what follows then) — except that a close by the
    very last character scanned gives :data:`JSON_VALUE_CLOSED` (its character appended to ``out``): the
    value, and so the arguments, are complete with it, and what follows is for the next parse to read."""
    mode, stack, tok, esc, ws = state
    while i < end:
        c = s[i]
        if mode >= _JSKEY:
            if mode <= _JSVAL:                       # inside a string
                if esc:
                    grown = _grow_escape(esc, c)
                    if grown is None:
                        return None
                    i += 1
                    esc, done = grown
                    if done:
                        out.append(ws + esc)
                        ws = esc = ""
                    continue
                m = _STRING_STOP.search(s, i, end)
                j = m.start() if m is not None else end
                if j > i:
                    chunk = s[i:j]
                    kept = chunk.rstrip(_WS)
                    if kept:
                        out.append(ws + kept)
                        ws = chunk[len(kept):]
                    else:
                        ws += chunk
                    i = j
                    continue
                if c == "\\":
                    esc = c
                else:
                    out.append(ws + c)
                    ws = ""
                    mode = _JCOLON if mode == _JSKEY else _JAFTER
                i += 1
                continue
            if mode == _JNUM:
                if c in _NUMBER_CONT:
                    tok += c
                    if _NUM_PREFIX(tok) is None:
                        return None
                    out.append(c)
                    i += 1
                    continue
                if _NUM_DONE(tok) is None:
                    return None
                mode, tok = _JAFTER, ""
                continue                             # the character after the number, read after a value
            if c != tok[0]:                          # true / false / null
                return None
            tok = tok[1:]
            out.append(c)
            if not tok:
                mode = _JAFTER
            i += 1
            continue
        if c in _WS:
            ws += c
            i += 1
            continue
        if mode == _JAFTER:
            if c == ",":
                mode = _JKEY if stack[-1] == "{" else _JV
            elif c == _CLOSE[stack[-1]]:
                stack = stack[:-1]
                if not stack:
                    return _closed(i, end, ws + c, out)
            else:
                return None
        elif mode == _JCOLON:
            if c != ":":
                return None
            mode = _JV
        elif mode == _JKEY or mode == _JOBJ:
            if c == '"':
                mode = _JSKEY
            elif c == "}" and mode == _JOBJ:
                stack = stack[:-1]
                if not stack:
                    return _closed(i, end, ws + c, out)
                mode = _JAFTER
            else:
                return None
        elif c == "]" and mode == _JARR:
            stack = stack[:-1]
            if not stack:
                return _closed(i, end, ws + c, out)
            mode = _JAFTER
        elif c == '"':
            mode = _JSVAL
        elif c == "{" or c == "[":
            stack += c
            mode = _JOBJ if c == "{" else _JARR
        elif c == "-" or "0" <= c <= "9":
            mode, tok = _JNUM, c
        elif c == "t" or c == "f" or c == "n":
            mode, tok = _JLIT, ("rue" if c == "t" else "alse" if c == "f" else "ull")
        else:
            return None
        out.append(ws + c)
        ws = ""
        i += 1
    return mode, stack, tok, esc, ws


def json_arguments_region(text: str) -> "OpenRegion":
    """The fast-path region of verbatim JSON arguments ``text`` cut inside a string: its trailing whitespace is
    held back (the mapper right-strips the arguments)."""
    region = OpenRegion("json-arguments", ())
    region.ws_tail = text[len(text.rstrip(_WS)):]
    return region


# delimiter set -> (keep, search, firsts) of the regions it ends (the same few sets come back on every feed)
_DELIM_INFO: dict[tuple, tuple] = {}


class OpenRegion:
    """Fast-path description of an open ``until`` region: the message ``field`` it feeds ("content",
    "reasoning_content" or the last call's "arguments", JSON-escaped) and the delimiters that would end it."""

    # the defaults are class attributes (a region is made on every parsing feed: its constructor sets only
    # what the kind of region needs)
    # an empty tagged string value: whitespace first may be what the grammar skips before the value (Qwen3-Coder
    # at improved: "<parameter=x>  a" gives "a"), so only a parse can tell where it goes
    fresh = False
    can_hold = False     # content-like: may start holding a cut delimiter back (extend_held)
    chain: tuple = ()    # "pending": the literals (str) and whitespace runs (None) after ``lit``
    json_start = False   # "pending" on an empty JSON value: the call's arguments may open there
    ws: bool | None = False   # "pending" with nothing of the literal yet: whitespace may come first
    # (pending_ws); None: not decided yet, ``_ws_invariant_end(*ws_at)`` decides it when first read
    ws_at: tuple | None = None
    json: tuple | None = None   # json-arguments over a whole JSON value: its advance_json_value state
    # json-arguments over one tagged value (mapped verbatim, whitespace included, where the scan holds
    # whitespace back as the arguments' right-strip does): whitespace takes a parse
    value = False
    # json-arguments: what text after the value's close does, from a handler (``after_arguments`` of its
    # parser): "content" — it is all content (the root ends with the arguments, the rest is recovered as
    # content); a predicate of all the text after the value — true while it leaves the message as it is
    after: "Callable[[str], bool] | str | None" = None
    # "after" not decided yet: (session, parse result, length, mapper) to decide it; on a "pending" region, the same
    # for the text the literal's way does not take; on a "lazy" region (not found yet): what
    # PegStreamSession.resolve_region reads
    lazy: tuple | None = None
    after_rule = False   # "pending": the parse's right spine reaches a finished rule node (see _pending_literal)
    # ``after`` not decided yet: (session, mapper, top node, arguments node) of the parse that made the region
    after_of: tuple | None = None
    held = ""      # the cut delimiter the region's parse stopped before (not in the message yet)
    lit = ""       # "pending": the literal the text ends inside (``held`` is the part of it so far)
    ws_tail = ""
    escape = ""    # json-arguments: an escape sequence begun but not complete (held back)
    # "pending" and "json-arguments" regions have no delimiters: nothing to search
    keep = 0
    search: Any = None
    firsts: tuple = ()
    # opener_ahead triggers (ParseResult.pending_ahead): text holding one needs a parse; checked with the held text
    triggers: tuple = ()

    def __init__(self, field: str, delims: tuple[str, ...]):
        self.field = field
        self.delims = delims
        if delims:
            known = _DELIM_INFO.get(delims)
            if known is None:
                known = (max(len(d) for d in delims) - 1,
                         re.compile("|".join(re.escape(d) for d in delims)).search,
                         tuple(dict.fromkeys(d[0] for d in delims)))
                if len(_DELIM_INFO) < 4096:    # a format has a handful of delimiter sets
                    _DELIM_INFO[delims] = known
            self.keep, self.search, self.firsts = known

    def follow_chain(self, text: str) -> bool:
        """"pending" region whose literal ``lit`` just completed: True when ``text`` (what follows it) only
        goes on along ``chain`` — the fixed literals and whitespace runs after it in its sequence — and stops
        before its end, inside or at the start of one of its literals; the region then pends on that one. A
        parse would match those items the same way and stop there (the message stays as it is: the nodes
        still open read no text). False, region unchanged, when the text leaves the chain or gets past it."""
        chain = self.chain
        ci, i, n = 0, 0, len(text)
        ws = False
        while True:
            while ci < len(chain) and chain[ci] is None:    # whitespace runs
                ws = True
                ci += 1
                while i < n and text[i] in _WS:
                    i += 1
            if ci >= len(chain):
                return False
            lit = chain[ci]
            rest = text[i:]
            if len(rest) < len(lit):
                if not lit.startswith(rest):
                    return False
                self.lit, self.held, self.chain = lit, rest, chain[ci + 1:]
                self.ws = ws and not rest
                self.json_start = False
                return True
            if not rest.startswith(lit):
                return False
            i += len(lit)
            ci += 1
            ws = False

    def extend_json_string(self, text: str) -> str | None:
        """json-arguments region (the parse stopped inside a JSON string of verbatim arguments): the text
        ``text`` adds to the arguments, or None when it may end the string or break it (a ``"``, an invalid
        escape), which only a parse can tell. As the parser reports it: a cut escape (``\\``, ``\\u12``)
        ends the arguments before it until it is complete, and trailing whitespace is held back (the
        mapper right-strips the arguments). State changes only when the text is accepted."""
        out: list[str] = []
        ws, esc = self.ws_tail, self.escape
        for c in text:
            if esc:
                grown = _grow_escape(esc, c)
                if grown is None:
                    return None
                esc, done = grown
                if done:
                    out.append(ws + esc)
                    ws = esc = ""
            elif c == "\\":
                esc = c
            elif c == '"':
                return None
            elif c in _WS:
                ws += c
            else:
                out.append(ws + c)
                ws = ""
        self.ws_tail, self.escape = ws, esc
        return "".join(out)

    def extend_held(self, text: str) -> str | None:
        """Region stopped before a cut delimiter (``held``): the text ``held + text`` adds to the field, or None
        when it holds a whole delimiter (only a parse can tell what follows). As the parser's ``until`` does,
        the new cut delimiter — the leftmost position from which the rest is a proper prefix of a delimiter —
        is held back. (No delimiter can start before ``held``: that start would have been the cut one.)"""
        w = self.held + text
        if self.search is not None and self.search(w):
            return None
        if self.triggers and any(t in w for t in self.triggers):
            return None
        cut = len(w)
        for i in range(max(0, len(w) - self.keep), len(w)):
            rest = w[i:]
            if any(len(d) > len(rest) and d.startswith(rest) for d in self.delims):
                cut = i
                break
        self.held = w[cut:]
        return w[:cut]

    def extends(self, window: str) -> bool:
        """True when ``window`` (the last ``keep`` characters already parsed + new text) contains no delimiter
        and does not end with a cut one."""
        if self.search is None:
            return True
        for f in self.firsts:       # common case: no delimiter can even start in the window
            if f in window:
                break
        else:
            return True
        if self.search(window):
            return False
        for d in self.delims:
            first = d[0]
            i = window.find(first, max(0, len(window) - len(d) + 1))
            while i != -1:
                if d.startswith(window[i:]):
                    return False
                i = window.find(first, i + 1)
        return True


def _after_of(region: "OpenRegion") -> "Callable[[str], bool] | str | None":
    """Decide a region's ``after`` from ``after_of`` (PegStreamSession._pending_literal): the nodes from the
    top of that parse's tree down to the arguments' parent, then PegStreamSession._after_arguments."""
    session, mapper, node, args = region.after_of   # type: ignore[misc]
    region.after_of = None
    above = []
    while node is not args:
        above.append(node)
        node = node.children[-1]
    return session._after_arguments(mapper, above)


def _new_state(parser: Any) -> Any:
    """A fresh incremental-parse state for ``parser``, or None. Parsers announce support either with
    ``new_state()`` or with a ``state`` keyword on ``parse`` (the generator's :class:`ParserState`)."""
    factory = getattr(parser, "new_state", None)
    if callable(factory):
        return factory()
    try:
        params = inspect.signature(parser.parse).parameters
    except (TypeError, ValueError):
        return None
    if "state" not in params:
        return None

    return ParserState()


def _parse_fn(parser: Any, incremental: bool = True) -> Callable[[str, bool], AssistantMessage]:
    if not incremental:
        return parser.parse
    session_factory = getattr(parser, "session", None)
    if callable(session_factory):
        try:
            session = session_factory()
        except Exception:  # a parser whose session cannot start still parses one-shot
            session = None
        if session is not None and callable(getattr(session, "parse", None)):
            return session.parse
    try:
        if PegStreamSession.supports(parser):
            return PegStreamSession(parser).parse
    except Exception:
        pass
    try:
        state = _new_state(parser)
    except Exception:
        state = None
    if state is not None:
        parse = parser.parse

        def parse_with_state(text: str, is_partial: bool) -> AssistantMessage:
            return parse(text, is_partial, state=state)
        return parse_with_state
    return parser.parse


def _safe_parse(parse: Callable[[str, bool], AssistantMessage], text: str, is_partial: bool) -> AssistantMessage | None:
    try:
        return parse(text, is_partial)
    except Exception:  # parsers must not raise; if one does, the step is held back
        return None


# --------------------------------------------------------------------------------------------------------------
# deltas


def stream_deltas_between(prev: AssistantMessage, new: AssistantMessage) -> list[MessageDelta]:
    """Deltas from ``prev`` to ``new`` (as :func:`core.chat.message.compute_deltas`), checking tool calls only
    from the last previously seen one on (llama.cpp ``compute_diffs`` diffs only that one; earlier calls are only
    checked for equality, which is an identity check when the mapper shares them). Raises :class:`StreamRetractionError` when ``new`` does not extend ``prev``."""
    if prev is new:   # a session gave the same message again: nothing changed
        return []
    out: list[MessageDelta] = []
    pr, nr = prev.reasoning_content, new.reasoning_content
    if nr is not pr and nr != pr:
        if not nr.startswith(pr):
            raise StreamRetractionError("reasoning_content was rewritten")
        out.append(MessageDelta(reasoning_content=nr[len(pr):]))
    pc, nc = prev.content, new.content
    if nc is not pc and nc != pc:
        if not nc.startswith(pc):
            raise StreamRetractionError("content was rewritten")
        out.append(MessageDelta(content=nc[len(pc):]))
    pcalls, ncalls = prev.tool_calls, new.tool_calls
    n_prev, n_new = len(pcalls), len(ncalls)
    if n_new < n_prev:
        raise StreamRetractionError("a tool call disappeared")
    if n_prev > 1:
        start = n_prev - 1
        # calls both messages share from one append-only list of settled calls (``shared_calls``, set by the
        # mapper and the handlers' repetition memo) are the same objects: only the calls after them are compared
        ps = getattr(prev, "shared_calls", None)
        if ps is not None:
            ns = getattr(new, "shared_calls", None)
            same = _shared_count(ps, ns[0], ns[1]) if ns is not None and ns[0].__class__ is _Token else 0
        else:
            same = 0
        if start > same and ncalls[same:start] != pcalls[same:start]:   # identity first: C-speed when shared
            raise StreamRetractionError("an earlier tool call changed")
    else:
        start = 0
    for i in range(start, n_new):
        call = ncalls[i]
        if i < n_prev:
            old = pcalls[i]
            if old is call:
                continue
            oa, na = old.arguments, call.arguments
            if old.name == call.name and old.id == call.id:
                if na == oa:
                    continue
                if na.startswith(oa):   # the common step: the arguments grew (tool_call_delta's answer)
                    out.append(_call_delta(i, "", "", na[len(oa):]))
                    continue
            delta = tool_call_delta(i, old, call)
            if delta is not None:
                out.append(delta)
        else:
            out.append(_call_delta(i, call.id, call.name, call.arguments))
    return out


def lenient_deltas(prev: AssistantMessage, new: AssistantMessage) -> list[MessageDelta]:
    """Deltas from ``prev`` towards ``new`` that never retract: every field that extends the previous value
    gets its extension, fields that were rewritten get nothing. Used only for the final step, where holding
    back is not an option."""
    out: list[MessageDelta] = []
    if new.reasoning_content.startswith(prev.reasoning_content) and new.reasoning_content != prev.reasoning_content:
        out.append(MessageDelta(reasoning_content=new.reasoning_content[len(prev.reasoning_content):]))
    if new.content.startswith(prev.content) and new.content != prev.content:
        out.append(MessageDelta(content=new.content[len(prev.content):]))
    for i, call in enumerate(new.tool_calls):
        if i < len(prev.tool_calls):
            old = prev.tool_calls[i]
            name = call.name if not old.name else ""
            cid = call.id if not old.id else ""
            args = call.arguments[len(old.arguments):] if call.arguments.startswith(old.arguments) else ""
            if name or cid or args:
                out.append(MessageDelta(tool_call=ToolCallDelta(i, cid, name, args)))
        else:
            out.append(MessageDelta(tool_call=ToolCallDelta(i, call.id, call.name, call.arguments)))
    return out


# --------------------------------------------------------------------------------------------------------------
# the streaming parser


class StreamingParser:
    """Stateful streaming wrapper around a chat output parser.

    ``feed(text) -> list[MessageDelta]`` appends ``text`` (any length, may be "") and returns the new deltas;
    ``finish(is_partial=False) -> list[MessageDelta]`` parses everything as the final output (pass
    ``is_partial=True`` when the output was cut off) and returns the remaining deltas. ``message`` is the
    message the emitted deltas add up to; ``text`` the output fed so far; ``held_back`` counts steps whose
    parse would have retracted emitted text; ``final_mismatch`` is set when even the final parse does not
    extend what was emitted (the format itself took something back, where llama.cpp would raise "Invalid
    diff"). ``repairs``: after ``finish()``, the repairs of the final (one-shot) parse
    (:class:`core.chat.repairs.FiredRepair`; a ``truncated-call`` there names a call whose fragments may already
    have been streamed — it stays in :attr:`message`, see :func:`core.chat.repairs.settled`); ``final``: after
    ``finish()``, that one-shot parse (``settled(message, final)`` is what a client keeps), else ``None``. ``incremental=False`` forces a full re-parse per step (the reference behaviour, for comparison).
    Never raises on any input text.
    """

    def __init__(self, parser: Any, *, incremental: bool = True):
        self.parser = parser
        self._parse = _parse_fn(parser, incremental)
        owner = getattr(self._parse, "__self__", None)
        # sessions that report an open region after each partial parse (PEG-built parsers, special handlers)
        self._session = owner if hasattr(owner, "open_region") else None
        # a session that takes the appended text alone (no re-joined text per step): what it has not seen yet
        self._appender = getattr(owner, "parse_appended", None) if self._session is not None else None
        self._peg = owner.__class__ is PegStreamSession   # (told what the fast path took: see _step)
        self._unseen: list[str] = []
        self._region: OpenRegion | None = None
        self._tail = ""
        self._appended: list[str] = []    # fast-path text not yet folded into self._emitted
        self.fast_steps = 0
        self._chunks: list[str] = []
        self._text = ""
        self._dirty = False
        self._emitted = AssistantMessage()
        self._finished = False
        self.held_back = 0
        self.final_mismatch = False
        self.repairs: list[Any] = []
        self.final: AssistantMessage | None = None
        # improved fidelity: a call is released whole once accepted (core.chat.stream.CallRelease)
        self._release = CallRelease(turn_end_tokens(parser)) if getattr(parser, "release_calls_whole", False) \
            else None

    @property
    def text(self) -> str:
        """All text fed so far."""
        if self._dirty:
            self._text = "".join(self._chunks)
            self._chunks = [self._text]
            self._dirty = False
        return self._text

    @property
    def message(self) -> AssistantMessage:
        """The message the emitted deltas accumulate to (a copy)."""
        if self._release is not None:
            return self._release.view()
        self._fold()
        return self._emitted.copy()

    def _fold(self) -> None:
        """Fold the fast-path appends into the emitted message."""
        if not self._appended:
            return
        add = "".join(self._appended)
        self._appended = []
        e = self._emitted
        rec = getattr(e, "recycler", None)
        if rec is not None and rec.__class__ is IncrementalMapper:
            rec.touched(e)
        field = self._region.field if self._region is not None else self._fold_field
        if field == "content":
            e.content += add
        elif field == "reasoning_content":
            e.reasoning_content += add
        else:
            calls = e.tool_calls
            if getattr(e, "recycler", None) is None:   # a list others may hold: copied (a mapper's is ours)
                calls = e.tool_calls = list(calls)
            last = calls[-1]
            calls[-1] = _call(last.name, last.arguments + add, last.id)

    def _fast(self, text: str) -> list[MessageDelta] | None:
        """Deltas for ``text`` if it only extends the open region of the last parse, else None."""
        region = self._region
        if region is None:
            return None
        if region.field == "lazy":   # the last parse left its region to this feed (PegStreamSession)
            session = self._session
            region = self._region = session.resolve_region(region.lazy)
            if region is None:
                return None
            self._tail = session.tail(region.keep) if region.keep else ""
        if region.field == "pending":
            w = region.held + text
            if region.ws is None:
                region.ws = _ws_invariant_end(*region.ws_at)   # type: ignore[misc]
                region.ws_at = None
            if region.ws:    # the whitespace before the literal may grow while nothing of it came
                w = text.lstrip(_WS)
                if w:
                    region.ws = False
            if len(w) < len(region.lit) and region.lit.startswith(w):
                region.held = w
                self.fast_steps += 1
                return []
            if region.chain and w.startswith(region.lit) and region.lit and region.follow_chain(w[len(region.lit):]):
                self.fast_steps += 1
                return []
            if not w and not region.lit and region.ws:
                self.fast_steps += 1
                return []
            if region.json_start and w.startswith("{"):
                # the arguments open: they were "{" already, so the message gains what follows the brace
                out: list[str] = []
                state = advance_json_value(w, 0, len(w), JSON_VALUE_START, out)
                if state is None:
                    return None
                region.field, region.json = "json-arguments", state
                self.fast_steps += 1
                add = "".join(out)[1:]
                if not add:
                    return []
                self._appended.append(add)
                return [_call_delta(len(self._emitted.tool_calls) - 1, "", "", add)]
            lazy = region.lazy
            if lazy is not None and self._appender is not None:
                # not the literal's way: maybe text after the wrapper the last parse closed, which the region
                # "after" takes (decided once per region: the text since that parse is what _unseen holds)
                region.lazy = None
                session, r, n, mapper = lazy
                got = session._after_wrapper(r, n, mapper)
                if got is not None:
                    w = got.held + "".join(self._unseen)
                    if got.after(w):   # type: ignore[misc]
                        region.field, region.after, region.held = "after", got.after, w
                        self.fast_steps += 1
                        return []
            return None
        if region.field == "after":
            if region.lazy is not None:
                session, r, n, mapper = region.lazy
                region.lazy = None
                got = session._after_wrapper(r, n, mapper)
                if got is None:
                    return None
                region.after, region.held = got.after, got.held
            w = region.held + text
            if not region.after(w):   # type: ignore[misc]
                return None
            region.held = w
            self.fast_steps += 1
            return []
        if region.field == "hidden":
            if region.extend_held(text) is None:
                return None
            self.fast_steps += 1
            return []
        if region.field == "json-arguments":
            if region.json is not None:
                # the value closed on the previous feed (its brace emitted: the arguments are complete with
                # it); what follows it needs a parse
                if region.json[0] == _JCLOSED:
                    if region.after_of is not None:
                        region.after = _after_of(region)
                    after = region.after
                    if after == "content":
                        self._fold()
                        region.field, region.json, region.after = "content", None, None
                        return self._fast(text)
                    if after is None or not after(text):   # type: ignore[operator]
                        return None
                    self._fold()
                    region.field, region.json, region.held = "after", None, text
                    self.fast_steps += 1
                    return []
                if region.value and _HAS_WS.search(text) is not None:
                    return None
                out: list[str] = []
                state = advance_json_value(text, 0, len(text), region.json, out)
                if state is None:
                    return None
                region.json = state
                self.fast_steps += 1
                if state[0] == _JCLOSED and region.after_of is not None:
                    # the value closed: what may follow it is decided now, on this fast feed, not on the next
                    # one (which parses when the text is not what the grammar allows there)
                    region.after = _after_of(region)
                if not out:
                    return []
                add = "".join(out)
            elif '"' in text or "\\" in text or region.escape:
                add = region.extend_json_string(text)
                if add is None:
                    return None
                self.fast_steps += 1
                if not add:
                    return []
            else:
                self.fast_steps += 1
                stripped = text.rstrip(_WS)
                if not stripped:
                    region.ws_tail += text
                    return []
                add = region.ws_tail + stripped
                region.ws_tail = text[len(stripped):]
            self._appended.append(add)
            return [_call_delta(len(self._emitted.tool_calls) - 1, "", "", add)]
        field = region.field
        if field == "raw-arguments" and _RAW_UNSAFE.search(text) is not None:
            return None
        if region.fresh and text:
            if text[0] in _WS:
                return None
            region.fresh = False
        if region.held or region.can_hold:
            add = region.extend_held(text)
            if add is None:
                return None
            self.fast_steps += 1
            if not add:
                return []
            if region.keep:
                self._tail = (self._tail + text)[-region.keep:]
            if field == "content":
                self._appended.append(add)
                return [MessageDelta(content=add)]
            if field == "reasoning_content":
                self._appended.append(add)
                return [MessageDelta(reasoning_content=add)]
            if field == "arguments" and _JSON_ESCAPED.search(add) is not None:   # a tagged string value, escaped

                add = escape_json_inner(add)
            self._appended.append(add)
            return [_call_delta(len(self._emitted.tool_calls) - 1, "", "", add)]
        window = self._tail + text
        if not region.extends(window):
            return None
        if region.keep:
            self._tail = window[-region.keep:]
        self.fast_steps += 1
        if field == "content":
            self._appended.append(text)
            return [MessageDelta(content=text)]
        if field == "reasoning_content":
            self._appended.append(text)
            return [MessageDelta(reasoning_content=text)]
        if field == "raw-arguments" or _JSON_ESCAPED.search(text) is None:   # (json's own escape set)
            add = text
        else:
            add = escape_json_inner(text)
        self._appended.append(add)
        return [_call_delta(len(self._emitted.tool_calls) - 1, "", "", add)]

    def _step(self, is_partial: bool) -> list[MessageDelta]:
        if self._appended:
            self._fold_field = self._region.field if self._region is not None else None
            self._fold()
        self._region = None
        if self._appender is not None and is_partial:
            unseen = self._unseen
            self._unseen = []
            if len(unseen) == 1:
                added = unseen[0]
            else:
                added = "".join(unseen)
                if self._peg:
                    self._session.settled = len(added) - len(unseen[-1])   # what the fast path took (see there)
            if self._peg:
                self._session.current = self._emitted
            try:
                new = self._appender(added, True)
            except Exception:  # as _safe_parse: parsers must not raise; if one does, the step is held back
                new = None
        else:
            new = _safe_parse(self._parse, self.text, is_partial)
        if new is None:
            self.held_back += 1
            return []
        prev = self._emitted
        if new is prev:
            # the session gave the stream's message back: unchanged, or grown in place by its mapping
            # (IncrementalMapper.map's grow_current), which left on it the delta that did it
            deltas = [new.__dict__.pop("grown")] if self._peg and "grown" in new.__dict__ else []
        else:
            try:
                deltas = stream_deltas_between(prev, new)
            except StreamRetractionError:
                if is_partial:
                    self.held_back += 1
                    _recycle(new)
                    return []
                deltas = lenient_deltas(self._emitted, new)
                _recycle(new)
                self.final_mismatch = True
                self._emitted = apply_deltas(self._emitted, deltas)
                return deltas
            self._emitted = new
            rec = getattr(prev, "recycler", None)
            if rec is not None:
                rec.recycle(prev)
        if is_partial:
            session = self._session
            if session is not None:
                region = session.open_region
                # (while the session cannot yet tell whether the output repeats the turn header — the header
                # is complete but the whitespace after it may still grow — a fast path would put that
                # whitespace in the message uncut: every feed parses until the cut is decided)
                if region is not None and session._cutter.cut is not None:
                    self._region = region
                    if not region.keep:
                        self._tail = ""
                    elif self._appender is not None:
                        self._tail = session.tail(region.keep)
                    else:
                        self._tail = self.text[-region.keep:]
        return deltas

    def feed(self, text: str) -> list[MessageDelta]:
        """Append ``text`` (str) and return the deltas it produces (possibly none). Raises ``TypeError`` for
        anything but a str (bytes: decode them first), before the stream takes it: the stream stays usable."""
        if self._finished:
            raise RuntimeError("StreamingParser.feed() after finish()")
        if text.__class__ is not str and not isinstance(text, str):
            raise TypeError(f"StreamingParser.feed() takes text (str), not {type(text).__name__}: {text!r:.60}")
        if not text:
            return []
        self._chunks.append(text)
        self._dirty = True
        if self._appender is not None:
            self._unseen.append(text)
        if self._region is not None:
            fast = self._fast(text)
            if fast is not None:
                return fast if self._release is None else self._release.filter(fast)
        if self._release is not None:
            return self._release.filter(self._step(True))
        return self._step(True)

    def finish(self, is_partial: bool = False) -> list[MessageDelta]:
        """Parse the whole output as final (``is_partial``: the output was cut off) and return the last deltas.
        Idempotent: a second call returns []."""
        if self._finished:
            return []
        self._finished = True
        if self._appended:
            self._fold_field = self._region.field if self._region is not None else None
            self._fold()
        self._region = None
        # the final message *is* the one-shot parse (settled against the partial view by core.chat.repairs),
        # so the accumulated deltas equal it; a truncated call already streamed is kept, not taken back
        final = _safe_parse(self.parser.parse, self.text, is_partial)
        if final is None:
            out = self._step(is_partial)
            return out if self._release is None else self._release.filter(out, final=True)
        self.repairs = list(final.repairs)
        self.final = final
        if self._release is not None:   # the client's view becomes the one-shot parse
            self._emitted = final.copy()
            deltas, self.final_mismatch = self._release.settle(final)
            return deltas
        target = final
        extra = self._emitted.tool_calls[len(final.tool_calls):]
        if extra and any(r.name == "truncated-call" for r in final.repairs):
            target = final.copy()
            target.tool_calls = target.tool_calls + [ToolCall(t.name, t.arguments, t.id) for t in extra]
        try:
            deltas = stream_deltas_between(self._emitted, target)
        except StreamRetractionError:
            deltas = lenient_deltas(self._emitted, target)
            self.final_mismatch = True
            self._emitted = apply_deltas(self._emitted, deltas)
            self._emitted.repairs = list(final.repairs)
            return deltas
        self._emitted = target.copy()
        return deltas


class CallRelease:
    """The stream policy of the ``improved`` fidelity: a tool call's deltas are held back until the call is
    accepted — its arguments a complete JSON object — then released whole (id, name and arguments in one delta),
    in call order; content and reasoning pass at once. A call the final parse does not return (cut by the end
    of the output, rejected) was therefore never shown, so the deltas a client accumulates equal the one-shot
    parse exactly (no :func:`core.chat.repairs.settled` needed). The cost: a call's first argument byte reaches
    the client when the call's arguments close, not as they are written (docs/fidelity-lossless.md)."""

    def __init__(self, turn_end: tuple[str, ...] = ()) -> None:
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._calls: list[list] = []          # released: [id, name, [argument parts]]
        self._pending: dict[int, list] = {}   # held: index -> [id, name, [argument parts], "{" minus "}"]
        # repair trailing-end-of-turn: the tokens, and the field ("content" / "reasoning_content") and tail held
        # back because it may still become one of them at the end of the output
        self._turn_end = turn_end
        self._tail_field = ""
        self._tail = ""

    def _hold_tail(self, d: MessageDelta, out: list[MessageDelta], final: bool) -> MessageDelta | None:
        """``d`` (or any delta when ``d`` is None) with the held tail put back in front of it, minus a new tail
        that may still become an end-of-turn token (``trailing-end-of-turn``); the held tail of another field
        goes out first, as the output went on."""
        field = "content" if d is not None and d.content else "reasoning_content" if d is not None \
            and d.reasoning_content else ""
        if self._tail and (field != self._tail_field or final):
            out.append(MessageDelta(**{self._tail_field: self._tail}))
            self._tail = ""
        if not field:
            return d
        text = self._tail + getattr(d, field) if field == self._tail_field else getattr(d, field)
        k = 0 if final else turn_end_hold(self._turn_end, text)
        self._tail_field, self._tail = field, text[len(text) - k:] if k else ""
        return MessageDelta(**{field: text[:len(text) - k]}) if k < len(text) else None

    def filter(self, deltas: list[MessageDelta], final: bool = False) -> list[MessageDelta]:
        """The deltas a client gets out of the parser's ``deltas`` (``final``: release every held call)."""
        out: list[MessageDelta] = []
        for d in deltas:
            if self._turn_end:
                d = self._hold_tail(d, out, final)
                if d is None:
                    continue
            tc = d.tool_call
            if tc is None:
                if d.content:
                    self._content.append(d.content)
                if d.reasoning_content:
                    self._reasoning.append(d.reasoning_content)
                out.append(d)
                continue
            if tc.index < len(self._calls):
                c = self._calls[tc.index]
                c[0] = tc.id or c[0]
                c[1] = tc.name or c[1]
                c[2].append(tc.arguments)
                out.append(d)
                continue
            held = self._pending.setdefault(tc.index, ["", "", [], 0])
            held[0] = tc.id or held[0]
            held[1] = tc.name or held[1]
            if tc.arguments:
                held[2].append(tc.arguments)
                held[3] += tc.arguments.count("{") - tc.arguments.count("}")
        if final and self._turn_end and self._tail:
            self._hold_tail(None, out, True)
        while len(self._calls) in self._pending:
            i = len(self._calls)
            held = self._pending[i]
            # a cheap test first (braces balance, a "}" last), so a long argument is not re-read per delta;
            # braces inside strings may hold a call back to the finish, never release it early
            if not final and not (held[3] == 0 and held[2] and held[2][-1].rstrip().endswith("}")
                                  and is_json_object("".join(held[2]))):
                break
            args = "".join(held[2])
            del self._pending[i]
            self._calls.append([held[0], held[1], [args]])
            out.append(MessageDelta(tool_call=ToolCallDelta(i, held[0], held[1], args)))
        return out

    def view(self) -> AssistantMessage:
        """The message the released deltas accumulate to."""
        return AssistantMessage("".join(self._content), "".join(self._reasoning),
                                [ToolCall(n, "".join(a), i) for i, n, a in self._calls])

    def settle(self, final: AssistantMessage) -> tuple[list[MessageDelta], bool]:
        """The last deltas, from what the client has to ``final`` (the one-shot parse), and whether that took
        something back (never expected: a released call is accepted)."""
        have = self.view()
        try:
            deltas, mismatch = stream_deltas_between(have, final), False
        except StreamRetractionError:
            deltas, mismatch = lenient_deltas(have, final), True
        self._content, self._reasoning = [final.content], [final.reasoning_content]
        self._calls = [[t.id, t.name, [t.arguments]] for t in final.tool_calls]
        self._pending = {}
        self._tail = ""
        return deltas, mismatch


def _recycle(msg: AssistantMessage) -> None:
    """Give the tool-call list of ``msg`` (no longer read) back to the mapper that made it, if one did."""
    rec = getattr(msg, "recycler", None)
    if rec is not None:
        rec.recycle(msg)


def stream_deltas(parser: Any, output: str, *, chunk: int = 1, is_partial: bool = False) -> tuple[list[MessageDelta], AssistantMessage]:
    """Feed ``output`` in pieces of ``chunk`` characters, then finish. Returns (all deltas, the accumulated
    message). ``chunk`` must be >= 1."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    sp = StreamingParser(parser)
    out: list[MessageDelta] = []
    for i in range(0, len(output), chunk):
        out.extend(sp.feed(output[i:i + chunk]))
    out.extend(sp.finish(is_partial))
    return out, sp.message
