"""Finished tasks back in the order they went in, whatever order the workers finish them in.

A streaming runner yields tasks as they finish, and which of two workers finishes first changes
from run to run. Where the order is written down (samples in shards, which a seeded loader then
reads by position), that made the same input and config give other shards, and another trained
model, on every run. :class:`InputOrder` holds a finished task until every task that went in
before it has come out; ``full`` tells the runner to stop taking new input while it holds
``limit`` tasks, so memory stays bounded by a slow task's wait, not by the dataset.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator


class InputOrder:
    """``runner.run(order.feed(tasks), hold=lambda: order.full)``; ``add(key, task)`` for each task the
    runner yields returns the tasks now due, in input order (``keys``, the keys of ``tasks`` in their
    order); ``rest()`` at the end returns what still waits. A task whose key is not one of ``keys``, or
    comes out a second time, is not held (there is no place for it in the order).

    ``full`` (``limit`` waiting) holds new input back, but tasks already running still come in. A
    runner takes input while held only once everything it took has come out (else a hold could
    stall it), so a task taken before such a pull and still not out never will be (a stage dropped
    it): its place is skipped. A slow task is waited for however many finish behind it; a lost one
    costs neither the run its memory nor the order of the others."""

    def __init__(self, keys: Iterable[Any], *, limit: int) -> None:
        keys = list(keys)
        self._place = {key: i for i, key in enumerate(keys)}
        self._end = len(keys)
        self._waiting: dict[int, Any] = {}  # place in the order -> finished task
        self._next = 0  # the place of the next task due
        self._taken = 0  # tasks the runner has taken from feed()
        self._settled = 0  # every place below it is out or lost: nothing to wait for there
        self.limit = max(1, limit)

    @property
    def full(self) -> bool:
        """Whether ``limit`` tasks are waiting: the runner should take no new input for now."""
        return len(self._waiting) >= self.limit

    def feed(self, tasks: Iterable[Any]) -> Iterator[Any]:
        """``tasks`` (in the order of ``keys``) for the runner, noting how many it has taken."""
        for task in tasks:
            if self.full:  # taken while held: the runner has nothing in flight
                self._settled = self._taken
            self._taken += 1
            yield task

    def add(self, key: Any, task: Any) -> list[Any]:
        place = self._place.get(key)
        if place is None or place < self._next or place in self._waiting:
            return [task]
        self._waiting[place] = task
        return self._due()

    def rest(self) -> list[Any]:
        rest = [self._waiting[p] for p in sorted(self._waiting)]
        self._waiting.clear()
        self._next = self._end
        return rest

    def _due(self) -> list[Any]:
        due = []
        while self._next in self._waiting or self._next < self._settled:
            if self._next in self._waiting:
                due.append(self._waiting.pop(self._next))
            self._next += 1
        return due
