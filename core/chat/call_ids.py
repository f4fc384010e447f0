"""Tool-call ids for calls the model wrote without one, as llama.cpp's server fills them (``improved`` only).

llama.cpp's parser returns ``"id": ""`` for a call whose format has no id; its *server* then fills every missing
id with a random one before diffing, cached per call index so a stream's deltas and its final message carry the
same id (parser notes §5.5, ``set_tool_call_ids``). OpenAI clients need an id to answer a call, so at
``improved`` fidelity this project does the same at its output boundary (the CLI's ``parse``, ``conform``, the
explorer's Playground). At ``llama.cpp`` fidelity nothing changes: the parser's answer is the reference's.

An id is ``call_`` and 24 letters and digits from a cryptographic source unless the caller passes its own
``random.Random`` (tests). The first id a call index gets, the model's own or a generated one, is kept for that
index for the rest of the message. Where the format writes ids of its own (a JSON call's ``"id"`` field, an id
after the arguments) a stream may show a call before its id: there (``defer=True``) the stream sends no generated
id until the final deltas, so a model's own id is never replaced by a generated one (llama.cpp's server would).
"""

from __future__ import annotations

import random
import string
from dataclasses import replace
from typing import Iterable

from .message import AssistantMessage, MessageDelta, ToolCall, ToolCallDelta

PREFIX = "call_"
LENGTH = 24
_ALPHABET = string.ascii_letters + string.digits


def new_call_id(rng: random.Random | None = None) -> str:
    """``call_`` + :data:`LENGTH` random letters and digits (``rng``: a seeded generator for tests)."""
    r = rng if rng is not None else random.SystemRandom()
    return PREFIX + "".join(r.choice(_ALPHABET) for _ in range(LENGTH))


class CallIds:
    """The ids of one message's calls, by index. ``message(msg)`` fills a parse's missing ids; ``deltas(ds)``
    gives a call's first delta its id and drops any later one, so the accumulated stream equals ``message``
    of the final parse (pass ``final=True`` with the last deltas). ``enabled=False`` (llama.cpp fidelity)
    passes everything through unchanged; ``defer=True``: a generated id waits for the final deltas (the
    format writes ids, possibly after a call is first shown)."""

    def __init__(self, enabled: bool = True, rng: random.Random | None = None, defer: bool = False):
        self.enabled = enabled
        self.defer = defer
        self._rng = rng
        self._ids: list[str] = []
        self._seen = 0      # call indices the stream has shown

    def _id(self, index: int, own: str = "") -> str:
        while len(self._ids) <= index:
            self._ids.append("")
        if not self._ids[index]:
            self._ids[index] = own or new_call_id(self._rng)
        return self._ids[index]

    def message(self, msg: AssistantMessage) -> AssistantMessage:
        """``msg`` with every call's id set (a copy; ``msg`` itself when disabled or without calls)."""
        if not self.enabled or not msg.tool_calls:
            return msg
        out = msg.copy()
        out.tool_calls = [ToolCall(c.name, c.arguments, self._id(i, c.id)) for i, c in enumerate(out.tool_calls)]
        return out

    def deltas(self, deltas: Iterable[MessageDelta], final: bool = False) -> list[MessageDelta]:
        """The deltas with each call's id on the first delta of its index only (with ``defer``: the model's
        id when it comes, a generated one in an id-only delta at ``final`` for a call that never got one)."""
        out = list(deltas)
        if not self.enabled:
            return out
        for k, d in enumerate(out):
            tc = d.tool_call
            if tc is None:
                continue
            self._seen = max(self._seen, tc.index + 1)
            first = len(self._ids) <= tc.index or not self._ids[tc.index]
            if first and self.defer and not tc.id:
                continue
            cid = self._id(tc.index, tc.id) if first else ""
            if cid != tc.id:
                out[k] = replace(d, tool_call=replace(tc, id=cid))
        if final:
            for i in range(self._seen):
                if len(self._ids) <= i or not self._ids[i]:
                    out.append(MessageDelta(tool_call=ToolCallDelta(i, self._id(i))))
        return out
