"""Finished tasks back in the order they went in, whatever order the workers finish them in.

A streaming runner yields tasks as they finish, and which of two workers finishes first changes
from run to run. Where the order is written down (samples in shards, which a seeded loader then
reads by position), that made the same input and config give other shards, and another trained
model, on every run. :class:`InputOrder` holds a finished task until every task that went in
before it has come out; ``full`` tells the runner to stop taking new input while it holds
``limit`` tasks, so memory stays bounded by a slow task's wait, not by the dataset.
"""

from __future__ import annotations

from typing import Any, Iterable


class InputOrder:
    """``add(key, task)`` returns the tasks now due, in input order (``keys``); ``rest()`` at the
    end returns what still waits. A task whose key is not one of ``keys``, or comes out a second
    time, is not held (there is no place for it in the order). ``full`` (``limit`` waiting) holds
    new input back, but tasks already running still come in; should ``4 * limit`` wait on one that
    never comes out (a stage that dropped it), the earliest waiting one is let go: a lost task
    costs the order from there, never the run its memory."""

    def __init__(self, keys: Iterable[str], *, limit: int) -> None:
        self._order = list(keys)
        self._place = {key: i for i, key in enumerate(self._order)}
        self._waiting: dict[int, Any] = {}  # place in the order -> finished task
        self._next = 0  # the place of the next task due
        self.limit = max(1, limit)

    @property
    def full(self) -> bool:
        """Whether ``limit`` tasks are waiting: the runner should take no new input for now."""
        return len(self._waiting) >= self.limit

    def add(self, key: str, task: Any) -> list[Any]:
        place = self._place.get(key)
        if place is None or place < self._next or place in self._waiting:
            return [task]
        self._waiting[place] = task
        due = self._due()
        if len(self._waiting) > 4 * self.limit:  # waiting on a task that is not coming: skip its place
            self._next = min(self._waiting)
            due += self._due()
        return due

    def rest(self) -> list[Any]:
        rest = [self._waiting[p] for p in sorted(self._waiting)]
        self._waiting.clear()
        self._next = len(self._order)
        return rest

    def _due(self) -> list[Any]:
        due = []
        while self._next in self._waiting:
            due.append(self._waiting.pop(self._next))
            self._next += 1
        return due
