"""What a loader stream skips: counted per reason and shard, warned at a bounded rate, and stopped
when a shard or the whole stream gives nothing usable.

Skipping is for a few bad samples among good ones. Two rules make a loader always end:

- **a shard with no decodable sample** is an error naming it: once every sample this stream reads
  from it was undecodable (its part of the shard read once; a sample seen undecodable twice before
  any good one also means a full pass), the rest of the shard is read once (``shard_has_decodable``)
  and only if it has no decodable sample either is it an error (other streams read the rest, so a
  truncated tail or a bad region is skipped, not fatal);
- **a stream with no usable sample** is an error naming the shards that were skipped, once every
  sample of the stream (all its shards, one pass) was skipped since the last usable one (this also
  catches "every sample is over ``max_seq_len``"), or after ``max_consecutive`` undecodable samples
  in a row, whichever comes first.

Warnings: the first skip of each reason is one line naming the shard, the sample and the member;
later ones of that reason are counted and at most one line per ``warn_interval`` seconds (per
stream) says how many were skipped since; the loader adds a summary line at that interval. ``counts`` holds ``reason`` totals and ``reason@shard`` details.

Events and samples: ``counts`` counts skip *events*. A stream reads its samples again every pass (and
a packing buffer larger than a small dataset reads it many times over before the first batch), so
one corrupt sample gives one event per pass. ``Affected`` keeps the distinct samples per reason and
shard: what a user means by "how many of my samples were skipped".
"""

from __future__ import annotations

import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, NoReturn

from megatron.energon import SkipSample

from vfm_data.errors import DataWarning, ShardError, one_line

WARN_INTERVAL_S = 60.0
MAX_CONSECUTIVE_UNDECODABLE = 10_000
#: Reasons a sample is skipped although it decoded (they do not count against its shard).
NOT_UNDECODABLE = ("overlong_drop",)
#: Reasons a sample is changed, not skipped: it is used (counted, not in ``skipped``).
CROP_REASONS = ("overlong_crop", "patch_remainder_crop", "duration_crop")


def shard_label(dataset_path: Any, shard_name: str) -> str:
    """The name a shard goes by in counts and messages: its dataset folder and file name."""
    return f"{str(dataset_path).rstrip('/')}/{shard_name}" if dataset_path else str(shard_name)


def split_counts(counts: Mapping[str, int]) -> tuple[Counter[str], dict[str, Counter[str]]]:
    """``counts`` (``reason`` and ``reason@shard`` keys) -> (per reason, per shard per reason)."""
    by_reason: Counter[str] = Counter()
    by_shard: dict[str, Counter[str]] = {}
    for key, n in counts.items():
        reason, at, shard = key.partition("@")
        if at:
            by_shard.setdefault(shard, Counter())[reason] += n
        else:
            by_reason[reason] += n
    return by_reason, by_shard


def format_counts(by_reason: Mapping[str, int], by_shard: Mapping[str, Mapping[str, int]], *, shards: int = 5) -> str:
    """``missing_key 30 (a/shard-000000.tar 20, a/shard-000001.tar 10); corrupt 1 (...)``."""
    parts = []
    for reason, total in sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0])):
        where = sorted(((c[reason], s) for s, c in by_shard.items() if c.get(reason)), reverse=True)
        shown = ", ".join(f"{s} {n}" for n, s in where[:shards]) + (f", {len(where) - shards} more shards" if len(where) > shards else "")
        parts.append(f"{reason} {total}" + (f" ({shown})" if shown else ""))
    return "; ".join(parts) if parts else "nothing"


class Affected:
    """The distinct samples each reason affected: ``"reason@shard"`` -> sample keys. A sample met
    again (the next pass, another stream of a blend listing its dataset twice, another rank of a
    subset group) is one sample. Memory: one key per affected sample."""

    def __init__(self, labels: Mapping[str, Iterable[str]] | None = None) -> None:
        self.labels: dict[str, set[str]] = {label: set(keys) for label, keys in (labels or {}).items()}

    def add(self, label: str, key: str) -> bool:
        """Remember ``key`` under ``label``; whether it was new."""
        keys = self.labels.setdefault(label, set())
        if key in keys:
            return False
        keys.add(key)
        return True

    def by_reason(self) -> Counter[str]:
        """Distinct samples per reason."""
        counts: Counter[str] = Counter()
        for label, keys in self.labels.items():
            counts[label.partition("@")[0]] += len(keys)
        return counts

    def by_shard(self) -> dict[str, Counter[str]]:
        """Distinct samples per shard and reason."""
        shards: dict[str, Counter[str]] = {}
        for label, keys in self.labels.items():
            reason, _, shard = label.partition("@")
            shards.setdefault(shard, Counter())[reason] += len(keys)
        return shards

    def skipped(self) -> int:
        """Distinct samples skipped (for any reason but a crop: a cropped sample is used)."""
        return len({(label.partition("@")[2], key) for label, keys in self.labels.items()
                    if label.partition("@")[0] not in CROP_REASONS for key in keys})

    def to_state(self) -> dict[str, list[str]]:
        return {label: sorted(keys) for label, keys in sorted(self.labels.items()) if keys}

    @classmethod
    def from_state(cls, state: Any) -> "Affected":
        """From :meth:`to_state`'s JSON (a checkpoint is data: anything else is refused, named)."""
        if state is None:
            return cls()
        if not isinstance(state, dict) or not all(
            isinstance(label, str) and "@" in label and isinstance(keys, list) and all(isinstance(k, str) for k in keys)
            for label, keys in state.items()
        ):
            raise ValueError(one_line(f"loader state 'affected' is {type(state).__name__} {str(state)[:80]!r}; accepted: "
                                      "a mapping of 'reason@shard' to a list of sample keys (strings)"))
        return cls(state)


class _RateLimiter:
    """May a warning of this reason be printed now, and how many were held back?"""

    def __init__(self) -> None:
        self.last: dict[str, float] = {}
        self.held: Counter[str] = Counter()

    def due(self, reason: str, interval: float, now: float) -> int | None:
        """None while held back; else how many of this reason were held back since the last line."""
        last = self.last.get(reason)
        if last is not None and now - last < interval:
            self.held[reason] += 1
            return None
        self.last[reason] = now
        return self.held.pop(reason, 0)


@dataclass
class _ShardTally:
    owned: int = 0  # samples this stream reads from the shard per pass (0: not known)
    good: int = 0  # decodable samples seen
    bad: set = field(default_factory=set)  # undecodable sample keys, kept only while good == 0
    first: str = ""  # the first skip, for the error message


class SkipLog:
    """Skips of one loader stream (shared by its decoder and task encoder)."""

    def __init__(self, *, warn_interval: float = WARN_INTERVAL_S,
                 max_consecutive: int = MAX_CONSECUTIVE_UNDECODABLE, warn: bool = True) -> None:
        if max_consecutive < 1:
            raise ValueError(f"max_consecutive must be >= 1, got {max_consecutive}")
        self.counts: Counter[str] = Counter()
        self.affected = Affected()  # the distinct samples behind ``counts``
        self.fresh: list[tuple[str, str]] = []  # ("reason@shard", key) newly in ``affected``, for the loader
        self.warn_interval, self.max_consecutive = float(warn_interval), int(max_consecutive)
        self._shards: dict[str, _ShardTally] = {}
        self._since_usable: set = set()  # (shard, key) skipped since the last usable sample
        self._consecutive = 0  # undecodable samples in a row
        self._limiter = _RateLimiter()
        self.warn = warn
        #: shard -> whether any of its samples decodes (all of them, not only this stream's part)
        self.shard_has_decodable: Callable[[str], bool] | None = None

    def add_shards(self, owned: Mapping[str, int]) -> None:
        """Register how many samples of each shard the stream reads per pass (a dataset listed
        twice in a blend reads the same samples: the larger count holds)."""
        for shard, n in owned.items():
            tally = self._shards.setdefault(shard, _ShardTally())
            tally.owned = max(tally.owned, int(n))

    @property
    def stream_samples(self) -> int:
        return sum(t.owned for t in self._shards.values())

    # --- outcomes ------------------------------------------------------------------------------

    def decoded(self, shard: str) -> None:
        tally = self._shards.setdefault(shard, _ShardTally())
        tally.good += 1
        if tally.bad:
            tally.bad = set()
        self._consecutive = 0

    def used(self) -> None:
        """A sample reached packing / batching."""
        self._since_usable.clear()

    def met(self, reason: str, *, shard: str, key: str) -> None:
        """Remember a sample this reason affected (a skip, or a crop: ``CROP_REASONS``)."""
        label = f"{reason}@{shard}"
        if self.affected.add(label, key):
            self.fresh.append((label, key))

    def take_fresh(self) -> list[tuple[str, str]]:
        """The samples newly affected since the last call."""
        fresh, self.fresh = self.fresh, []
        return fresh

    def skip(self, reason: str, *, shard: str, key: str, member: str, detail: str) -> NoReturn:
        """Count, maybe warn, apply the two rules, then skip the sample (``SkipSample``)."""
        self.counts[reason] += 1
        self.counts[f"{reason}@{shard}"] += 1
        self.met(reason, shard=shard, key=key)
        where = f" in member {member!r}" if member else ""
        what = f"sample {key!r} of shard {shard}: {reason}{where} ({detail})"
        self._warn(reason, what)
        sample = (shard, key)
        if reason not in NOT_UNDECODABLE:
            self._consecutive += 1
            self._check_shard(shard, sample, what)
        self._since_usable.add(sample)
        self._check_stream()
        raise SkipSample()

    # --- reporting -----------------------------------------------------------------------------

    def summary(self, shards: Iterable[str] | None = None) -> str:
        """Counts per reason and shard (of ``shards`` only, if given), on one line."""
        by_reason, by_shard = split_counts(self.counts)
        if shards is not None:
            by_shard = {s: by_shard[s] for s in shards if s in by_shard}
            by_reason = sum(by_shard.values(), Counter())
        return format_counts(by_reason, by_shard)

    def _warn(self, reason: str, what: str) -> None:
        if not self.warn:
            return
        held = self._limiter.due(reason, self.warn_interval, time.monotonic())
        if held is None:
            return
        by_reason, by_shard = split_counts(self.counts)
        if self.counts[reason] == 1:
            tail = f"further {reason} skips are counted (loader.counts) and warned at most every {self.warn_interval:g} s"
        else:
            tail = (f"{held} more {reason} skips since the last warning; skipped by this stream so far: "
                    f"{format_counts({reason: by_reason[reason]}, by_shard)}")
        verb = "dropped" if reason in NOT_UNDECODABLE else "skipped"
        warnings.warn(one_line(f"vfm_data: {verb} {what}; {tail}"), DataWarning, stacklevel=3)

    # --- the two rules -------------------------------------------------------------------------

    def _check_shard(self, shard: str, sample: tuple, what: str) -> None:
        tally = self._shards.setdefault(shard, _ShardTally())
        if tally.good:
            return
        tally.first = tally.first or what
        seen_before = sample in tally.bad
        tally.bad.add(sample)
        if seen_before or (tally.owned and len(tally.bad) >= tally.owned):
            if self.shard_has_decodable is not None and self.shard_has_decodable(shard):
                tally.good, tally.bad = 1, set()  # other streams read its good samples
                return
            _, by_shard = split_counts(self.counts)
            raise ShardError(
                f"vfm_data: shard {shard} has no decodable sample: the {len(tally.bad)} samples this loader "
                f"stream reads from it were skipped and none of the others decodes "
                f"({format_counts(by_shard.get(shard, {}), {})}; first: "
                f"{tally.first}). Re-write the shard or remove it from the dataset"
            )

    def _check_stream(self) -> None:
        total = self.stream_samples
        full_pass = total > 0 and len(self._since_usable) >= total
        if not full_pass and self._consecutive < self.max_consecutive:
            return
        skipped = {s for s, _ in self._since_usable}
        shards = sorted(skipped)
        named = ", ".join(shards[:5]) + (f" and {len(shards) - 5} more" if len(shards) > 5 else "")
        why = (f"all {len(self._since_usable)} samples it reads (one pass over its shards)" if full_pass
               else f"{self._consecutive} undecodable samples in a row")
        raise ShardError(
            f"vfm_data: a loader stream has no usable sample: {why} were skipped, from {named} "
            f"({self.summary(shards)})"
        )
