"""Resuming a run: which checkpoint (the newest intact one), whether it was saved by a run with the
same settings, and the data loader's position.

A resume continues the saved run's sample sequence exactly, so the settings that decide that
sequence must match (``checkpoint.allow_changes`` names the groups the user changes on purpose):

- ``model``: the model section and ``ema.enabled`` (names, shapes and dtypes are checked anyway);
- ``seed``: ``train.seed``;
- ``batch``: ``data.micro_batch``, ``data.max_seq_len``, ``data.packing`` and the global
  micro-batches per step (``optim.grad_accum`` x data-parallel degree);
- ``data``: the data source and shards, ``train.cond_dropout``, and the noise chunks
  (``train.noise_chunks``, else ``parallel.cp``: the noise is drawn per chunk);
- ``layout``: the data-parallel degree, because each DP rank's loader position is saved on its own.

Everything else may change: tp, cp (with the same noise chunks), pp and the split of DP into
dp_replicate x dp_shard (DCP reshards every tensor), the optimizer's lr and schedule, train.steps,
logging, checkpoint interval and keep. A resume names them when they changed (``changed since
checkpoint step_N: optim.lr 0.002 -> 0.001; ...``), so a changed schedule is never silent.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import torch.distributed as dist
from vfm_plugins.formats import FormatVersionError

from vfm_parallel import checkpoint as ckpt
from vfm_parallel.checkpoint_integrity import CheckpointFormatError, folder_step
from vfm_parallel.trainer.config import TrainConfig

_DP_DEGREE = "data-parallel degree (parallel.dp_replicate x dp_shard)"


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def _say(line: str, err: bool = False) -> None:
    if _rank() == 0:
        print(line, file=sys.stderr if err else sys.stdout, flush=True)


def choose_checkpoint(cfg: TrainConfig, root: Path, check: Callable[[Path], Any] = ckpt.verify) -> Path | None:
    """The checkpoint to resume from, verified whole (collective), or None to start at step 0.

    ``resume = "auto"`` takes the newest intact checkpoint under ``root``, warning about each newer
    damaged one; if every one is damaged that is an error, not a fresh start. A checkpoint named
    explicitly must be whole. ``check`` is what "intact" means: :func:`ckpt.verify` (the files
    against the manifest) for the run, :func:`ckpt.read_state` for ``vfm train --validate``, which
    does not hash the files but picks as the run picks.
    """
    resume = cfg.checkpoint.resume
    if resume == "none":
        return None
    if resume != "auto":  # the newer ones of its run are refused by check_resumable
        check(Path(resume))
        return Path(resume)
    damaged: list[ckpt.DamagedCheckpointError] = []
    for path in reversed(ckpt.list_checkpoints(root)):
        try:
            check(path)
        except ckpt.DamagedCheckpointError as exc:
            damaged.append(exc)
            continue
        for exc in damaged:
            _say(f"warning: {exc}; using {path.name}, the newest intact checkpoint", err=True)
        return path
    if damaged:
        raise ckpt.DamagedCheckpointError(f"every checkpoint under {root} is damaged (the newest: {damaged[0]}); "
                                          'set checkpoint.resume = "none" to start over')
    return None


def check_resumable(path: Path, state: dict[str, Any], cfg: TrainConfig, sizes: dict[str, int], root: Path) -> None:
    """Every check of a resume from ``path`` (whose ``state`` is read) but its files' hashes: a
    checkpoint named in ``resume`` while ``root`` holds newer ones, the settings, the step, the EMA's
    count (``ema_updates``). The run and ``vfm train --validate`` both call it, so the one refuses what
    the other does."""
    if cfg.checkpoint.resume != "auto":
        _refuse_newer_in_run(path, state["step"], root)
    check_settings(path, state, cfg, sizes)
    check_step(path, state["step"], cfg)
    if cfg.ema.enabled:
        ema_updates(path, state)


def _refuse_newer_in_run(chosen: Path, step: int, root: Path) -> None:
    """A checkpoint named in ``resume`` while this run's folder holds newer ones: a rollback (they are
    the abandoned run, which ``auto`` would take after any restart, silently undoing it) or a requeued
    job whose command still names its first checkpoint (it would go back and redo its steps). Either
    way the user decides, by moving them away or resuming with ``auto``."""
    newer = [p for p in ckpt.list_checkpoints(root) if (folder_step(p) or 0) > step and p.resolve() != chosen.resolve()]
    if not newer:
        return
    names = ", ".join(p.name for p in newer)
    raise ckpt.IncompatibleCheckpointError(
        f"checkpoint.resume names {chosen} (step {step}), but {root} holds newer checkpoints: {names}. To go on from "
        f'the newest: checkpoint.resume = "auto". To roll back to step {step}: move them out of {root} first (they '
        f'are not deleted for you); left there, "auto" would take them again after any restart')


_NOISE_CHUNKS = "noise chunks (train.noise_chunks, else parallel.cp)"


def settings(config: dict[str, Any], sizes: dict[str, int]) -> dict[str, dict[str, Any]]:
    """What a resume compares, by ``checkpoint.allow_changes`` group, from a config dict and mesh sizes."""
    m, d, o, t, p = (config.get(k, {}) for k in ("model", "data", "optim", "train", "parallel"))
    dp = sizes.get("dp_replicate", 1) * sizes.get("dp_shard", 1)
    data = {f"data.{k}": d.get(k) for k in ("source", "blend", "shards", "durations")}
    if d.get("source") == "synthetic":  # these describe the synthetic samples only
        data.update({f"data.{k}": d.get(k) for k in ("latent_shape", "num_samples", "num_classes")})
    data["train.cond_dropout"] = t.get("cond_dropout")
    data[_NOISE_CHUNKS] = t.get("noise_chunks") or p.get("cp", 1)
    return {
        "model": {**{f"model.{k}": v for k, v in m.items()}, "ema.enabled": config.get("ema", {}).get("enabled")},
        "seed": {"train.seed": t.get("seed")},
        "batch": {"data.micro_batch": d.get("micro_batch"), "data.max_seq_len": d.get("max_seq_len"),
                  "data.packing": d.get("packing"),
                  "global micro-batches per step (optim.grad_accum x data-parallel degree)": o.get("grad_accum", 1) * dp},
        "data": data,
        "layout": {_DP_DEGREE: dp},
    }


def _noise_chunks_fix(saved_chunks: int, cp: int) -> str:
    """How a resume keeps the saved run's noise chunks when only they changed (a new cp). Under
    cp > 1 the noise is drawn in cp chunks (train.noise_chunks is 0 or cp), so another cp can only
    continue a run whose chunks it can draw: cp = 1, or cp = the saved chunks."""
    keep = f"train.noise_chunks = {saved_chunks}"
    if cp == 1 or cp == saved_chunks:
        return f"To continue it exactly under this layout: {keep} (its noise stays the saved run's). "
    layouts = "parallel.cp = 1" + (f" or {saved_chunks}" if saved_chunks > 1 else "")
    return (f"To continue it exactly: {layouts} and {keep} (under cp = {cp} the noise is drawn in {cp} chunks, "
            f"one per CP rank). ")


def check_settings(path: Path, state: dict[str, Any], cfg: TrainConfig, sizes: dict[str, int]) -> None:
    """Refuse a checkpoint saved with other settings than this run's, except the allowed groups;
    say when the layout changed in ways that are free (DCP reshards)."""
    saved_config = state.get("config") or {}
    saved = settings(saved_config, state.get("sizes") or {})
    now = settings(cfg.to_dict(), sizes)
    _refuse_shard_positions_under_another_dp(path, saved["layout"][_DP_DEGREE], now["layout"][_DP_DEGREE], cfg, sizes)
    allowed = set(cfg.checkpoint.allow_changes)
    changes = [(group, key, old, new) for group in now for k, value in now[group].items()
               for key, old, new in _differences(k, saved[group].get(k), value) if group not in allowed]
    if changes:
        listed = "; ".join(f'{key} {_shown(old)} -> {_shown(new)} ("{group}")' for group, key, old, new in changes)
        groups = ", ".join(f'"{g}"' for g in dict.fromkeys(g for g, *_ in changes))
        chunks = [old for group, key, old, _ in changes if key == _NOISE_CHUNKS]
        fix = _noise_chunks_fix(chunks[0], sizes.get("cp", 1)) if chunks and len(changes) == 1 else ""
        raise ckpt.IncompatibleCheckpointError(
            f"checkpoint {path} was saved by a run with other settings: {listed}; {_why(changes)}. {fix}"
            f"To resume anyway: checkpoint.allow_changes = [{groups}]")
    before, after = state.get("sizes"), {k: sizes[k] for k in sizes}
    if before and before != after:
        _say(f"layout {_mesh(before)} -> {_mesh(after)}: the checkpoint's tensors are resharded")
    changed = [f"{key} {_shown(old)} -> {_shown(new)}" for key, old, new in _differences("", saved_config, cfg.to_dict())
               if saved_config and not key.startswith(_NOT_NAMED)]
    if changed:
        _say(f"changed since checkpoint {path.name}: {'; '.join(changed)}")


def _refuse_shard_positions_under_another_dp(path: Path, saved_dp: int, dp: int, cfg: TrainConfig,
                                             sizes: dict[str, int]) -> None:
    """vfm-data's shard loader saves one position per DP rank and continues only under the same DP
    degree (its load refuses another), so ``allow_changes = ["layout"]``, which suits the synthetic
    loader's global position, cannot help: say so here, before the refusal offers it, and name the
    layouts that do continue the run (the other processes go to tp, cp or pp, which are free)."""
    if cfg.data.source != "shards" or saved_dp == dp:
        return
    world = 1
    for size in sizes.values():
        world *= size
    if world % saved_dp == 0 and world > saved_dp:
        keep = (f"keep {_DP_DEGREE} = {saved_dp} and give the other processes to parallel.tp, cp or pp (for {world} "
                f"processes: --set parallel.dp_shard={saved_dp} --set parallel.tp={world // saved_dp}, if the heads divide)")
    else:
        keep = f"run it on a multiple of {saved_dp} processes with {_DP_DEGREE} = {saved_dp} (the rest to tp, cp or pp)"
    raise ckpt.IncompatibleCheckpointError(
        f"checkpoint {path} was saved under {_DP_DEGREE} {saved_dp}, this run has {dp}: the shard loader keeps one data "
        f"position per data-parallel rank and cannot continue them under another degree (checkpoint.allow_changes "
        f"does not change that). To continue the run: {keep}")


#: Settings a resume does not name when they change: where the run lives and logs, and how it
#: started (the layout has its own line).
_NOT_NAMED = ("train.out_dir", "train.stop_at", "checkpoint.resume", "checkpoint.allow_changes", "logging.", "parallel.",
              "model.init_from", "data.trust_dataset_code", "data.workers", "data.subset_loading")


def _shown(value: Any) -> str:
    return "unset" if value is None else repr(value)


def _why(changes: list[tuple[str, str, Any, Any]]) -> str:
    """What resuming across these changes would break: the model, the sample sequence, or both."""
    groups = {group for group, *_ in changes}
    reasons = []
    if "model" in groups:
        reasons.append("the model is not the one saved (its tensors may not even fit)")
    if groups - {"model"}:
        reasons.append("resuming would not continue its sample sequence and random draws")
    return "; ".join(reasons)


def _differences(key: str, old: Any, new: Any) -> list[tuple[str, Any, Any]]:
    """(key, old, new) for each setting that differs; tables are compared key by key
    (``model.options.hidden 32 -> 64``, not the two whole tables)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for k in dict.fromkeys([*old, *new])
                for d in _differences(f"{key}.{k}" if key else k, old.get(k), new.get(k))]
    return [] if old == new else [(key, old, new)]


def _mesh(sizes: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in sizes.items())


def loader_rank(state: dict[str, Any], dp_rank: int, dp_size: int) -> int:
    """Whose loader position this DP rank continues: its own, or (the DP degree changed, which
    ``allow_changes = ["layout"]`` permits) DP rank 0's, for loaders whose position is global."""
    sizes = state.get("sizes") or {}
    saved_dp = sizes.get("dp_replicate", 1) * sizes.get("dp_shard", 1)
    return dp_rank if saved_dp == dp_size else 0


def restore_loader(path: Path, loader: Any, key: int, rank_state: dict[str, Any] | None) -> None:
    """Give the loader its saved position; a missing or unfitting one is an error, never sample 0."""
    name = f"ranks/rank_{key:05d}.json"
    if not isinstance(rank_state, dict) or not isinstance(rank_state.get("loader"), dict):
        what = "missing" if rank_state is None else "not a loader state"
        raise ckpt.DamagedCheckpointError(f"checkpoint {path}: {name} is {what}: it holds the loader position of "
                                          f"data-parallel rank {key}, without which the data would restart at sample 0")
    try:
        loader.load_state_dict(rank_state["loader"])
    except FormatVersionError as exc:  # the run fits; this vfm-data cannot read the state (a newer one wrote it)
        raise CheckpointFormatError(f"checkpoint {path}, {name}: {exc}") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise ckpt.IncompatibleCheckpointError(f"checkpoint {path}: the loader state in {name} does not fit this "
                                               f"run's loader ({exc})") from exc


def ema_updates(path: Path, state: dict[str, Any]) -> int:
    """The EMA's count of updates applied (its warm-up's t) saved in ``state``. A checkpoint saved
    before vfm kept the count resumes with its step: exact unless that run skipped a non-finite step,
    which puts the warm-up's decay that many updates ahead (a difference below 1e-3 in the decay past
    update 100, and none once the decay reaches ema.decay)."""
    step, count = state["step"], state.get("ema_updates", state["step"])
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= step:
        raise ckpt.DamagedCheckpointError(f"checkpoint {path} is damaged: state.json has ema_updates {count!r}; "
                                          f"expected a whole number from 0 to its step {step}")
    return count


def check_step(path: Path, step: int, cfg: TrainConfig) -> None:
    if step > cfg.train.steps:
        raise ckpt.IncompatibleCheckpointError(f"checkpoint {path} is at step {step}, past train.steps = "
                                               f"{cfg.train.steps}; raise train.steps to continue it")


def announce(path: Path, step: int, cfg: TrainConfig | None = None) -> None:
    _say(f"resuming from step {step} ({path})")
    if cfg is None:
        return
    last = cfg.train.stop_at or cfg.train.steps
    if step >= last:  # a finished run's folder, run again (often meant as a new run): say so, train nothing
        until = f"train.stop_at = {cfg.train.stop_at}" if cfg.train.stop_at else f"train.steps = {cfg.train.steps}"
        _say(f"nothing to train: the checkpoint is at step {step} and the run ends at {until}; raise "
             f"train.steps to continue it, or give a new run its own train.out_dir", err=True)
