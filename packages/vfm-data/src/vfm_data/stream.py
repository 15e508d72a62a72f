"""One logical data stream: a complete energon pipeline with its own savable state.

The loader's sample order is defined by a fixed number of logical streams, not by how many worker
processes run them, which is what lets a job resume with a different number of data workers. Each
stream is energon's ``get_train_dataset`` + ``get_savable_loader`` for the energon "rank"
``dp_rank * streams + index`` of ``dp_world * streams``, run in-process (energon ``num_workers=0``).
"""

from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any

from megatron.energon import SavableDataset, WorkerConfig, get_savable_loader, get_train_dataset
from megatron.energon.wrappers import PackingDataset

from vfm_data.blend_file import check_split
from vfm_data.blenders import get_blender, groups_batches
from vfm_data.errors import ShardError, raise_sample_error
from vfm_data.loader_options import WHOLE_NUMBER_OPTIONS, check_loader_options
from vfm_data.state_codec import decode_state, encode_state
from vfm_data.task_encoder import VideoTaskEncoder
from vfm_data.trust import check_dataset

# energon's loader always asks for pinned memory; on a machine without an accelerator torch warns
# about it once per loader, which is noise (pinning is simply skipped there).
warnings.filterwarnings("ignore", message="'pin_memory' argument is set as true but no accelerator", category=UserWarning)


@dataclass
class LoaderSpec:
    """Everything that defines the sample sequence (picklable, so worker processes rebuild streams)."""

    path: Any  # dataset folder, energon metadataset YAML, or a metadataset dict
    patch_size: int
    batch_size: int  # per chunk: packs when packing, else samples
    temporal_patch: int = 1
    latent_channels: int | None = None
    max_seq_len: int | None = None
    packing_buffer: int | None = None
    overlong: str = "drop"
    shuffle_buffer: int | None = 100
    max_samples_per_sequence: int | None = 100
    split_part: str = "train"
    blender: str = "weighted"
    blender_options: dict = field(default_factory=dict)
    seed: int = 0
    streams: int = 2
    dp_rank: int = 0
    dp_world: int = 1
    # Skip vfm_data.trust's check of the dataset metadata, letting energon build what it names.
    trust_dataset_code: bool = False

    def __post_init__(self) -> None:
        check_loader_options({f.name: getattr(self, f.name) for f in fields(self)})
        for name in WHOLE_NUMBER_OPTIONS:  # numpy integers as plain ints: the state's settings are JSON
            if getattr(self, name, None) is not None:
                setattr(self, name, int(getattr(self, name)))
        # Before energon ever reads the path: its YAML can name objects to build and code to run.
        check_dataset(self.path, trust_dataset_code=self.trust_dataset_code)
        check_split(self.path, self.split_part)  # energon: a bare AssertionError or KeyError at the first batch


def _quiet_packing(dataset: Any) -> None:
    """No "Filling reading buffer" progress bar from energon's packing: one per stream, process and
    restart, drawn between the trainer's step lines (energon offers no switch for it)."""
    stack, seen = [dataset], set()
    while stack:
        ds = stack.pop()
        if id(ds) in seen:
            continue
        seen.add(id(ds))
        if isinstance(ds, PackingDataset):
            fill = ds._fill_reading_buffer
            ds._fill_reading_buffer = lambda source, log_progress=False, _fill=fill: _fill(source, log_progress=False)
        inner = vars(ds).get("datasets") or [vars(ds).get("dataset")]  # energon's wrappers keep them there
        stack += [d for d in inner if isinstance(d, SavableDataset)]


class Stream:
    """Yields ``(batch, state, (counts, fresh))``: the next batch, the JSON state *after* it, the
    bad-data counts it added (events) and the ("reason@shard", key) samples newly affected."""

    def __init__(self, spec: LoaderSpec, index: int, state: Any = None) -> None:
        self.index = index
        self.encoder = VideoTaskEncoder(
            patch_size=spec.patch_size,
            temporal_patch=spec.temporal_patch,
            latent_channels=spec.latent_channels,
            max_seq_len=spec.max_seq_len,
            overlong=spec.overlong,
            blender=get_blender(spec.blender, **spec.blender_options),
        )
        self.encoder.progress_scale = spec.streams * spec.dp_world
        worker_config = WorkerConfig(
            rank=spec.dp_rank * spec.streams + index,
            world_size=spec.dp_world * spec.streams,
            num_workers=0,
            seed_offset=spec.seed,
            # vfm's cooker skips and counts bad data itself; anything else stops with one line
            # (energon's default prints a traceback and the sample, up to 100 times in a row)
            global_error_handler=raise_sample_error,
        )
        bucketed = groups_batches(self.encoder.blender)
        dataset = get_train_dataset(
            spec.path,
            split_part=spec.split_part,
            worker_config=worker_config,
            batch_size=None if bucketed else spec.batch_size,  # buckets set their own batch size
            packing_buffer_size=spec.packing_buffer,
            shuffle_buffer_size=spec.shuffle_buffer,
            max_samples_per_sequence=spec.max_samples_per_sequence,
            task_encoder=self.encoder,
        )
        if len(dataset) == 0:  # energon would fail at the first batch with "Cannot repeat empty dataset"
            readers = spec.streams * spec.dp_world
            raise ShardError(
                f"vfm_data: loader stream {index} of data-parallel rank {spec.dp_rank} gets no sample of "
                f"{spec.path if not isinstance(spec.path, dict) else 'the in-memory blend'} (split {spec.split_part!r}): "
                f"energon shares the samples among {readers} readers (streams {spec.streams} x data-parallel ranks "
                f"{spec.dp_world}) and this dataset has fewer; accepted: at least {readers} samples, or fewer "
                f"streams (make_loader(streams=...))")
        _quiet_packing(dataset)
        self.loader = get_savable_loader(dataset, watchdog_timeout_seconds=None)
        if state is not None:
            self.loader.restore_state_rank(decode_state(state))
        self._iter = None
        self._reported: Counter[str] = Counter()

    def next(self, *, with_state: bool = True) -> tuple[Any, Any, tuple[dict[str, int], list[tuple[str, str]]]]:
        """``with_state=False``: the state is ``None``; :meth:`state` gives it later, as long as this
        stream is not advanced (in-process streams: a state per batch cost ~20% of the loading)."""
        if self._iter is None:
            self._iter = iter(self.loader)
        batch = next(self._iter)
        state = encode_state(self.loader.save_state_rank()) if with_state else None
        delta = self.encoder.counts - self._reported
        self._reported = Counter(self.encoder.counts)
        return batch, state, (dict(delta), self.encoder.skips.take_fresh())

    def state(self) -> Any:
        """The JSON state after the last batch :meth:`next` gave."""
        return encode_state(self.loader.save_state_rank())
