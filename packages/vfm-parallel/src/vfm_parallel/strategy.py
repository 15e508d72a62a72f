"""The strategy interface: what every parallel strategy (built-in or plugin) is, and the order
:func:`vfm_parallel.parallelize` applies them in.

A strategy is any object with

- ``name``: the registry name (``"tp"``, ``"fsdp"``, ``"cp-ring"``, ...),
- ``phase``: one of :data:`PHASES`; it fixes *when* the strategy is applied,
- ``mesh_dims``: the mesh dimension names it uses (``("tp",)``, ``("dp_replicate", "dp_shard")``),
- ``apply(model, mesh, plan, **options) -> model``: applies itself in place (or wraps) and returns
  the model. ``mesh`` is the full :class:`~torch.distributed.device_mesh.DeviceMesh` with the
  dimension names of :data:`vfm_parallel.dims.MESH_DIMS`; take sub-meshes with ``mesh["tp"]``
  and the flattened ones with ``vfm_parallel.dims.flat_mesh(mesh, "dp_cp")`` (torch deprecates
  ``mesh["dp_cp"]``).
  ``plan`` is the family's ``parallel_plan()`` (read by attribute name, never imported).

Optional, looked up with ``getattr`` (a strategy without them is never refused by them):

- ``check(dims, plan)``: raise :class:`~vfm_parallel.dims.LayoutError` for a layout it cannot run,
  before any process group (:func:`vfm_parallel.parallel_model.check_strategies`),
- ``check_tokens(dims, tokens)``: the same for a sequence of ``tokens`` (a strategy that splits the
  sequence: ``sp`` needs tokens % tp == 0); ``vfm train`` calls it for every data bucket
  (:func:`vfm_parallel.parallel_model.check_sequence`),
- ``finalize(pm)``: called once after every strategy is applied.

It is registered by name through the ``vfm_parallel_register_strategies`` hook, e.g.
``register("cp-ring", "vfm_parallel.cp.ring:RingStrategy")``; the target is the strategy object
itself or a class/factory called with no arguments that returns one.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

#: The fixed order of application, outermost decision first: the pipeline split decides which
#: blocks live on this rank; TP/SP shard the linears of those blocks; CP swaps attention cores;
#: activation checkpointing and compile wrap each block; data parallelism (DDP/FSDP/HSDP) wraps
#: last so that it sees the final parameters (DTensors from TP included).
PHASES: tuple[str, ...] = ("pp", "tp", "cp", "checkpoint", "compile", "dp")


@runtime_checkable
class Strategy(Protocol):
    """A named, composable way of parallelizing (or wrapping) a model."""

    name: str
    phase: str
    mesh_dims: tuple[str, ...]

    def apply(self, model: Any, mesh: Any, plan: Any, **options: Any) -> Any: ...


def get_strategy(name: str) -> Strategy:
    """The strategy registered as ``name``; an unknown name lists the available ones."""
    from vfm_parallel.plugins import host

    from vfm_plugins import PluginLoadError

    target = host.get("strategies", name)  # an unknown name raises, listing the available ones
    entry = host.entry("strategies", name)
    where = f"strategy {name!r} (from {entry.provider} {entry.version})"
    made = isinstance(target, type) or (callable(target) and not hasattr(target, "apply"))
    try:
        strategy = target() if made else target
    except Exception as exc:  # a plugin's factory: one line naming it, not a traceback from inside it
        raise PluginLoadError(f"{where}: its factory {getattr(target, '__qualname__', target)}() raised "
                              f"{type(exc).__name__}: {exc}") from exc
    missing = [attr for attr in ("name", "phase", "mesh_dims", "apply") if not hasattr(strategy, attr)]
    if missing:
        raise PluginLoadError(f"{where} lacks {', '.join(missing)}; a strategy has name, phase, mesh_dims and "
                              "apply(model, mesh, plan, **options) (the target: the strategy, or a class or "
                              "factory called with no arguments that returns one)")
    if strategy.phase not in PHASES:
        raise ValueError(f"{where} has phase {strategy.phase!r}; phases: {', '.join(PHASES)}")
    _check_apply_signature(strategy, where)
    return strategy


def _check_apply_signature(strategy: Strategy, where: str) -> None:
    """``apply`` takes ``(model, mesh, plan)`` positionally (its options come as keywords): one without them
    failed inside ``parallelize`` with Python's ``apply() takes 2 positional arguments but 4 were given``."""
    from vfm_plugins import PluginLoadError, refused_signature

    signature = refused_signature(strategy.apply, 3, partial=True)
    if signature is not None:
        raise PluginLoadError(f"{where}: its apply{signature} cannot take (model, mesh, plan); a strategy's apply is "
                              "apply(model, mesh, plan, **options), its options keyword parameters")


def order_strategies(strategies: list[Strategy]) -> list[Strategy]:
    """``strategies`` sorted by :data:`PHASES` (stable within a phase); one per phase except none."""
    by_phase: dict[str, str] = {}
    for s in strategies:
        if s.phase in by_phase:
            raise ValueError(
                f"strategies {by_phase[s.phase]!r} and {s.name!r} both act in phase {s.phase!r}; pick one"
            )
        by_phase[s.phase] = s.name
    return sorted(strategies, key=lambda s: PHASES.index(s.phase))
