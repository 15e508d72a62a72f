"""The resumable loader the trainer iterates: logical streams, worker processes, exact resume,
and model-parallel subset loading.

Step ``b`` of a rank in a subset group of ``n`` ranks (a TP/CP group; ``n = 1`` without one) is made
of the chunks ``c = b*n + j`` for ``j < n``; chunk ``c`` is the ``c // streams``-th batch of stream
``c % streams``. Rank ``j`` reads only its chunk (its streams are those with ``s % n == j``) and an
all-gather assembles the step on every rank, so each rank reads 1/n of the bytes ("gather"). The
other way ("turns"): step ``b`` is chunk ``b`` alone, a whole batch, read by its stream's owner,
group rank ``(b % streams) % n``, and broadcast to the others, so each rank also reads about 1/n of
the bytes (exactly where n divides streams; n need not), and the sample sequence is that of one
process reading the same streams, whatever ``n`` (the trainer's choice: tp, cp or pp may change
at a resume). A bucketed blend's chunks cannot be concatenated (each is one bucket's shape and batch
size): it always takes turns.

The state is the next step plus, per stream, energon's state after the last batch consumed from
it: restoring rebuilds the streams from those states, in any number of worker processes.
"""

from __future__ import annotations

import atexit
import dataclasses
import inspect
import json
import multiprocessing
import pickle
import queue as queue_mod
import time
import traceback
import warnings
import weakref
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import torch
from vfm_plugins import exit_with_parent, json_data
from vfm_plugins.files import read_regular
from vfm_plugins.formats import check_format_version

from vfm_data.blend_file import dataset_folders
from vfm_data.blenders import get_blender, groups_batches
from vfm_data.errors import DataError, DataWarning, data_error_in, one_line
from vfm_data.loader_options import SHARE_MODES, check_loader_options
from vfm_data.packing import patch_grid
from vfm_data.sample import first_sample
from vfm_data.skips import CROP_REASONS, WARN_INTERVAL_S, Affected, format_counts, split_counts
from vfm_data.state_codec import decode_state
from vfm_data.stream import LoaderSpec, Stream
from vfm_data.subset import gather_batches, share_batch, share_failure

STATE_VERSION = 1
#: LoaderSpec fields that define the sample sequence, saved in the state: another value at resume
#: continues another sequence (a warning), or for these cannot continue at all (an error; energon's
#: restore fails on them with a bare AssertionError).
SEQUENCE_FIELDS = ("patch_size", "temporal_patch", "batch_size", "max_seq_len", "packing_buffer", "overlong",
                   "shuffle_buffer", "max_samples_per_sequence", "split_part", "blender", "blender_options", "seed")
UNRESTORABLE = ("patch_size", "temporal_patch", "split_part", "blender", "shuffled", "datasets", "packed")
#: energon's streams (run without energon workers) restore only batches of the saved size and kind:
#: another batch size, or packing switched on or off, failed at the first batch with a bare AssertionError
BATCHING = ("batch_size", "packed")
DEFAULT_STREAMS = 4
MAX_PACKING_BUFFER = 1 << 14  # default packing buffers hold at most this many samples


def _bucket_sizes(settings: dict[str, Any]) -> tuple | None:
    """What sizes a bucketed blend's batches (its batch_size or tokens_per_batch), None for other
    blenders: energon's group batching keeps partly filled buckets in the saved position and asserts
    that a bucket's batch size never changes, so only the same sizes continue it. The loader's own
    batch_size is not one of them: the buckets set theirs (vfm_data.stream)."""
    if settings.get("blender") != "bucketed":
        return None
    options = settings.get("blender_options") or {}
    return options.get("batch_size"), options.get("tokens_per_batch")


def _next_of(stream: Stream, with_state: bool = True) -> tuple[Any, Any, tuple]:
    """The stream's next (batch, state, skips: (counts, fresh)); a vfm DataError that energon wrapped on its way out
    comes out as itself (one line naming the shards)."""
    try:
        return stream.next(with_state=with_state)
    except Exception as exc:
        found = data_error_in(exc)
        if found is None or found is exc:
            raise
        raise found from None


def _portable(exc: BaseException) -> BaseException:
    """The error to hand to the main process: the DataError inside ``exc`` or ``exc`` itself, if it
    pickles; else a RuntimeError with its text."""
    err = data_error_in(exc) or exc
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:
        return RuntimeError(f"{type(err).__name__}: {err}")


def _close_at_exit(loader: "weakref.ref[ResumableLoader]") -> None:
    alive = loader()
    if alive is not None:
        alive.close()


def _worker_main(spec: LoaderSpec, streams: list[int], states: dict, first_chunk: int, stride: int,
                 out: "multiprocessing.Queue") -> None:
    """Produce this worker's chunks in increasing chunk order: (chunk, batch, state, skips)."""
    # A worker blocked on a full queue would wait forever once the reading process is gone (kill -9):
    # end with it (the process that started us, also under forkserver).
    exit_with_parent(multiprocessing.parent_process().pid, what="data worker")
    torch.set_num_threads(1)
    try:
        built = {s: Stream(spec, s, states.get(s)) for s in streams}
        c = first_chunk
        while True:
            s = c % spec.streams
            if s in built:
                out.put((c, *_next_of(built[s])))
            c += stride
    except Exception as exc:  # hand the error itself to the main process instead of dying silently
        err = _portable(exc)
        if not isinstance(err, DataError):  # a DataError is one line the main process raises as is
            traceback.print_exc()
        out.put((-1, err, None, None))
        # Stay until the main process stops us (close(), or its exit: we are a daemon): the batches
        # still queued share their tensors through this process, which must live until they are read.
        while True:
            time.sleep(60)


class ResumableLoader:
    """Iterate batches; ``state_dict()`` / ``load_state_dict()`` go into training checkpoints."""

    def __init__(self, spec: LoaderSpec, *, num_workers: int = 0, group: Any = None, prefetch: int = 2,
                 mp_context: str = "fork", share: str = "auto") -> None:
        self.spec = spec
        self.group = group
        self.group_size = 1 if group is None else torch.distributed.get_world_size(group)
        self.group_rank = 0 if group is None else torch.distributed.get_rank(group)
        self.num_workers, self.prefetch, self.mp_context = num_workers, prefetch, mp_context
        # "turns": a step is one whole chunk, read by one rank in turn (a bucketed blend's batch is one
        # bucket and cannot be concatenated); "gather": n parts, one per rank
        self.share = share_mode(groups_batches(get_blender(spec.blender, **spec.blender_options)), share)
        self.whole_chunks = self.share == "turns"
        if spec.streams % self.group_size and not self.whole_chunks:  # turns: a rank may own more streams, or none
            raise ValueError(f"streams ({spec.streams}) must be a multiple of the subset group size ({self.group_size})")
        # the blend's dataset folders by name, in order: energon's state holds a position per dataset
        # (another count fails its restore, another order applies each position to another dataset)
        try:
            self._datasets: list[str] | None = [f.name for f in _folders_of(spec.path, spec.split_part)]
        except Exception:  # noqa: BLE001 - metadata energon reads but vfm's blend reader does not (trusted code)
            self._datasets = None
        self.step = 0
        self.states: dict[int, Any] = {}  # stream -> JSON state after its last consumed batch
        self.counts: Counter[str] = Counter()  # bad data skipped, overlong dropped / cropped, by reason
        self.shard_counts: dict[str, Counter[str]] = {}  # the same per shard (dataset folder/shard file)
        # counts are events (a corrupt sample counts again every pass); these are the distinct samples,
        # the same on every rank of the subset group once shared (state_dict, metrics)
        self.affected = Affected()
        self._unshared: list[tuple[str, str]] = []  # newly affected here, not yet shared with the group
        self._summarized_at, self._summarized = time.monotonic(), 0
        self.bytes_read = 0  # bytes this rank read from shards
        self._streams: dict[int, Stream] | None = None
        self._unsaved: set[int] = set()  # in-process streams whose state is taken when asked for
        self._workers: list[Any] = []
        self._queues: list[Any] = []

    # --- iteration -----------------------------------------------------------------------------

    @property
    def local_streams(self) -> list[int]:
        return [s for s in range(self.spec.streams) if s % self.group_size == self.group_rank]

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        if self.whole_chunks:
            chunk = self.step
            owner = chunk % self.spec.streams % self.group_size  # its stream's owner (chunk % n where n divides streams)
        else:
            chunk, owner = self.step * self.group_size + self.group_rank, self.group_rank
        batch: Any = None
        if owner == self.group_rank:
            try:
                batch, state, skips = self._fetch(chunk)
            except Exception as exc:
                if self.group is None:
                    raise
                # the group's other ranks wait for this rank's part: hand them the error instead, so
                # every rank stops with it (not with a collective's timeout, minutes later)
                share_failure(_portable(exc), owner, self.group, whole=self.whole_chunks)
                raise
            if state is None:  # an in-process stream: its state is read from it when asked for
                self._unsaved.add(chunk % self.spec.streams)
            else:
                self.states[chunk % self.spec.streams] = state
            self._add_skips(skips)
            self.bytes_read += batch.nbytes
        if self.group is not None:
            batch = share_batch(batch, owner, self.group) if self.whole_chunks else gather_batches(batch, self.group)
        self.step += 1
        return batch

    def _fetch(self, chunk: int) -> tuple[Any, Any, tuple]:
        stream = chunk % self.spec.streams
        if self.num_workers == 0:
            if self._streams is None:
                self._streams = {s: Stream(self.spec, s, self.states.get(s)) for s in self.local_streams}
            return _next_of(self._streams[stream], with_state=False)
        if not self._workers:
            self._start_workers(chunk)  # this rank's chunks: chunk, chunk + n, ... (of its streams)
        q = self._queues[self.local_streams.index(stream) % len(self._queues)]
        while True:
            try:
                c, batch, state, skips = q.get(timeout=5)
                break
            except queue_mod.Empty:
                dead = [w for w in self._workers if not w.is_alive()]
                if dead:
                    raise RuntimeError(f"data worker {dead[0].name} exited with code {dead[0].exitcode}")
        if c < 0:  # the worker's own error (a DataError names the shards); the loader is done
            self.close()
            raise batch
        assert c == chunk, f"data worker returned chunk {c}, expected {chunk}"
        return batch, state, skips

    def _start_workers(self, first_chunk: int) -> None:
        local = self.local_streams
        n = min(self.num_workers, len(local))
        ctx = multiprocessing.get_context(self.mp_context)
        for p in range(n):
            mine = local[p::n]
            q = ctx.Queue(maxsize=self.prefetch * len(mine))
            w = ctx.Process(
                target=_worker_main,
                # in turns every chunk whose stream is the worker's (n need not divide streams)
                args=(self.spec, mine, {s: self.states.get(s) for s in mine}, first_chunk,
                      1 if self.whole_chunks else self.group_size, q),
                name=f"vfm-data-worker-{p}",
                daemon=True,
            )
            w.start()
            self._workers.append(w)
            self._queues.append(q)
        if n:
            # before multiprocessing's own exit hook (registered earlier, so run later), which
            # terminates daemon workers once and then joins them without a timeout: a worker forked
            # with the trainer's stop handler takes that first SIGTERM as "finish the step" and the
            # process never exited (vfm train with data.workers > 0 hung after its last step)
            atexit.register(_close_at_exit, weakref.ref(self))

    # --- what was skipped ----------------------------------------------------------------------

    def _add_skips(self, skips: tuple[dict[str, int], list[tuple[str, str]]]) -> None:
        counts, fresh = skips
        by_reason, by_shard = split_counts(counts)
        self.counts.update(by_reason)
        for shard, c in by_shard.items():
            self.shard_counts.setdefault(shard, Counter()).update(c)
        self._unshared += [(label, key) for label, key in fresh if self.affected.add(label, key)]
        skipped = self.skipped
        if skipped > self._summarized and time.monotonic() - self._summarized_at >= WARN_INTERVAL_S:
            self._summarized_at, self._summarized = time.monotonic(), skipped
            warnings.warn(self.skip_summary(), DataWarning, stacklevel=3)

    def _share_affected(self, parts: list[list[tuple[str, str]]]) -> None:
        """Join the group's newly affected samples (gathered ``_unshared`` lists) into ``affected``."""
        for part in parts:
            for label, key in part:
                self.affected.add(label, key)
        self._unshared = []

    @property
    def skipped(self) -> int:
        """Distinct samples skipped so far (undecodable or over ``max_seq_len``), each once however often
        it was read again; crops are not skips. The events are :attr:`skip_events`."""
        return self.affected.skipped()

    @property
    def skip_events(self) -> int:
        """Skips so far, a sample read again (each pass, a packing buffer's read-ahead) counted again."""
        return sum(n for reason, n in self.counts.items() if reason not in CROP_REASONS)

    def skip_summary(self) -> str:
        """One line: what was skipped, per reason and per shard (distinct samples)."""
        return one_line(f"vfm_data: skipped {self.skipped} distinct samples so far ({self.skip_events} skips, counting "
                        f"re-reads): {format_counts(self.affected.by_reason(), self.affected.by_shard())}")

    def metrics(self) -> dict[str, float]:
        """Counts for the trainer's metrics: ``data_skipped`` (distinct samples skipped),
        ``data_skip_events`` (skips counting every re-read of a sample) and ``data_<reason>`` (distinct
        samples per reason, crops included). With a subset group: the group's figures, a collective
        over it (every rank calls it at the same steps, as :meth:`state_dict`)."""
        events = Counter(self.counts)
        if self.group is not None:
            gathered: list[Any] = [None] * self.group_size
            torch.distributed.all_gather_object(gathered, (dict(self.counts), self._unshared), group=self.group)
            self._share_affected([fresh for _, fresh in gathered])
            events = sum((Counter(c) for c, _ in gathered), Counter())
        distinct = self.affected.by_reason()
        reasons = sorted(set(distinct) | set(events))
        return {"data_skipped": float(self.skipped),
                "data_skip_events": float(sum(n for r, n in events.items() if r not in CROP_REASONS)),
                **{f"data_{r}": float(distinct[r]) for r in reasons}}

    def _save_streams(self) -> None:
        """Take the states of the in-process streams advanced since the last time."""
        for s in sorted(self._unsaved):
            self.states[s] = self._streams[s].state()  # type: ignore[index]
        self._unsaved.clear()

    def close(self) -> None:
        """Stop worker processes (also done at exit). A worker still alive 5 s after its SIGTERM
        (one forked with a handler that takes a first SIGTERM as "finish the step") is killed."""
        self._save_streams()  # state_dict() after close() still gives the position
        for w in self._workers:
            w.terminate()
        for w in self._workers:
            w.join(timeout=5)
            if w.is_alive():
                w.kill()
                w.join(timeout=5)
        self._workers, self._queues, self._streams = [], [], None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # --- state ---------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """JSON-ready state (no tensors, no pickle). Collective over the subset group: every rank
        returns the states of all streams."""
        self._save_streams()
        states = dict(self.states)
        counts = dict(self.counts)
        shard_counts = {f"{r}@{s}": n for s, c in self.shard_counts.items() for r, n in c.items()}
        if self.group is not None:
            gathered: list[Any] = [None] * self.group_size
            torch.distributed.all_gather_object(gathered, (states, counts, shard_counts, self._unshared), group=self.group)
            states, counts, shard_total = {}, Counter(), Counter()
            for s, c, sc, _ in gathered:
                states.update(s)
                counts.update(c)
                shard_total.update(sc)
            counts, shard_counts = dict(counts), dict(shard_total)
            self._share_affected([fresh for *_, fresh in gathered])
        return {
            "version": STATE_VERSION,
            "step": self.step,
            "streams": self.spec.streams,
            "dp_rank": self.spec.dp_rank,
            "dp_world": self.spec.dp_world,
            "group_size": self.group_size,
            "share": self.share,
            "stream_states": {str(s): v for s, v in sorted(states.items())},
            "counts": counts,
            "shard_counts": shard_counts,  # "reason@shard" -> n (events)
            "affected": self.affected.to_state(),  # "reason@shard" -> the distinct sample keys
            "settings": self._settings(),
        }

    def _check_group(self, state: dict[str, Any]) -> None:
        """A position taken in turns (or by one rank alone) is one process's sequence: any group size
        continues it in turns. A gathered step is n parts of ``batch_size // n``: only the same n,
        gathering, continues it."""
        saved = (int(state["group_size"]), state.get("share", "gather"))
        mine = (self.group_size, self.share)
        if saved == mine or (_one_sequence(*saved) and _one_sequence(*mine)):
            return
        raise ValueError(f"loader state was saved by a subset group of {saved[0]} rank(s) sharing steps by "
                         f"{saved[1]!r}; this loader has {mine[0]} sharing by {mine[1]!r}: a gathered step is made "
                         "of one part per rank, so only the same group continues it (share='turns' continues "
                         "across group sizes)")

    def _settings(self) -> dict[str, Any]:
        settings = {name: getattr(self.spec, name) for name in SEQUENCE_FIELDS}
        settings["shuffled"] = bool(self.spec.shuffle_buffer and self.spec.shuffle_buffer > 1)
        settings["packed"] = self.spec.max_seq_len is not None
        if self._datasets is not None:
            settings["datasets"] = self._datasets
        return json.loads(json.dumps(settings, default=repr))  # as a checkpoint gives it back (tuples as lists)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue exactly after the step the state was taken at (any number of workers)."""
        # a newer vfm-data's state may mean another position: refused (a FormatVersionError, a ValueError)
        check_format_version(state.get("version"), where="this loader state", what="vfm-data loader state",
                             current=STATE_VERSION, package="vfm-data")
        for name, mine in (("streams", self.spec.streams), ("dp_world", self.spec.dp_world),
                           ("dp_rank", self.spec.dp_rank)):
            if state[name] != mine:
                raise ValueError(f"loader state was saved with {name}={state[name]}, this loader has {name}={mine}")
        self._check_group(state)
        saved, mine = state.get("settings"), self._settings()
        if isinstance(saved, dict):
            if "packed" not in saved and "max_seq_len" in saved:  # saved before "packed" was recorded
                saved = {**saved, "packed": saved["max_seq_len"] is not None}
            changed = [name for name in mine if name in saved and saved[name] != mine[name]]
            what = ", ".join(f"{name}={saved[name]!r} there, {mine[name]!r} here" for name in changed)
            refused = [n for n in changed if n in UNRESTORABLE]
            if "batch_size" in changed and _bucket_sizes(mine) is None:  # a bucketed blend's buckets set theirs
                refused.append("batch_size")
            if _bucket_sizes(saved) != _bucket_sizes(mine):
                refused.append("blender_options")
            if refused:
                hint = ("; a blend resumes with the same dataset folders in the same order (they may grow, move or "
                        "change weight)") if "datasets" in changed else ""
                if "blender_options" in refused and "datasets" not in changed:
                    hint = ("; the bucketed blend's saved position holds partly filled buckets of the saved batch size: "
                            "resume with the same batch_size / tokens_per_batch")
                if set(refused) <= set(BATCHING):
                    hint = ("; energon keeps each stream's position as batches of the saved batch size and packing: "
                            "resume with those (vfm train: data.micro_batch, data.packing)")
                raise ValueError(one_line(f"loader state was saved with other settings ({what}); it cannot continue "
                                          f"with {', '.join(refused)} changed{hint}"))
            if changed:
                warnings.warn(one_line(f"vfm_data: the loader state was saved with other settings ({what}): loading "
                                       "continues from its position, but not the sample sequence of an uninterrupted run"),
                              DataWarning, stacklevel=2)
        states = {int(s): v for s, v in state["stream_states"].items()}
        for value in states.values():  # refused now, naming what is wrong, not at the first batch of the run
            decode_state(value)
        affected = Affected.from_state(state.get("affected"))  # absent in states saved before it existed
        self.close()
        self.step = int(state["step"])
        # state_dict() joins the group's ranks' states and sums their counts: each rank keeps only its
        # own streams (another's, never advanced here, would overwrite its newer position) and one
        # rank the counts so far (not one copy per rank)
        self.states = {s: v for s, v in states.items() if s % self.group_size == self.group_rank}
        first = self.group_rank == 0
        self.counts = Counter(state.get("counts", {}) if first else {})
        self.shard_counts = split_counts(state.get("shard_counts", {}) if first else {})[1]
        self.affected, self._unshared = affected, []  # a set: every rank holds the group's


def default_packing_buffer(spec: LoaderSpec, batch_size: int, *, batches: int = 8, min_packs: int = 16) -> int:
    """Samples a stream packs at a time: enough for ``batches`` batches of full packs (and at least
    ``min_packs`` packs), at least 64 samples.

    Energon packs its whole buffer each round, so the round's last pack is a part-filled one: a
    buffer of few packs' worth pads a lot (64 samples of 256 tokens into 8192-token packs: 22% padding).
    The tokens per sample are estimated from the first sample of each dataset folder (their mean); a
    folder without one among its first few is counted as full packs (the loader reports its damage).
    """
    tokens = []
    try:
        folders = _folders_of(spec.path, spec.split_part)
    except Exception:  # noqa: BLE001 - metadata energon reads but vfm's blend reader does not (trusted code)
        folders = []
    for folder in folders:
        try:
            latent = first_sample(folder, max_tries=8, warn=False).latent
            grid = patch_grid(tuple(latent.shape), spec.patch_size, spec.temporal_patch)
            tokens.append(min(grid[0] * grid[1] * grid[2], spec.max_seq_len))
        except (DataError, OSError, ValueError):  # bad data: the loader skips, counts and names it
            tokens.append(spec.max_seq_len)
    per_sample = sum(tokens) / len(tokens) if tokens else spec.max_seq_len
    packs = max(min_packs, batches * batch_size)
    return int(min(MAX_PACKING_BUFFER, max(64, -(-packs * spec.max_seq_len // per_sample))))


def _folders_of(path: Any, split_part: str) -> list[Path]:
    if isinstance(path, dict):  # an in-memory metadataset: its entries are absolute paths
        entries = path["splits"][split_part]["blend"]
        return [f for e in entries for f in dataset_folders(e["path"], split_part=split_part)]
    return dataset_folders(path, split_part=split_part)


def _check_blender_datasets(blender: Any, spec: LoaderSpec) -> None:
    """The blender's own check of options against the blend's datasets (a schedule's weights per
    milestone), now rather than in every stream at the first batch."""
    check = getattr(blender, "check_datasets", None)
    if check is None:
        return
    try:
        count = len(_folders_of(spec.path, spec.split_part))
    except Exception:  # noqa: BLE001 - metadata energon reads but vfm's blend reader does not (trusted code)
        return
    check(count)


def _sample_count(folder: Path) -> int:
    """The samples energon indexed in a prepared dataset folder (``.nv-meta/.info.json`` or ``.info.yaml``)."""
    from megatron.energon.eyaml import load_yaml

    # read before the trust check (make_loader's stream count): read_regular, so a named pipe here, from a
    # folder from elsewhere, is an OSError (the default count; the check then names it), never waited on
    meta = folder / ".nv-meta"
    info = meta / ".info.json"
    if info.is_file():
        counts = json_data.loads(read_regular(info, follow_links=True))["shard_counts"]
    else:
        counts = load_yaml(read_regular(meta / ".info.yaml", follow_links=True))["shard_counts"]
    return sum(int(c) for c in counts.values())


def _one_sequence(group_size: int, share: str) -> bool:
    """Whether a loader's steps are one process's sequence of its streams (see :func:`share_mode`)."""
    return group_size == 1 or share == "turns"


def share_mode(buckets: bool, share: str = "auto") -> str:
    """How a subset group shares a step: ``"gather"`` (each rank reads ``batch_size // n`` of every
    step) or ``"turns"`` (each reads whole steps in turn); ``"auto"``: turns where the blender's
    batches are one bucket each (``buckets``: they cannot be concatenated), gather otherwise."""
    if share not in SHARE_MODES:
        raise ValueError(f"share={share!r}: accepted {', '.join(map(repr, SHARE_MODES))}")
    if buckets and share == "gather":
        raise ValueError("a bucketed blend's batches are one bucket each and cannot be gathered from parts: "
                         "use share='turns' (or 'auto')")
    return "turns" if buckets or share == "turns" else "gather"


def default_streams(path: Any, group_size: int = 1, *, split_part: str = "train", dp_world: int = 1) -> int:
    """The smallest multiple of ``group_size`` that is at least :data:`DEFAULT_STREAMS` (each rank of
    the subset group owns streams), fewer where a dataset is too small for that many readers: energon
    shares each dataset's samples among streams x data-parallel ranks, and a reader with no sample
    cannot repeat (a 3-clip smoke test trains on 3 streams). Folders whose index cannot be read keep
    the default: the loader then names what is wrong with them."""
    streams = group_size * -(-DEFAULT_STREAMS // group_size)
    try:
        fewest = min(_sample_count(f) for f in _folders_of(path, split_part)) // max(1, dp_world)
    except (DataError, OSError, ValueError, KeyError, TypeError, AttributeError):
        return streams
    if fewest >= streams:
        return streams
    return max(group_size, fewest // group_size * group_size)


def make_loader(
    path: Any,
    *,
    patch_size: int,
    batch_size: int,
    num_workers: int = 0,
    group: Any = None,
    streams: int | None = None,
    share: str = "auto",
    **options: Any,
) -> ResumableLoader:
    """Build the training loader.

    ``path``: a prepared dataset folder, an energon metadataset YAML (a blend), or a metadataset dict.
    ``batch_size``: per step (packs when packing, samples otherwise); with a subset ``group`` of n
    ranks each rank reads ``batch_size // n`` of it and the parts are gathered (``share="gather"``),
    or each step is read whole by one rank of the group in turn and broadcast (``share="turns"``: the
    sample sequence of one process, whatever n; always so for a bucketed blend, whose batches are one
    bucket each; ``"auto"`` = gather where possible). ``streams`` fixes the sample order
    (default: :func:`default_streams`, the smallest multiple of n from 4 when gathering, 4 in turns
    whatever n, fewer for a dataset with fewer samples per data-parallel rank; at most ``streams`` worker processes are used); keep
    it when resuming with another ``num_workers``.
    Other options are :class:`vfm_data.stream.LoaderSpec` fields (``max_seq_len``,
    ``packing_buffer`` (default: :func:`default_packing_buffer`), ``overlong``, ``blender``, ``blender_options``, ``seed``, ``dp_rank``, ...).
    """
    unknown = sorted(set(options) - _SPEC_OPTIONS)
    if unknown:  # else LoaderSpec's "__init__() got an unexpected keyword argument"
        raise TypeError(f"make_loader has no option {', '.join(unknown)}; accepted: "
                        f"{', '.join([*_OWN_PARAMETERS, *sorted(_SPEC_OPTIONS)])}")
    # before any of them is computed with (a ZeroDivisionError, energon's AssertionError at the first batch)
    check_loader_options({"patch_size": patch_size, "batch_size": batch_size, "num_workers": num_workers,
                          **({} if streams is None else {"streams": streams}), "share": share, **options})
    n = 1 if group is None else torch.distributed.get_world_size(group)
    if options.get("blender_options", {}) is None:  # a config's "no options"
        options["blender_options"] = {}
    blender_options = options.get("blender_options", {})
    if not isinstance(blender_options, dict):
        raise ValueError(f"blender_options={blender_options!r}: accepted a mapping of the blender's option names to "
                         "values, e.g. {'durations': [1, 4], 'batch_size': 8} (or leave it out)")
    blender = get_blender(options.get("blender", "weighted"), **blender_options)
    buckets = groups_batches(blender)
    share = share_mode(buckets, share)
    whole = share == "turns"
    if buckets and options.get("max_seq_len") is not None:  # energon would pack, then batch_group_criterion fail on a pack
        raise ValueError(f"blender {options.get('blender')!r} stacks the samples of one bucket per batch and does not pack: "
                         f"drop max_seq_len={options['max_seq_len']}, or pack with the weighted or scheduled blender")
    if batch_size % n and not whole:
        raise ValueError(f"batch_size ({batch_size}) must be divisible by the subset group size ({n})")
    if streams is None:  # in turns one process's default, whatever n: a state continues under any group size
        streams = default_streams(path, 1 if whole else n, split_part=options.get("split_part", "train"),
                                  dp_world=int(options.get("dp_world", 1)))
    spec = LoaderSpec(path=str(path) if not isinstance(path, dict) else path, patch_size=patch_size,
                      batch_size=batch_size if whole else batch_size // n, streams=streams, **options)
    _check_blender_datasets(blender, spec)
    if spec.max_seq_len is not None and spec.packing_buffer is None:  # after the spec checked the metadata
        spec.packing_buffer = default_packing_buffer(spec, batch_size)
    return ResumableLoader(spec, num_workers=num_workers, group=group, share=share)


#: make_loader's named parameters, read from its signature so that its error's list of them cannot drift
_OWN_PARAMETERS = tuple(p.name for p in inspect.signature(make_loader).parameters.values() if p.kind is not p.VAR_KEYWORD)
#: its ``**options``: the LoaderSpec fields it does not take as parameters of its own
_SPEC_OPTIONS = frozenset(f.name for f in dataclasses.fields(LoaderSpec)) - set(_OWN_PARAMETERS)
