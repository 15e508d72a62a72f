"""A minimal task for driving a runner with test stages: a dict with the ``failure``/``fail`` a
stage's interface reads."""

from __future__ import annotations


class Item(dict):
    failure = None

    def fail(self, stage, reason, cause="input", kind="error"):
        self.failure = {"stage": stage, "reason": reason, "cause": cause, "kind": kind}
