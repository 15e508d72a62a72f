"""An export's config.json is data: numbers in it must not make loading allocate what the weights do
not hold. A model config is checked against the safetensors header on the meta device before the
model is built, and option tables (DDPM's schedule, the hash encoder's positions) are bounded.

Each crafted export is loaded by ``VideoPipeline.from_export`` in a child process allowed 1.5 GB of
address space beyond what importing vfm_infer maps (a CUDA build of torch alone maps more than 1.5 GB),
so that a regression fails fast with a MemoryError instead of taking the machine's memory; the child
prints the error it got."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.infer.tiny import tiny_dit, tiny_meta
from vfm_models.export import save_export

LIMIT = 1536 << 20
CHILD = f"""
import re, resource, sys
from vfm_infer.pipeline import VideoPipeline
mapped = int(re.search(r"VmSize:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) << 10
resource.setrlimit(resource.RLIMIT_AS, (mapped + {LIMIT}, mapped + {LIMIT}))
for folder in sys.argv[1:]:
    try:
        VideoPipeline.from_export(folder)
        print("LOADED")
    except BaseException as exc:
        print(type(exc).__name__, str(exc).replace(chr(10), " ")[:400])
"""


def _export(folder, edit) -> str:
    model = tiny_dit()
    save_export(folder, model, {**tiny_meta(), "config": model.config})
    meta = json.loads((folder / "config.json").read_text())
    edit(meta, folder)
    (folder / "config.json").write_text(json.dumps(meta))
    return str(folder)


CASES = {
    # a billion-parameter model from a 32-wide export: all memory, then the shape check
    "hidden": (lambda m, _: m["config"].update(hidden=100_000),
               r"ExportError .*do not fit family 'dit' with the config in config\.json: different shapes \(\d+\): "
               r"blocks\.0\.adaln\.linear\.bias: weights \(192,\) vs model \(600000,\)"),
    # 100000 blocks: minutes and all memory before the check (the meta build is stopped early too)
    "depth": (lambda m, _: m["config"].update(depth=100_000),
              r"ExportError .*the config builds a model with more than \d+ tensors, the weights hold \d+"),
    "ddpm": (lambda m, _: m.update(formulation="ddpm", formulation_options={"num_train_timesteps": 10**10}),
             r"ValueError num_train_timesteps must be an integer in \[1, 1000000\], got 10000000000"),
    "hash": (lambda m, _: m.update(text_encoder="hash", text_encoder_options={"dim": 64, "max_length": 10**9}),
             r"ValueError hash encoder needs .*dim \* max_length <= 16777216; got dim=64, max_length=1000000000"),
    # a diffusers VAE folder inside the export whose config.json asks for a 1.4 TB model
    "vae": (lambda m, folder: m.update(tokenizer="sd-vae", tokenizer_options={"path": _vae(folder / "vae")}),
            r"CheckpointMismatchError sd-vae tokenizer: .*/vae/config\.json does not fit its weights: it describes a "
            r"model of \d+ values, the weight files hold 10455"),
    # a T5 folder inside the export whose config asks for 100000 layers (minutes of building, then all memory)
    "t5": (lambda m, folder: m.update(text_encoder="t5", text_encoder_options={"path": _t5(folder / "t5")}),
           r"CheckpointMismatchError T5TextEncoder: .*/t5/config\.json does not fit its weights: the config builds a "
           r"model with more than \d+ tensors, the weights hold \d+"),
    # causal3d weights inside the export, options asking for a 1 TB model of them
    "causal3d": (lambda m, folder: m.update(tokenizer="causal3d", tokenizer_options={**C3D, "base_channels": 100_000,
                                                                                      "weights": _c3d(folder)}),
                 r"CheckpointMismatchError causal3d options do not fit the weights .*c3d\.safetensors: different "
                 r"shapes \(\d+\): decoder\.conv_in\.conv\.bias: weights \(8,\) vs model \(200000,\)"),
}
C3D = dict(latent_channels=4, spatial_compression=2, temporal_compression=1)


def _c3d(folder) -> str:
    import vfm_models

    vfm_models.get_tokenizer("causal3d")(base_channels=4, **C3D).save(folder / "c3d.safetensors")
    return "c3d.safetensors"


def _t5(folder) -> str:
    pytest.importorskip("transformers")
    from tests.models.test_text_encoders import make_t5_folder

    make_t5_folder(folder, "t5")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_layers": 100_000}))
    return "t5"


def _vae(folder) -> str:
    diffusers = pytest.importorskip("diffusers")
    diffusers.AutoencoderKL(block_out_channels=(8,), down_block_types=("DownEncoderBlock2D",), latent_channels=4,
                            up_block_types=("UpDecoderBlock2D",), norm_num_groups=4, layers_per_block=1).save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "block_out_channels": [200_000]}))
    return "vae"


def test_crafted_export_numbers_are_refused_without_allocating(tmp_path):
    folders = [_export(tmp_path / name, edit) for name, (edit, _) in CASES.items()]
    folders.append(_export(tmp_path / "plain", lambda m, _: None))  # the limit leaves room for a real load
    out = subprocess.run([sys.executable, "-c", CHILD, *folders], capture_output=True, text=True, timeout=300)
    lines = out.stdout.splitlines()
    assert len(lines) == len(folders), out.stderr[-2000:]
    wrong = [f"{name}: {line}" for (name, (_, pattern)), line in zip(CASES.items(), lines) if not re.match(pattern, line)]
    assert not wrong, "\n".join(wrong)
    assert lines[-1] == "LOADED"
