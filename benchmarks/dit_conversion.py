"""How far vfm's ``dit`` is from diffusers' ``DiTTransformer2DModel`` after conversion, and what each
DiT-specific option contributes: the converted model, then the same weights with one option put back
to vfm's default. A tiny random DiT (2 layers, 2 heads of 16, 8x8 latents, learned sigma), fp32, CPU.

    hatch run python benchmarks/dit_conversion.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.models.test_adapters_dit import _diffusers_dit, _diffusers_out, _inputs, _vfm, _vfm_out  # noqa: E402
from vfm_models.adapters import get_adapter  # noqa: E402


def main() -> None:
    ref_model = _diffusers_dit()
    adapter = get_adapter("diffusers-dit")
    options = adapter.options_from_external(dict(ref_model.config))
    state = adapter.from_external(ref_model.state_dict(), options)
    x, t, y = _inputs()
    ref = _diffusers_out(ref_model, x, t, y)
    print(f"| vfm dit | max abs difference to diffusers (max abs output {float(ref.abs().max()):.3g}) |")
    print("| --- | --- |")
    rows = [("as converted", {}), ("pos_embed = 'sincos' (vfm's 3-D table)", {"pos_embed": "sincos"}),
            ("timestep_freq_shift = 0 (DiT's own)", {"timestep_freq_shift": 0}),
            ("mlp_norm_eps = 1e-6 (diffusers: 1e-5)", {"mlp_norm_eps": 1e-6})]
    for label, override in rows:
        out = _vfm_out(_vfm({**options, **override}, state), x, t, y)
        print(f"| {label} | {float((out - ref).abs().max()):.3g} |")


if __name__ == "__main__":
    main()
