"""Output of a plan: the ranked table, the losers' reasons, JSON, and the winner's ``[parallel]`` block."""

from __future__ import annotations

import json

from vfm_parallel.planner.ranking import GIB, Plan, Prediction


def _gib(nbytes: float) -> str:
    """GiB to 0.1, or to 3 significant digits below 1 GiB (a tiny model's 0.0 said nothing)."""
    gib = nbytes / GIB
    return f"{gib:.1f}" if gib >= 1 or gib == 0 else f"{gib:.3g}"


def _params(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}K" if n >= 1e3 else str(n)


def _row(rank: str, p: Prediction) -> list[str]:
    tps = f"{p.tokens_per_s_per_gpu:,.0f}" if p.time else "-"
    tfl = (f"{p.tflops_per_gpu:,.0f}" if p.tflops_per_gpu >= 10 else f"{p.tflops_per_gpu:.3g}") if p.time else "-"
    return [rank, p.layout.short(), tps, tfl, _gib(p.memory.total), p.reason or "best"]


def format_table(result: Plan, top: int = 10, losers: int = 5, all_variants: bool = False) -> str:
    """Ranked layouts (one per (tp, cp, pp) unless ``all_variants``), then the best of those that lose
    for memory or vfm's rules, each with its reason."""
    rows = [["#", "layout", "tokens/s/GPU", "TFLOP/s/GPU", "GiB", "why it loses"]]
    ranked = result.ranked if all_variants else result.distinct()
    for i, p in enumerate(ranked[:top], 1):
        rows.append(_row(str(i), p))
    seen, shown = set(), 0
    for p in result.others:
        key = (p.layout.model_parallel(), p.oom)
        if key in seen or shown >= losers:
            continue
        seen.add(key)
        shown += 1
        rows.append(_row("-", p))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    s = result.spec
    head = (f"{s.name}: {_params(s.params)} params, {s.layers} layers x {s.hidden}, {s.seq_len} tokens; "
            f"{result.world} x {result.hardware.name} ({result.hardware.gpus_per_node} per node); "
            f"global batch {result.global_batch} samples; {len(result.ranked)} layouts fit, {len(result.others)} do not")
    note = result.batch_note()
    return head + "\n" + "\n".join(lines) + ("\n" + note if note else "")


def parallel_block(p: Prediction, keep: dict | None = None) -> str:
    """The winner as a ``[parallel]`` TOML block (plus the batch split it assumes, as a comment) that
    replaces a config's whole ``[parallel]`` table; ``keep``: that table's other keys (``compile``),
    carried over so that the replacement does not drop them."""
    lines = [f"# vfm plan: {p.layout.short()}: {p.tokens_per_s_per_gpu:,.0f} tokens/s/GPU predicted, "
             f"{_gib(p.memory.total)} GiB per GPU",
             "# to use: in place of the config's whole parallel table; the layout also needs "
             f"data.micro_batch = {p.layout.micro_batch} and optim.grad_accum = {p.layout.grad_accum}",
             "[parallel]"]
    table = {**p.layout.parallel_table(), **{k: v for k, v in (keep or {}).items() if k not in p.layout.parallel_table()}}
    for key, value in table.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, list):
            text = "[" + ", ".join(f'"{v}"' for v in value) + "]"
        elif isinstance(value, str):
            text = f'"{value}"'
        else:
            text = str(value)
        lines.append(f"{key} = {text}")
    return "\n".join(lines) + "\n"


def to_json(result: Plan, top: int = 10, all_variants: bool = False) -> str:
    """The plan as JSON: the best ``top`` layouts (one per (tp, cp, pp) unless ``all_variants``) and
    the best ``top`` of those vfm refuses or that run out of memory."""
    s = result.spec
    data = {"model": {"name": s.name, "params": s.params, "layers": s.layers, "hidden": s.hidden, "heads": s.heads,
                      "seq_len": s.seq_len, "flops_per_token": s.model_flops_per_token},
            "gpus": result.world, "gpu": result.hardware.name, "gpus_per_node": result.hardware.gpus_per_node,
            "global_batch": result.global_batch, "note": result.batch_note(),
            "ranked": [p.to_dict() for p in (result.ranked if all_variants else result.distinct())[:top]],
            "rejected": [p.to_dict() for p in result.others[:top]]}
    return json.dumps(data, indent=2)
