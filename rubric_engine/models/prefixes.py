"""Work remembered per request prefix, so a long conversation costs the client linear work, not quadratic.

Why: a conversation's request at turn k is the request of turn k - 1 (the very same message objects: the engine
builds each turn's message once and never changes it) followed by a reply and the next user turn. What the
client computed over the earlier request (its messages redacted, its cache key's hash so far) is picked up
where that request ended, and only the new messages are visited. Finding the prefix costs one identity
comparison per message, done in C: at 3,000 turns (~9 million message visits) a fraction of a second, where a
lookup by each message's text cost seconds.

The memory holds the message lists it was given (references to the same dicts, not copies of them), bounded in
entries and in references held; the oldest entry goes first.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

__all__ = ["PrefixMemory"]

T = TypeVar("T")


class PrefixMemory(Generic[T]):
    """Values remembered for message lists; `longest(messages)` finds the longest remembered list that
    `messages` starts with (the same objects in the same order) among those ending at most `window` messages
    before its end (a turn adds two messages; a re-ask two more)."""

    def __init__(self, entries: int = 64, max_refs: int = 1_000_000, window: int = 8) -> None:
        self.entries, self.max_refs, self.window = entries, max_refs, window
        self._held: OrderedDict[tuple[int, int], tuple[list[Any], T]] = OrderedDict()
        self._refs = 0

    def longest(self, messages: Sequence[Any]) -> tuple[int, T | None]:
        """(n, value) for the longest remembered list equal to messages[:n] object for object; (0, None) if none."""
        for n in range(len(messages), max(len(messages) - self.window - 1, 0), -1):
            key = (id(messages[n - 1]), n)
            held = self._held.get(key)
            if held is not None and all(map(operator.is_, held[0], messages)):
                self._held.move_to_end(key)
                return n, held[1]
        return 0, None

    def remember(self, messages: Sequence[Any], value: T) -> None:
        """Remember `value` for `messages` (a copy of the list is kept: the caller may reuse its own)."""
        if not messages or len(messages) > self.max_refs:
            return
        key = (id(messages[-1]), len(messages))
        old = self._held.pop(key, None)
        if old is not None:
            self._refs -= len(old[0])
        self._held[key] = (list(messages), value)
        self._refs += len(messages)
        while len(self._held) > self.entries or self._refs > self.max_refs:
            _, (dropped, _value) = self._held.popitem(last=False)
            self._refs -= len(dropped)

    def clear(self) -> None:
        self._held.clear()
        self._refs = 0

    def __len__(self) -> int:
        return len(self._held)
