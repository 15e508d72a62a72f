"""The training loop: parallelized model, AdamW with warm-up + cosine, gradient accumulation, EMA,
exact resume from DCP checkpoints, metrics with tokens/s and MFU.

Everything model- or data-specific arrives by injection (:class:`~vfm_parallel.trainer.parts.TrainParts`):
vfm-parallel never imports vfm-models or vfm-data; ``vfm_cli.recipe`` builds the parts from a config.
The pieces a step uses live beside it: ``optimizer`` (AdamW, gradient norm), ``streams`` (random
draws), ``health`` (non-finite steps), ``saving`` (checkpoints, export weights), ``resume``, ``mfu``,
``stopping`` (SIGTERM / Ctrl-C: stop after the step with a checkpoint), ``watching`` (held-out loss, previews).
"""

from __future__ import annotations

import contextlib
import signal
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable

import torch
import torch.distributed as dist

from vfm_parallel import checkpoint as ckpt
from vfm_parallel.preflight import checked_together
from vfm_parallel.process_group import init_distributed
from vfm_parallel.trainer import batches as batches_mod
from vfm_parallel.trainer import metrics as metrics_mod
from vfm_parallel.trainer import resume as resume_mod
from vfm_parallel.trainer.config import TrainConfig
from vfm_parallel.trainer.distributed import Coordinates, data_share_group, parallelize_model, pick_device
from vfm_parallel.trainer.ema import EMA
from vfm_parallel.trainer.health import NonFiniteGuard, NonFiniteTrainingError, TrainingWarning
from vfm_parallel.trainer.mfu import MEASURED, Throughput, device_peak_tflops, mfu
from vfm_parallel.trainer.optimizer import adamw, clip_grad_norm, is_fused
from vfm_parallel.trainer.parts import RunContext, TrainParts, TrainResult, sample_keys
from vfm_parallel.trainer.pipeline import OriginalNames, pipeline_micro_step
from vfm_parallel.trainer.run_folder import RunFolder, check_shared_run_folder, hold_run_folder, launch_rank
from vfm_parallel.trainer.saving import full_weights, in_writers_pipeline, merge_stages, save_checkpoint
from vfm_parallel.trainer.schedule import lr_at
from vfm_parallel.trainer.stopping import StopRequests, TrainingStopped
from vfm_parallel.trainer.streams import cond_dropout_generator, draws
from vfm_parallel.trainer.watching import Watching


def _autocast(cfg: TrainConfig, device: torch.device):
    dtype = cfg.precision.dtype
    if dtype == "bf16" or (dtype == "auto" and device.type == "cuda"):
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def train(
    cfg: TrainConfig,
    build: Callable[[RunContext], TrainParts],
    *,
    sinks: Iterable[Any] = (),
    parallelize: Callable[..., Any] = parallelize_model,
) -> TrainResult:
    """Run ``cfg.train.steps`` optimizer steps (continuing from a checkpoint if one is found).

    Single process under ``python``; under ``torchrun`` every rank calls this with the same config.
    The phases, in order: :meth:`_Run.set_up`, :meth:`_Run.step` for each step (flushing figures
    and saving checkpoints when due), :meth:`_Run.finish` (means, export, loss curve). Rank 0 holds
    ``train.out_dir`` for the whole run: a second run into it fails with ``FolderLockedError``.

    SIGTERM or SIGINT (from the main thread's view) stop every rank after the same step, which is
    saved as a checkpoint; then :class:`TrainingStopped` is raised (nothing is exported).
    """
    with hold_run_folder(cfg.train.out_dir) as folder, StopRequests(announce=launch_rank() == 0) as stop:
        return _train(cfg, build, sinks, parallelize, stop, folder)


def _train(cfg: TrainConfig, build: Callable[[RunContext], TrainParts], sinks: Iterable[Any],
           parallelize: Callable[..., Any], stop: StopRequests, folder: RunFolder) -> TrainResult:
    run = _Run(cfg, build, sinks, parallelize, stop, folder)
    try:
        for step in range(run.start, run.last):
            if run.step(step):
                break
        run.finish()
    except NonFiniteTrainingError as exc:  # where to go on from: the checkpoints are all of finite steps
        newest = ckpt.latest(run.root)
        raise NonFiniteTrainingError(f"{exc}. The newest checkpoint, of the last finite step saved: "
                                     f"{newest if newest is not None else 'none'}") from None
    finally:
        run.close_sinks()
    run.plot_loss_curve()
    if run.stopped_by is not None:
        saved = run.result.checkpoint if run.saved_at == run.result.final_step else None
        raise TrainingStopped(run.stopped_by, run.result.final_step, cfg.train.steps, saved, run.result,
                              ckpt.latest(run.root))
    return run.result


class _Run:
    """One training run on this rank: what :func:`train` sets up once and each step uses."""

    def __init__(self, cfg: TrainConfig, build: Callable[[RunContext], TrainParts], sinks: Iterable[Any],
                 parallelize: Callable[..., Any], stop: StopRequests, folder: RunFolder | None = None) -> None:
        self.cfg = cfg
        self.stop = stop
        self.stopped_by: int | None = None  # the signal that ended the run early, agreed by all ranks
        self.saved_at: int | None = None  # the step of the last checkpoint this run saved
        self._said_peak_low = False  # an MFU above 100% against a CPU peak measured low: said once
        self.device = pick_device()
        self.rank, self.world = init_distributed(self.device.type)
        cfg.validate(self.world)
        if folder is not None:
            folder.settle()
        check_shared_run_folder(cfg.train.out_dir)
        sizes = cfg.parallel.resolved(self.world)
        self.coords = Coordinates.of(self.rank, sizes)
        self.out_dir = Path(cfg.train.out_dir)
        self.root = self.out_dir / "checkpoints"

        torch.manual_seed(cfg.train.seed)  # the same full init on every rank: layout-independent weights
        data_group = data_share_group(self.coords) if cfg.data.subset_loading else None  # collective: not in build
        with checked_together():  # the parts read node-local files (shards, init_from): a node's failure stops all
            self.parts = build(RunContext(self.coords, self.device, cfg, data_group))
        self.pm = parallelize(self.parts.model, cfg.parallel, sizes, self.device, self.parts.seq_len)
        self.model = self.pm.model
        self.pipelined = self.pm.schedule is not None
        # What checkpoints, EMA and the export see: the model under its single-process names, so a
        # checkpoint loads in any layout and the export in one process. Under DDP that is the model
        # inside the wrapper (pm.inner: no "module." prefix); under PP the stage's blocks renumbered.
        inner = self.pm.inner
        self.named = (OriginalNames(inner, self.pm.plan.blocks, getattr(inner, "_vfm_block_offset", 0))
                      if self.pipelined else inner)
        o = cfg.optim
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = adamw(self.params, o, self.device)
        self.ema = EMA(self.named, cfg.ema.decay, warmup=cfg.ema.warmup) if cfg.ema.enabled else None
        self.start = self._resume()
        self.last = cfg.train.stop_at or cfg.train.steps
        self.result = TrainResult(start_step=self.start, final_step=self.start, model=self.named)
        self._open_sinks(sinks)
        self.stage_group, self.replicated = None, frozenset()
        if self.pipelined:
            self.stage_group = self.pm.mesh["pp"].get_group()
            self.replicated = frozenset(id(p) for n, p in self.model.named_parameters()
                                        if n.split(".")[0] in self.pm.plan.conditioning)
        chunks = cfg.noise_chunks()
        if chunks > 1 and self.parts.patch is None:
            raise ValueError(f"noise in {chunks} chunks (cp / train.noise_chunks) needs TrainParts.patch, the model's (pt, ph, pw)")
        self.batches = iter(self.parts.loader)
        self.throughput = Throughput()
        self.pending: list[tuple[int, torch.Tensor, torch.Tensor, float]] = []  # (step, [loss, tokens, holders], grad norm, lr)
        self.health = NonFiniteGuard(cfg.train.max_nonfinite_steps, self.rank, self.world, on_device=is_fused(self.optimizer))
        self.watching = Watching(cfg, self.parts, self.out_dir, self.rank, self.coords.dp_rank, self.coords.dp_size,
                                 self.device, lambda: _autocast(cfg, self.device))
        self.watched: dict[int, dict[str, float]] = {}  # step -> held-out / preview figures for its metrics row
        self.model.train()

    # --- set-up ------------------------------------------------------------------------------------

    def _resume(self) -> int:
        """The step to start from: 0, or a checkpoint's, verified whole and saved with this run's
        settings (trainer.resume), with its model, optimizer, EMA and loader state loaded."""
        path = resume_mod.choose_checkpoint(self.cfg, self.root, self._verify)  # verified whole; auto: the newest intact one
        if path is None:
            return 0
        state = ckpt.read_state(path)
        resume_mod.check_resumable(path, state, self.cfg, self.coords.sizes, self.root)
        key = resume_mod.loader_rank(state, self.coords.dp_rank, self.coords.dp_size)
        state, rank_state = ckpt.load(path, model=self.named, optimizer=self.optimizer, ema=self.ema,
                                      rank_key=key, check_files=False)  # verified by choose_checkpoint
        resume_mod.restore_loader(path, self.parts.loader, key, rank_state)
        if self.ema is not None:
            self.ema.updates = resume_mod.ema_updates(path, state)
        resume_mod.announce(path, state["step"], self.cfg)
        return state["step"]

    def _verify(self, path: Path) -> dict[str, Any]:
        """:func:`ckpt.verify`: a checkpoint inside the run folder, which every rank was shown to share
        (check_shared_run_folder), is hashed once in the job; one named elsewhere (a node-local copy?)
        once per node."""
        return ckpt.verify(path, shared=path.resolve().is_relative_to(self.out_dir.resolve()))

    def _open_sinks(self, sinks: Iterable[Any]) -> None:
        """Rank 0 logs (and measures the device's peak for MFU); other ranks neither."""
        self.sinks: list[Any] = []
        if self.rank != 0:
            return
        self.result.peak_tflops, self.result.peak_source = device_peak_tflops(self.device, self.cfg.logging.peak_tflops)
        if self.cfg.logging.loss_curve:
            metrics_mod.require_matplotlib()
        self.sinks = list(sinks) + [metrics_mod.JsonlSink(self.out_dir / "metrics.jsonl")]
        if self.cfg.logging.tensorboard:
            # a resume: the steps from start + 1 on that the run before logged are replaced
            purge = self.start + 1 if self.start else None
            self.sinks.append(metrics_mod.TensorBoardSink(self.out_dir / "tensorboard", purge))

    # --- one step ----------------------------------------------------------------------------------

    def step(self, step: int) -> bool:
        """Forward and backward over the micro-batches, clip, update, EMA; figures stay on the device.
        True when the run stops after this step (a signal on some rank), its checkpoint saved."""
        cfg, o = self.cfg, self.cfg.optim
        lr = lr_at(step, lr=o.lr, warmup_steps=o.warmup_steps, total_steps=cfg.train.steps, min_lr_ratio=o.min_lr_ratio)
        self.step_keys: list[str] = []
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        tokens, holds_loss = 0, 1.0
        for micro in range(o.grad_accum):
            loss, batch_tokens = self._micro_step(step, micro)
            holds_loss = float(loss is not None)
            if loss is not None:
                loss_sum += loss.detach()
            tokens += batch_tokens
        if self.pipelined and o.grad_accum > 1:
            for p in self.params:
                if p.grad is not None:
                    p.grad.div_(o.grad_accum)
        self.pm.sync_grads()
        grad_norm = clip_grad_norm(self.params, o.grad_clip, self.stage_group, self.replicated)
        # Loss: mean over the ranks that hold one (TP/CP ranks hold copies; under PP the last stage);
        # then the count of ranks whose loss or gradient norm is not finite, and of ranks asked to
        # stop (a signal): every rank reads the same sums, so all stop after the same step.
        local_bad = ~(torch.isfinite(loss_sum) & torch.isfinite(grad_norm.to(loss_sum.device)))
        stats = torch.stack([loss_sum / o.grad_accum, loss_sum.new_full((), float(tokens)), loss_sum.new_full((), holds_loss),
                             local_bad.to(torch.float64), loss_sum.new_full((), float(self.stop.requested))])
        if dist.is_initialized():
            dist.all_reduce(stats)
        done = step + 1
        if self.health.on_device:  # fused AdamW: the skip happens in the kernel, no host sync
            keep = self.health.gate(self.optimizer, done, stats, grad_norm, local_bad, self.step_keys)
            self.optimizer.step()
            if self.ema is not None:
                self.ema.update(self.named, keep)
        elif self.health.allows(done, stats, grad_norm, local_bad, self.step_keys):
            self.optimizer.step()
            if self.ema is not None:
                self.ema.update(self.named)
        self.optimizer.zero_grad(set_to_none=True)
        self.pending.append((done, stats[:3], grad_norm.to(stats.device, torch.float64), lr))
        watch = self.watching.due(done)
        if watch:  # every rank (collective); its time is not training time
            self.watched[done], seconds = self.watching.at(done, self.model, self.named, self.ema, self.export_weights)
            self.throughput.exclude(seconds)
        interval = cfg.checkpoint.interval
        save = (interval and done % interval == 0) or done == self.last
        due = done == self.start + 1 or save or watch or done % cfg.logging.interval == 0
        # The stop flag is read where the host syncs anyway: every step on the host-skip path, at the
        # flushes on the fused path (which avoids a sync per step).
        # A signal at the last step changes nothing: the run is complete.
        stopping = done < self.last and (due or not self.health.on_device) and stats[4].item() > 0
        if stopping:
            self.stopped_by = self.stop.signum or signal.SIGTERM.value  # the rank(s) that got it say which
            save = True
        if due or stopping:
            self.flush()
        if save:
            self._save(done)
        return stopping

    def _save(self, done: int) -> None:
        """The checkpoint of step ``done``, unless that step was skipped as non-finite and is not the
        run's last: a checkpoint in a run of non-finite steps would prune the good ones before it
        (``keep``) and be the one ``resume = "auto"`` picks, the state the run was failing from. (The
        last step is saved all the same: its weights are the last finite step's, and the run ends.)"""
        if self.health.run and done != self.last:
            if self.rank == 0:
                last = self.result.checkpoint or ckpt.latest(self.root)
                warnings.warn(f"checkpoint of step {done} not saved: step {done} was not finite (skipped); the newest "
                              f"checkpoint stays {last if last is not None else 'none'}", TrainingWarning, stacklevel=3)
            return
        self.result.checkpoint = save_checkpoint(self.cfg, self.root, done, self.named, self.optimizer, self.ema, self.parts,
                                                 self.coords)
        self.saved_at = done
        self.throughput.flush(0.0, counted=False)  # saving is not training time

    def _micro_step(self, step: int, micro: int) -> tuple[torch.Tensor | None, int]:
        """(loss or None on a non-last pipeline stage, tokens) of one micro-batch, backward done."""
        cfg, parts, device = self.cfg, self.parts, self.device
        global_micro = micro * self.coords.dp_size + self.coords.dp_rank
        batch = batches_mod.to_device(next(self.batches), device)
        self.step_keys.extend(sample_keys(batch))
        batch = batches_mod.drop_conditions(batch, parts.null_cond, cfg.train.cond_dropout,
                                            cond_dropout_generator(cfg.train.seed, step, global_micro, device))
        gen_t, gen_n, noise = draws(cfg, step, global_micro, batch, parts.patch, device)
        with _autocast(cfg, device):
            if self.pipelined:  # the schedule runs forward and backward; the loss is on the last stage
                pieces = parts.formulation.training_pieces(batch["x0"], gen_t, gen_n, noise=noise)
                loss = pipeline_micro_step(self.pm, self.params, pieces, batch["cond"])
            else:
                loss = batches_mod.micro_loss(parts.formulation, self.model, batch, gen_t, gen_n, noise)
        if not self.pipelined:
            (loss / cfg.optim.grad_accum).backward()
        return loss, parts.count_tokens(batch)

    def flush(self) -> None:
        """Bring the pending steps' figures to the host (one sync) and log the due ones; review the
        steps skipped on the device since the last flush."""
        self.health.review()
        if not self.pending:
            return
        world, result = self.world, self.result
        rows = torch.stack([torch.cat([stats, norm.reshape(1)]) for _, stats, norm, _ in self.pending]).tolist()
        global_tokens = [tokens / (world // self.coords.dp_size) for _, tokens, _, _ in rows]  # ranks that saw the same batch
        seconds = self.throughput.flush(sum(global_tokens), counted=self.pending[0][0] > self.start + 1)
        tps = sum(global_tokens) / seconds
        for (done, _, _, lr), (loss_total, _, holders, grad_norm) in zip(self.pending, rows):
            result.losses[done] = loss_total / holders  # mean over the ranks that hold a loss
            result.final_step = done
            final = done == self.last or (self.stopped_by is not None and done == self.pending[-1][0])  # a stop's step too
            watched = self.watched.pop(done, {})
            if not (done % self.cfg.logging.interval == 0 or final or watched):
                continue
            # on every rank: a loader whose ranks share the reading of a batch sums their counts (collective)
            data = getattr(self.parts.loader, "metrics", dict)()  # e.g. vfm-data's skip counts
            if self.rank == 0:
                row = {"loss": result.losses[done], "grad_norm": grad_norm, "lr": lr, "tokens_per_s": tps,
                       "tokens_per_s_per_device": tps / world, "step_time_s": seconds / len(self.pending)}
                row.update(self._mfu(tps))
                self._say_if_the_measured_peak_was_low(done, row["mfu"])
                row.update(data)
                row.update(watched)
                result.last_metrics = row
                for sink in list(self.sinks):
                    try:
                        sink.log(done, row)
                    except OSError as exc:  # a full disk, a closed pipe: the record stops, the training goes on
                        self._drop_sink(sink, done, exc)
        self.pending.clear()

    def _drop_sink(self, sink: Any, done: int, exc: OSError) -> None:
        """A sink that cannot write: one warning, and no more logging to it (a full disk stops the run
        at its next checkpoint instead, with a clear error; a closed stdout should stop nothing)."""
        self.sinks.remove(sink)
        with contextlib.suppress(OSError):
            sink.close()
        name = getattr(getattr(sink, "file", None), "name", None) or type(sink).__name__
        warnings.warn(f"step {done}: metrics could not be written to {name} ({type(exc).__name__}: {exc}); logging "
                      f"to it stopped, training goes on", TrainingWarning, stacklevel=2)

    def _say_if_the_measured_peak_was_low(self, done: int, fraction: float) -> None:
        """Once per run: an MFU above 100% against the CPU peak measured at start means that figure was
        low (other processes held the cores while it was measured), not that the step beat the hardware."""
        if fraction <= 1.0 or self.result.peak_source != MEASURED or self._said_peak_low:
            return
        self._said_peak_low = True
        warnings.warn(f"step {done}: MFU {fraction:.0%} is above 100%: the CPU peak measured at start "
                      f"({self.result.peak_tflops:.3g} TFLOP/s, {MEASURED}) was low, likely while other processes "
                      "held the cores; the MFU figures of this run read high. Accepted: logging.peak_tflops "
                      "(--peak-tflops) to give this CPU's peak", TrainingWarning, stacklevel=3)

    def _mfu(self, tokens_per_s: float) -> dict[str, float]:
        """``mfu`` by the seeds' 6N + 12LhS, and ``mfu_executed`` by the FLOPs executed (when known)."""
        peak, exec_flops = self.result.peak_tflops, self.parts.executed_flops_per_token
        out = {"mfu": mfu(self.parts.flops_per_token, tokens_per_s, self.world, peak) if peak else 0.0}
        if exec_flops:
            out["mfu_executed"] = mfu(exec_flops, tokens_per_s, self.world, peak) if peak else 0.0
        return out

    # --- the end -----------------------------------------------------------------------------------

    def finish(self) -> None:
        """The last figures, the run's mean throughput, and the inference export when the run is complete."""
        self.flush()
        result = self.result
        if self.throughput.seconds > 0:
            result.mean_tokens_per_s = self.throughput.tokens / self.throughput.seconds
            figures = self._mfu(result.mean_tokens_per_s)
            result.mean_mfu, result.mean_mfu_executed = figures["mfu"], figures.get("mfu_executed", 0.0)
        complete = self.last == self.cfg.train.steps and self.stopped_by is None
        if self.cfg.checkpoint.export and self.parts.export is not None and complete:
            weights = self.export_weights()
            if self.rank == 0:
                result.export = self.out_dir / "export"
                try:
                    self.parts.export(result.export, weights)
                except OSError as exc:  # the checkpoint is in place: the same command exports without training
                    raise ckpt.ExportSaveError(
                        f"writing the inference export {result.export} failed ({exc.strerror or exc}); the checkpoint "
                        f"of step {self.last} is complete. Free space or fix the folder's permissions, then run the "
                        "same command again: it writes the export without training") from exc

    def export_weights(self) -> dict[str, torch.Tensor]:
        """The full weights an export takes, the EMA ones when the run has EMA, as CPU tensors under their
        single-process names, on rank 0, which writes the export and the previews; an empty dict on the
        other ranks (collective: FSDP/TP gather them, each pipeline stage sends its blocks to rank 0)."""
        ema, named = self.ema, self.named
        keep = in_writers_pipeline(self.coords)  # the others take part in the gathers and hold no full copy
        weights = full_weights(ema.shadow.items() if ema is not None else named.named_parameters(), keep=keep)
        if self.pipelined and keep:  # each stage holds its blocks: rank 0 collects those of the stages of its pipeline
            weights = merge_stages(weights, self.stage_group)
        return weights

    def close_sinks(self) -> None:
        for sink in self.sinks:
            try:
                sink.close()
            except OSError as exc:  # the last lines did not reach the disk: say so, keep what the run made
                warnings.warn(f"closing {type(sink).__name__} failed ({type(exc).__name__}: {exc})", TrainingWarning,
                              stacklevel=2)

    def plot_loss_curve(self) -> None:
        metrics = self.out_dir / "metrics.jsonl"
        if self.rank == 0 and self.cfg.logging.loss_curve and metrics.exists():
            self.result.loss_curve = metrics_mod.plot_loss_curve(metrics, self.out_dir / "loss_curve.png")


