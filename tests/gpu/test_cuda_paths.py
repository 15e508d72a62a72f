"""The CUDA paths against their CPU / fp32 / unfused references. Marked ``gpu``: skipped without
CUDA (CI never has a GPU); run on a GPU machine with ``pytest -m gpu tests/gpu``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import vfm_models
from vfm_models.blocks import backends

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")
ROOT = Path(__file__).resolve().parents[2]


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-12))


def small_dit_cross(**overrides):
    torch.manual_seed(0)
    options = dict(hidden=256, depth=2, num_heads=4, text_dim=64, in_channels=4, patch=(1, 2, 2))
    options.update(overrides)
    model = vfm_models.get_family("dit-cross").create(**options)
    with torch.no_grad():  # adaLN-Zero starts at zero: give the blocks weights so outputs depend on them
        for p in model.parameters():
            if p.abs().sum() == 0:
                p.normal_(0, 0.02)
    return model


def batch(model, b=2, grid=(4, 16, 16), text_len=7, device=CUDA):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(b, model.config.in_channels, *grid, generator=g)
    t = torch.rand(b, generator=g)
    text = torch.randn(b, text_len, model.config.text_dim, generator=g)
    mask = torch.ones(b, text_len, dtype=torch.bool)
    mask[-1, text_len // 2:] = False  # a padded caption
    return x.to(device), t.to(device), {"text": text.to(device), "text_mask": mask.to(device)}


def test_bf16_autocast_forward_and_backward_stay_within_tolerance_of_fp32():
    model = small_dit_cross().to(CUDA)
    x, t, cond = batch(model)
    out32 = model(x, t, cond)
    out32.square().mean().backward()
    grads32 = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out16 = model(x, t, cond)
    out16.float().square().mean().backward()
    assert rel(out16, out32) < 2e-2
    worst = max(rel(p.grad, grads32[n]) for n, p in model.named_parameters() if n in grads32 and grads32[n].norm() > 0)
    assert worst < 6e-2


def test_compiled_blocks_equal_eager_blocks_in_fp32():
    from vfm_parallel import ParallelDims, parallelize

    torch.backends.cuda.matmul.allow_tf32 = False
    eager = small_dit_cross().to(CUDA)
    compiled = small_dit_cross().to(CUDA)
    parallelize(compiled, ParallelDims(), ["compile"], device_type="cuda")
    x, t, cond = batch(eager)
    a, b = eager(x, t, cond), compiled(x, t, cond)
    assert rel(b, a) < 1e-5
    a.square().mean().backward()
    b.square().mean().backward()
    for (name, pa), (_, pb) in zip(eager.named_parameters(), compiled.named_parameters()):
        if pa.grad is not None and pa.grad.norm() > 0:
            assert rel(pb.grad, pa.grad) < 1e-4, name


@pytest.mark.parametrize("backend", ["flash", "efficient", "cudnn", "vfm-default"])
def test_each_attention_kernel_equals_sdpa_math_in_fp32(backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(2, 4, 1024, 64, device=CUDA, dtype=torch.bfloat16, generator=g) for _ in range(3))
    with sdpa_kernel(SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
    if backend == "vfm-default":
        out = backends.attend(q, k, v)
    else:
        kernel = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                  "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]
        with sdpa_kernel(kernel):
            out = F.scaled_dot_product_attention(q, k, v)
    assert rel(out, ref) < 1e-2  # bf16 operands


@pytest.mark.parametrize("name", [n for n in ("flash", "te") if backends.installed()[n]])
def test_optional_attention_library_equals_sdpa(name):  # pragma: no cover - needs the library
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(1, 4, 512, 64, device=CUDA, dtype=torch.bfloat16, generator=g) for _ in range(3))
    assert rel(backends.attend(q, k, v, backend=name), backends.attend(q, k, v, backend="sdpa")) < 1e-2


def test_packed_attention_on_cuda_uses_one_kernel_and_equals_each_sample_alone():
    assert backends.installed()["varlen"], "this torch has no torch.nn.attention.varlen"
    g = torch.Generator(device="cuda").manual_seed(0)
    lengths = [300, 0, 517, 64]  # a sample with no keys (an empty caption) gets zeros
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], device=CUDA, dtype=torch.int32)
    cu_q = torch.tensor([0, 128, 256, 512, 640], device=CUDA, dtype=torch.int32)
    q = torch.randn(1, 4, 640, 64, device=CUDA, dtype=torch.bfloat16, generator=g)
    k, v = (torch.randn(1, 4, int(cu[-1]), 64, device=CUDA, dtype=torch.bfloat16, generator=g) for _ in range(2))
    fused = backends.attend(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu, max_seqlen_q=256, max_seqlen_k=517)
    reference = backends._sdpa_varlen(q, k, v, cu_q, cu)
    assert rel(fused, reference) < 1e-2
    assert fused[:, :, 128:256].abs().max() == 0


def test_packed_forward_on_cuda_equals_each_sample_alone_in_bf16():
    model = small_dit_cross().to(CUDA)
    g = torch.Generator().manual_seed(3)
    latents = [torch.randn(4, *grid, generator=g).to(CUDA) for grid in ((2, 16, 16), (1, 8, 24), (3, 8, 8))]
    t = torch.rand(3, generator=g).to(CUDA)
    text = torch.randn(3, 5, 64, generator=g).to(CUDA)
    cond = {"text": text, "text_mask": torch.ones(3, 5, dtype=torch.bool, device=CUDA)}
    with torch.autocast("cuda", dtype=torch.bfloat16):
        packed = model.forward_packed(latents, t, cond)
        alone = [model(x[None], t[i:i + 1], {k: v[i:i + 1] for k, v in cond.items()})[0] for i, x in enumerate(latents)]
    for p, a in zip(packed, alone):
        assert rel(p, a) < 2e-2


@pytest.mark.parametrize("formulation, sampler", [("edm", "edm-heun"), ("rectified-flow", "flow-euler")])
def test_cuda_generation_is_reproducible_and_matches_the_cpu_reference(formulation, sampler):
    from tests.infer.tiny import tiny_dit, tiny_meta
    from vfm_infer.pipeline import GenerationSpec, VideoPipeline

    spec = GenerationSpec(sampler=sampler, steps=6, guidance=2.0, seed=5)
    cpu = VideoPipeline(tiny_dit(), tiny_meta(formulation), device="cpu")
    gpu = VideoPipeline(tiny_dit(), tiny_meta(formulation), device="cuda", dtype="fp32")
    torch.backends.cuda.matmul.allow_tf32 = False
    ref = cpu.generate("1", spec)
    a, b = gpu.generate("1", spec), gpu.generate("1", spec)
    assert a.device.type == "cuda" and torch.equal(a, b)  # same seed, same video on a given device
    assert rel(a.cpu(), ref) < 1e-3
    bf16 = VideoPipeline(tiny_dit(), tiny_meta(formulation), device="cuda").generate("1", spec)
    assert rel(bf16.cpu(), ref) < 5e-2


def test_edm_churn_sampling_runs_on_cuda_and_repeats_per_seed():
    from tests.infer.tiny import tiny_dit, tiny_meta
    from vfm_infer.pipeline import GenerationSpec, VideoPipeline

    spec = GenerationSpec(sampler="edm-heun", steps=6, guidance=1.0, seed=2, sampler_options={"churn": 20.0})
    pipe = VideoPipeline(tiny_dit(), tiny_meta("edm"), device="cuda", dtype="fp32")
    a, b = pipe.generate("1", spec), pipe.generate("1", spec)
    assert torch.equal(a, b) and torch.isfinite(a).all()
    other = pipe.generate("1", GenerationSpec(**{**spec.__dict__, "seed": 3}))
    assert not torch.equal(a, other)


def _vfm(*args, cwd):
    result = subprocess.run([sys.executable, "-m", "vfm_cli.main", *map(str, args)], capture_output=True, text=True, cwd=cwd)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.mark.parametrize("compile_blocks", [False, True])
def test_vfm_train_then_vfm_generate_end_to_end_on_cuda(tmp_path, compile_blocks):
    out = tmp_path / "run"
    _vfm("train", ROOT / "configs" / "tiny.toml", "--set", "train.steps=30", "--set", f"train.out_dir={out}",
         "--set", f"parallel.compile={'true' if compile_blocks else 'false'}", "--set", "logging.tensorboard=false",
         cwd=tmp_path)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["mfu_executed"] > 0 and rows[-1]["mfu"] > 0
    assert (out / "export" / "model.safetensors").is_file()
    pytest.importorskip("av")
    result = _vfm("generate", "--checkpoint", out / "export", "--prompt", "3", "--steps", "8", "--device", "cuda",
                  "-o", tmp_path / "videos", cwd=tmp_path)
    assert "cuda" in result.stdout and (tmp_path / "videos" / "0000.mp4").stat().st_size > 0
