"""Output of a plan: the ranked table, the losers' reasons, JSON, and the winner's ``[parallel]`` block."""

from __future__ import annotations

import json

from vfm_parallel.planner.ranking import GIB, Plan, Prediction


def _row(rank: str, p: Prediction) -> list[str]:
    tps = f"{p.tokens_per_s_per_gpu:,.0f}" if p.time else "-"
    tfl = (f"{p.tflops_per_gpu:,.0f}" if p.tflops_per_gpu >= 10 else f"{p.tflops_per_gpu:.3g}") if p.time else "-"
    return [rank, p.layout.short(), tps, tfl, f"{p.memory.total / GIB:.1f}", p.reason or "best"]


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
    head = (f"{s.name}: {s.params / 1e9:.2f}B params, {s.layers} layers x {s.hidden}, {s.seq_len} tokens; "
            f"{result.world} x {result.hardware.name} ({result.hardware.gpus_per_node} per node); "
            f"global batch {result.global_batch} samples; {len(result.ranked)} layouts fit, {len(result.others)} do not")
    return head + "\n" + "\n".join(lines)


def parallel_block(p: Prediction) -> str:
    """The winner as a ``[parallel]`` TOML block (plus the batch split it assumes, as a comment)."""
    lines = [f"# vfm plan: {p.layout.short()}: {p.tokens_per_s_per_gpu:,.0f} tokens/s/GPU predicted, "
             f"{p.memory.total / GIB:.1f} GiB per GPU",
             f"# with data.micro_batch = {p.layout.micro_batch} and optim.grad_accum = {p.layout.grad_accum}",
             "[parallel]"]
    for key, value in p.layout.parallel_table().items():
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


def to_json(result: Plan, top: int = 10) -> str:
    s = result.spec
    data = {"model": {"name": s.name, "params": s.params, "layers": s.layers, "hidden": s.hidden, "heads": s.heads,
                      "seq_len": s.seq_len, "flops_per_token": s.model_flops_per_token},
            "gpus": result.world, "gpu": result.hardware.name, "global_batch": result.global_batch,
            "ranked": [p.to_dict() for p in result.distinct()[:top]],
            "rejected": [p.to_dict() for p in result.others[:top]]}
    return json.dumps(data, indent=2)
