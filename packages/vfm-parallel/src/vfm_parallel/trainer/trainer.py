"""The training loop: parallelized model, AdamW with warm-up + cosine, gradient accumulation, EMA,
exact resume from DCP checkpoints, metrics with tokens/s and MFU.

Everything model- or data-specific arrives by injection (:class:`TrainParts`): vfm-parallel never
imports vfm-models or vfm-data; ``vfm_cli.compose`` builds the parts from a config.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

import torch
import torch.distributed as dist
from torch import nn

from vfm_parallel import checkpoint as ckpt
from vfm_parallel.trainer import batches as batches_mod
from vfm_parallel.trainer import metrics as metrics_mod
from vfm_parallel.trainer.config import TrainConfig
from vfm_parallel.process_group import init_distributed
from vfm_parallel.trainer.distributed import Coordinates, parallelize_model, pick_device
from vfm_parallel.trainer.ema import EMA, clean_fqn
from vfm_parallel.trainer.mfu import device_peak_tflops, mfu
from vfm_parallel.trainer.pipeline import OriginalNames, pipeline_micro_step
from vfm_parallel.trainer import resume as resume_mod
from vfm_parallel.trainer.run_folder import hold_run_folder
from vfm_parallel.trainer.schedule import lr_at
from vfm_parallel.trainer.streams import cond_dropout_generator, micro_batch_generators, noise_generators, sharded_noise


class Formulation(Protocol):
    # ``noise``: an explicit noise tensor instead of noise_generator (chunked noise under CP)
    def loss(self, model: nn.Module, x0: torch.Tensor, cond: dict, generator: torch.Generator,
             noise_generator: torch.Generator | None = None, *, noise: torch.Tensor | None = None) -> torch.Tensor: ...

    # packed micro-batches only (docs/contracts.md section 2)
    def loss_packed(self, model: nn.Module, x0s: list, cond: dict, generator: torch.Generator, noise_generator: torch.Generator | None = None) -> torch.Tensor: ...


class ResumableLoader(Protocol):
    def __iter__(self): ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class NonFiniteTrainingError(RuntimeError):
    """``train.max_nonfinite_steps`` steps in a row had a non-finite loss or gradient norm."""


def _sample_keys(batch: dict[str, Any]) -> list[str]:
    """The sample keys a micro-batch carries (``keys``, as vfm-data names them), else none."""
    keys = batch.get("keys", batch.get("__key__"))
    return [str(k) for k in keys] if isinstance(keys, (list, tuple)) else []


def _count_samples(batch: dict[str, Any]) -> int:
    """The default count when the parts give none: ``num_tokens`` if the batch has it, else samples."""
    if "num_tokens" in batch:
        return int(batch["num_tokens"])
    return len(batch["x0s"]) if "x0s" in batch else batch["x0"].shape[0]


@dataclass
class TrainParts:
    """What the trainer is given: built on every rank after seeding, before parallelization."""

    model: nn.Module  # the whole model, identically initialised on every rank
    formulation: Formulation
    loader: ResumableLoader  # micro-batches of this DP rank, dense or packed (see trainer.batches)
    flops_per_token: float  # training FLOPs (fwd + bwd) per token by the seeds' convention, 6 N + 12 L h S
    #: the matmul FLOPs (fwd + bwd) per token the step really executes (vfm_models.flops.flops_per_token):
    #: adaLN and embedder linears once per sample, text keys/values once per text token
    executed_flops_per_token: float | None = None
    count_tokens: Callable[[dict[str, Any]], int] = _count_samples  # tokens in one micro-batch
    seq_len: int | None = None  # tokens per sample, for the layout check (tokens % cp)
    patch: tuple[int, int, int] | None = None  # (pt, ph, pw): needed to draw the noise per CP shard
    export: Callable[[Path, dict[str, torch.Tensor]], None] | None = None  # (folder, full weights)
    null_cond: batches_mod.NullCond | None = None  # condition dropout's substitute (None: unconditional)


@dataclass(frozen=True)
class RunContext:
    """Handed to the parts builder: where this rank sits and what it runs on."""

    coords: Coordinates
    device: torch.device
    config: TrainConfig


@dataclass
class TrainResult:
    losses: dict[int, float] = field(default_factory=dict)  # step -> loss (all steps run in this call)
    last_metrics: dict[str, float] = field(default_factory=dict)
    mean_tokens_per_s: float = 0.0
    mean_mfu: float = 0.0  # the seeds' convention (6 N + 12 L h S), comparable with published tables
    mean_mfu_executed: float = 0.0  # the FLOPs the device really executed
    peak_tflops: float = 0.0
    peak_source: str = ""
    start_step: int = 0
    final_step: int = 0
    checkpoint: Path | None = None
    export: Path | None = None
    loss_curve: Path | None = None
    model: nn.Module | None = None


def full_weights(named: Iterable[tuple[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Unsharded CPU copies (collective under FSDP/TP: every rank must call it)."""
    out = {}
    for name, t in named:
        t = t.full_tensor() if hasattr(t, "full_tensor") else t
        out[clean_fqn(name)] = t.detach().to("cpu", copy=True)
    return out


def _resolve_resume(cfg: TrainConfig, root: Path) -> Path | None:
    """The checkpoint to resume from, verified whole (``resume = "auto"``: the newest intact one)."""
    return resume_mod.choose_checkpoint(cfg, root)


def _autocast(cfg: TrainConfig, device: torch.device):
    dtype = cfg.precision.dtype
    if dtype == "bf16" or (dtype == "auto" and device.type == "cuda"):
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _grad_norm(params: list[torch.Tensor], clip: float, stage_group: Any = None, replicated: frozenset = frozenset()) -> torch.Tensor:
    """Global L2 norm of all gradients (a device tensor: no host sync), then clip to ``clip``
    (0 = no clipping) as torch does.

    Under TP some parameters are DTensors (sharded) and others plain tensors (replicated, their
    gradients already reduced by ``sync_grads``); torch's clip_grad_norm_ cannot mix them, so the
    norm is taken per device mesh and combined. Under PP (``stage_group``) each stage holds its own
    parameters, whose squared norms are summed over the stages, and copies of the conditioning
    embedders (ids in ``replicated``), counted once.
    """
    groups: dict[Any, list[torch.Tensor]] = {}
    for p in params:
        if p.grad is not None:
            groups.setdefault((getattr(p.grad, "device_mesh", None), id(p) in replicated), []).append(p.grad)
    device = params[0].device if params else torch.device("cpu")
    local = torch.zeros((), dtype=torch.float64, device=device)  # this stage's own squared norm
    shared = torch.zeros((), dtype=torch.float64, device=device)  # the replicated embedders'
    for (_, is_replicated), grads in groups.items():
        norm = torch.nn.utils.get_total_norm(grads, 2.0, foreach=True)
        norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
        square = norm.to(device, torch.float64) ** 2
        if is_replicated:
            shared = shared + square
        else:
            local = local + square
    if stage_group is not None:
        dist.all_reduce(local, group=stage_group)
    total = (local + shared).sqrt()
    if clip > 0:
        coef = (clip / (total + 1e-6)).clamp(max=1.0)  # x * 1.0 == x: unclipped gradients stay bitwise
        for grads in groups.values():
            if hasattr(grads[0], "device_mesh"):  # DTensor gradients take a Python scalar (TP runs only)
                scale = float(coef)
                for g in grads:
                    g.mul_(scale)
            else:
                torch._foreach_mul_(grads, coef.to(grads[0].dtype))
    return total


def _draws(cfg: TrainConfig, step: int, global_micro: int, batch: dict[str, Any], patch, device: torch.device):
    """(timestep generator, noise generator or None, noise tensor or None) of one micro-batch.

    With one noise chunk the formulation draws the noise from the stream at cp = 0. With cp
    chunks every CP rank assembles the same full noise, chunk j from the stream at cp = j, so the
    model's input agrees on all CP ranks (CP shards only after ``model.embed``) while each rank's
    shard of the sequence has noise from its own CP stream (seed table 3).
    """
    chunks = cfg.noise_chunks()
    gen_t, gen_n = micro_batch_generators(cfg.train.seed, step, global_micro, 0, device)
    if chunks == 1:
        return gen_t, gen_n, None
    gens = noise_generators(cfg.train.seed, step, global_micro, chunks, device)
    return gen_t, None, sharded_noise(batch["x0"].shape, patch, gens, device)


class _Throughput:
    """Tokens/s over the steps after the first (which pays for warm-up and compilation).

    Step results stay on the device until a flush (a logged step, a checkpoint, the end), so the
    host queues step after step without waiting for the device; each flush times the steps since
    the last one together.
    """

    def __init__(self) -> None:
        self.tokens = 0.0
        self.seconds = 0.0
        self.mark = time.perf_counter()

    def flush(self, tokens: float, counted: bool) -> float:
        """Seconds since the last flush (the device is idle now); counted unless ``counted`` is False."""
        now = time.perf_counter()
        seconds, self.mark = now - self.mark, now
        if counted:
            self.tokens += tokens
            self.seconds += seconds
        return seconds


def _fused_adamw(params: list[torch.Tensor], device: torch.device) -> bool:
    """torch's fused AdamW kernel: on CUDA for plain (non-DTensor) parameters."""
    return device.type == "cuda" and not any(hasattr(p, "device_mesh") for p in params)


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
    """
    with hold_run_folder(cfg.train.out_dir):
        return _train(cfg, build, sinks, parallelize)


def _train(cfg: TrainConfig, build: Callable[[RunContext], TrainParts], sinks: Iterable[Any],
           parallelize: Callable[..., Any]) -> TrainResult:
    run = _Run(cfg, build, sinks, parallelize)
    try:
        for step in range(run.start, run.last):
            run.step(step)
        run.finish()
    finally:
        run.close_sinks()
    run.plot_loss_curve()
    return run.result


class _Run:
    """One training run on this rank: what :func:`train` sets up once and each step uses."""

    def __init__(self, cfg: TrainConfig, build: Callable[[RunContext], TrainParts], sinks: Iterable[Any],
                 parallelize: Callable[..., Any]) -> None:
        self.cfg = cfg
        self.device = pick_device()
        self.rank, self.world = init_distributed(self.device.type)
        cfg.validate(self.world)
        sizes = cfg.parallel.resolved(self.world)
        self.coords = Coordinates.of(self.rank, sizes)
        self.out_dir = Path(cfg.train.out_dir)
        self.root = self.out_dir / "checkpoints"

        torch.manual_seed(cfg.train.seed)  # the same full init on every rank: layout-independent weights
        self.parts = build(RunContext(self.coords, self.device, cfg))
        self.pm = parallelize(self.parts.model, cfg.parallel, sizes, self.device, self.parts.seq_len)
        self.model = self.pm.model
        self.pipelined = self.pm.schedule is not None
        # What checkpoints, EMA and the export see: under PP the stage under single-process names.
        self.named = (OriginalNames(self.model, self.pm.plan.blocks, getattr(self.model, "_vfm_block_offset", 0))
                      if self.pipelined else self.model)
        o = cfg.optim
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=o.lr, betas=tuple(o.betas), eps=o.eps,
                                           weight_decay=o.weight_decay,
                                           fused=_fused_adamw(self.params, self.device) or None)
        self.ema = EMA(self.named, cfg.ema.decay) if cfg.ema.enabled else None
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
        self.throughput = _Throughput()
        self.pending: list[tuple[int, torch.Tensor, torch.Tensor, float]] = []  # (step, [loss, tokens, holders], grad norm, lr)
        self.nonfinite_run: list[int] = []  # the steps skipped in a row for a non-finite loss or gradient norm
        self.model.train()

    # --- set-up ------------------------------------------------------------------------------------

    def _resume(self) -> int:
        """The step to start from: 0, or a checkpoint's, verified whole and saved with this run's
        settings (trainer.resume), with its model, optimizer, EMA and loader state loaded."""
        path = _resolve_resume(self.cfg, self.root)
        if path is None:
            return 0
        state = ckpt.read_state(path)
        resume_mod.check_settings(path, state, self.cfg, self.coords.sizes)
        resume_mod.check_step(path, state["step"], self.cfg)
        key = resume_mod.loader_rank(state, self.coords.dp_rank, self.coords.dp_size)
        state, rank_state = ckpt.load(path, model=self.named, optimizer=self.optimizer, ema=self.ema,
                                      rank_key=key, check_files=False)  # verified by _resolve_resume
        resume_mod.restore_loader(path, self.parts.loader, key, rank_state)
        resume_mod.announce(path, state["step"])
        return state["step"]

    def _open_sinks(self, sinks: Iterable[Any]) -> None:
        """Rank 0 logs (and measures the device's peak for MFU); other ranks neither."""
        self.sinks: list[Any] = []
        if self.rank != 0:
            return
        self.result.peak_tflops, self.result.peak_source = device_peak_tflops(self.device, self.cfg.logging.peak_tflops)
        self.sinks = list(sinks) + [metrics_mod.JsonlSink(self.out_dir / "metrics.jsonl")]
        if self.cfg.logging.tensorboard:
            self.sinks.append(metrics_mod.TensorBoardSink(self.out_dir / "tensorboard"))

    # --- one step ----------------------------------------------------------------------------------

    def step(self, step: int) -> None:
        """Forward and backward over the micro-batches, clip, update, EMA; figures stay on the device."""
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
        grad_norm = _grad_norm(self.params, o.grad_clip, self.stage_group, self.replicated)
        # Loss: mean over the ranks that hold one (TP/CP ranks hold copies; under PP the last stage);
        # the last entry counts the ranks whose loss or gradient norm is not finite.
        local_bad = ~(torch.isfinite(loss_sum) & torch.isfinite(grad_norm.to(loss_sum.device)))
        stats = torch.stack([loss_sum / o.grad_accum, loss_sum.new_full((), float(tokens)), loss_sum.new_full((), holds_loss),
                             local_bad.to(torch.float64)])
        if dist.is_initialized():
            dist.all_reduce(stats)
        done = step + 1
        if self._finite(done, stats, grad_norm, local_bad):
            self.optimizer.step()
            if self.ema is not None:
                self.ema.update(self.named)
        self.optimizer.zero_grad(set_to_none=True)
        self.pending.append((done, stats[:3], grad_norm.to(stats.device, torch.float64), lr))
        interval = cfg.checkpoint.interval
        save = (interval and done % interval == 0) or done == self.last
        if done == self.start + 1 or save or done % cfg.logging.interval == 0:
            self.flush()
        if save:
            self.result.checkpoint = _save(cfg, self.root, done, self.named, self.optimizer, self.ema, self.parts, self.coords)
            self.throughput.flush(0.0, counted=False)  # saving is not training time

    def _finite(self, done: int, stats: torch.Tensor, grad_norm: torch.Tensor, local_bad: torch.Tensor) -> bool:
        """Whether step ``done`` may update the weights: no rank saw a non-finite loss or gradient
        norm (``stats[3]``, summed over all ranks, so every rank decides alike).

        The one host sync per step: the update depends on it. Otherwise the step is skipped (no
        optimizer step, so AdamW's moments, step count and weight decay are untouched; no EMA
        update) with a warning, and ``train.max_nonfinite_steps`` such steps in a row raise
        :class:`NonFiniteTrainingError` naming the steps and the samples."""
        if stats[3].item() == 0:
            self.nonfinite_run = []
            return True
        self.nonfinite_run.append(done)
        samples = self._nonfinite_samples(local_bad)
        limit = self.cfg.train.max_nonfinite_steps
        loss = (stats[0] / stats[2].clamp(min=1)).item()
        what = f"loss {loss:g}, gradient norm {grad_norm.item():g}; samples: {samples}"
        if len(self.nonfinite_run) >= limit:
            steps = self.nonfinite_run
            label = f"step {steps[0]}" if len(steps) == 1 else f"steps {', '.join(map(str, steps))}"
            raise NonFiniteTrainingError(
                f"{label} had a non-finite loss or gradient norm (last: {what}); stopped after "
                f"train.max_nonfinite_steps = {limit} in a row, without updating the weights on them or exporting")
        if self.rank == 0:
            warnings.warn(f"step {done} skipped: non-finite {what} ({len(self.nonfinite_run)} in a row of "
                          f"train.max_nonfinite_steps = {limit}); weights, optimizer state and EMA unchanged",
                          RuntimeWarning, stacklevel=2)
        return False

    def _nonfinite_samples(self, local_bad: torch.Tensor) -> str:
        """The keys of the samples of this step on the ranks whose own loss or norm was not finite
        (a collective, run only on a skipped step, which every rank takes together)."""
        mine = (self.rank, bool(local_bad), self.step_keys)
        everyone = [mine]
        if dist.is_initialized():
            everyone = [None] * self.world
            dist.all_gather_object(everyone, mine)
        bad = [r for r in everyone if r[1]] or everyone
        named = [f"rank {rank}: {', '.join(keys)}" for rank, _, keys in bad if keys]
        return "; ".join(named) if named else "the batches carry no sample keys"

    def _micro_step(self, step: int, micro: int) -> tuple[torch.Tensor | None, int]:
        """(loss or None on a non-last pipeline stage, tokens) of one micro-batch, backward done."""
        cfg, parts, device = self.cfg, self.parts, self.device
        global_micro = micro * self.coords.dp_size + self.coords.dp_rank
        batch = batches_mod.to_device(next(self.batches), device)
        self.step_keys.extend(_sample_keys(batch))
        batch = batches_mod.drop_conditions(batch, parts.null_cond, cfg.train.cond_dropout,
                                            cond_dropout_generator(cfg.train.seed, step, global_micro, device))
        gen_t, gen_n, noise = _draws(cfg, step, global_micro, batch, parts.patch, device)
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
        """Bring the pending steps' figures to the host (one sync) and log the due ones."""
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
            if self.rank == 0 and (done % self.cfg.logging.interval == 0 or done == self.last):
                row = {"loss": result.losses[done], "grad_norm": grad_norm, "lr": lr, "tokens_per_s": tps,
                       "tokens_per_s_per_device": tps / world, "step_time_s": seconds / len(self.pending)}
                row.update(self._mfu(tps))
                row.update(getattr(self.parts.loader, "metrics", dict)())  # e.g. vfm-data's skip counts (this rank's)
                result.last_metrics = row
                for sink in self.sinks:
                    sink.log(done, row)
        self.pending.clear()

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
        if self.cfg.checkpoint.export and self.parts.export is not None and self.last == self.cfg.train.steps:
            ema, named = self.ema, self.named
            weights = full_weights(ema.shadow.items() if ema is not None else named.named_parameters())
            if self.pipelined:  # each stage holds its blocks: rank 0 collects the others'
                weights = _merge_stages(weights, self.stage_group)
            if self.rank == 0:
                result.export = self.out_dir / "export"
                self.parts.export(result.export, weights)

    def close_sinks(self) -> None:
        for sink in self.sinks:
            sink.close()

    def plot_loss_curve(self) -> None:
        metrics = self.out_dir / "metrics.jsonl"
        if self.rank == 0 and self.cfg.logging.loss_curve and metrics.exists():
            self.result.loss_curve = metrics_mod.plot_loss_curve(metrics, self.out_dir / "loss_curve.png")


def _merge_stages(weights: dict[str, torch.Tensor], group: Any) -> dict[str, torch.Tensor]:
    """Every pipeline stage's weights (single-process names) in one dict, on every stage."""
    parts: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(parts, weights, group=group)
    return {k: v for part in parts for k, v in part.items()}


def _first_of_dp_group(coords: Coordinates) -> bool:
    return all(coords.index[n] == 0 for n in ("pp", "cp", "tp"))


def _save(cfg: TrainConfig, root: Path, step: int, model, optimizer, ema, parts: TrainParts, coords: Coordinates) -> Path:
    return ckpt.save(
        root, step, model=model, optimizer=optimizer, ema=ema,
        state={"world_size": coords.world_size, "sizes": coords.sizes, "config": cfg.to_dict()},
        # One file per DP rank: its TP/CP/PP peers read the same samples and would write the same file.
        rank_state={"loader": parts.loader.state_dict()} if _first_of_dp_group(coords) else None,
        rank_key=coords.dp_rank, keep=cfg.checkpoint.keep,
    )
