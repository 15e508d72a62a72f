"""`vfm generate` on two torchrun nodes (two launchers on this machine in one c10d rendezvous)."""

from __future__ import annotations

import socket
import time

import pytest

from tests.cli.test_export_checkpoint import _step_dir, one_process_run  # noqa: F401 - fixture
from tests.cli.test_generate import make_export
from tests.cli.two_nodes import assert_each_node_ends_with_one_error, held_by_a_live_run, needs_host_names, run_two_nodes


def assert_both_nodes_name_each_path(ends: list[tuple[int, str]], *each: str) -> None:
    """Both nodes ended (exit 1) with one line saying --checkpoint differs, naming each rank's path and kind."""
    outputs = "\n".join(o for _, o in ends)
    assert [code for code, _ in ends] == [1, 1], outputs
    for _, output in ends:
        errors = [line for line in output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "--checkpoint is not the same on every rank" in errors[0], output
        assert all(path in errors[0] for path in each), output


@pytest.mark.slow
def test_an_export_one_node_cannot_read_ends_both_nodes_with_a_line_naming_it(tmp_path):
    # node-local scratch: the export was copied to one node only; the other's rank fails to load it, and
    # the rank that loaded it must not wait for it in the process group's start (gloo's 30 minutes)
    export = make_export(tmp_path / "export")
    missing = tmp_path / "elsewhere" / "export"
    common = ["generate", "--prompt", "1", "--steps", "2", "-o", str(tmp_path / "out")]
    t0 = time.monotonic()
    ends = run_two_nodes(common, (["--checkpoint", str(export)], ["--checkpoint", str(missing)]), timeout=100)
    outputs = "\n".join(o for _, o in ends)
    assert time.monotonic() - t0 < 90, outputs
    assert_both_nodes_name_each_path(ends, f"{missing}, no such path", f"{export}, an export folder")


@pytest.mark.slow
def test_a_diffusers_folder_one_node_lacks_with_tokenizer_ends_both_nodes_with_a_line_naming_it(tmp_path):
    # --tokenizer is checked against the folder's kind: on the node without the folder that check must not
    # fail alone, before the process group starts, leaving the other node waiting in its start
    diffusers = tmp_path / "diffusers"
    diffusers.mkdir()
    (diffusers / "config.json").write_text('{"_class_name": "WanTransformer3DModel"}')
    missing = tmp_path / "elsewhere" / "diffusers"
    common = ["generate", "--prompt", "1", "--steps", "2", "--tokenizer", "wan", "-o", str(tmp_path / "out")]
    ends = run_two_nodes(common, (["--checkpoint", str(diffusers)], ["--checkpoint", str(missing)]), timeout=60)
    assert_both_nodes_name_each_path(ends, f"{missing}, no such path", f"{diffusers}, a diffusers model folder")


@pytest.mark.slow
def test_an_output_folder_a_live_run_holds_on_rank_0s_host_ends_both_nodes_within_seconds(tmp_path):
    # only rank 0 takes the output folder's lock: refused there, it must not leave the other node's rank
    # waiting for it in the process group's start
    export = make_export(tmp_path / "export")
    out = tmp_path / "out"
    with held_by_a_live_run(out) as holder:
        t0 = time.monotonic()
        ends = run_two_nodes(["generate", "--checkpoint", str(export), "--prompt", "1", "--steps", "2", "-o", str(out)],
                             timeout=60)
        assert time.monotonic() - t0 < 60, "\n".join(o for _, o in ends)
    assert_each_node_ends_with_one_error(ends, f"error: rank 0 (host {socket.gethostname()}): {out} is in use by another "
                                               f"run: pid {holder}")
    assert not list(out.glob("*.mp4"))


@pytest.mark.slow
def test_device_cuda_on_a_torch_without_nccl_is_one_line_per_node_not_a_traceback(tmp_path):
    # the process group starts before the device is checked: with nccl asked for by --device alone, every
    # rank ended with "Distributed package doesn't have NCCL built in" and a traceback
    import torch.distributed as dist

    if dist.is_nccl_available():
        pytest.skip("needs a torch without NCCL (a CPU build)")
    export = make_export(tmp_path / "export")
    ends = run_two_nodes(["generate", "--checkpoint", str(export), "--prompt", "1", "--steps", "2", "--device", "cuda",
                          "-o", str(tmp_path / "out")], timeout=60)
    assert_each_node_ends_with_one_error(ends, "error: device 'cuda' was asked for but no CUDA device is visible")
    assert not any("NCCL" in output for _, output in ends), "\n".join(o for _, o in ends)


@pytest.mark.slow
def test_a_prompts_file_one_node_cannot_read_ends_both_nodes_within_seconds(tmp_path):
    # any error of the checks before the export loads is agreed on, not only the expected kinds: a node whose
    # --prompts file fails to read (an I/O error) must not leave the other node waiting in the group's start
    export = make_export(tmp_path / "export")
    good = tmp_path / "prompts.txt"
    good.write_text("1\n")
    common = ["generate", "--checkpoint", str(export), "--steps", "2", "-o", str(tmp_path / "out")]
    t0 = time.monotonic()
    ends = run_two_nodes(common, (["--prompts", str(good)], ["--prompts", "/proc/self/mem"]), timeout=60)
    assert time.monotonic() - t0 < 60, "\n".join(o for _, o in ends)
    assert_each_node_ends_with_one_error(ends, f"error: rank 1 (host {socket.gethostname()}): [Errno 5] Input/output error")


@pytest.mark.slow
@needs_host_names
def test_a_diffusers_folder_whose_copy_is_damaged_on_one_node_ends_both_nodes_with_a_line_naming_it(tmp_path):
    # a diffusers folder is converted in memory by each rank: a node's damaged copy failed there alone, after the
    # process group started, and the other node went on into sampling, where it waited for it (NCCL: the watchdog)
    import shutil

    pytest.importorskip("diffusers")
    from tests.cli.test_convert_export import diffusers_folder

    good = tmp_path / "hub"
    diffusers_folder(good)
    damaged = tmp_path / "copy" / "hub"
    shutil.copytree(good, damaged)
    weights = damaged / "diffusion_pytorch_model.safetensors"
    header = bytearray(weights.read_bytes())
    header[8:40] = b"x" * 32  # the header's JSON
    weights.write_bytes(bytes(header))
    common = ["generate", "--prompt", "1", "--steps", "2", "--tokenizer", "pixel", "-o", str(tmp_path / "out")]
    t0 = time.monotonic()
    ends = run_two_nodes(common, (["--checkpoint", str(good)], ["--checkpoint", str(damaged)]), timeout=60,
                         hostnames=("node-a", "node-b"))
    assert time.monotonic() - t0 < 30, "\n".join(o for _, o in ends)
    assert_each_node_ends_with_one_error(ends, f"error: rank 1 (host node-b): {weights} is not a complete safetensors file")
    assert not list((tmp_path / "out").glob("*.mp4"))


@pytest.mark.slow
@needs_host_names
def test_a_training_checkpoint_whose_copy_is_damaged_on_one_node_ends_both_nodes_with_the_damage(one_process_run, tmp_path):  # noqa: F811
    # the checkpoint is verified collectively (each rank hashes a share, every rank checks every file's size on
    # its own copy) before any rank reads the weights: the damage found on node-b's copy ends node-a too
    import shutil

    good = _step_dir(one_process_run)
    damaged = tmp_path / "copy" / good.name
    shutil.copytree(good, damaged)
    tensors = next((damaged / "tensors").glob("*.safetensors"))
    tensors.write_bytes(tensors.read_bytes()[:-100])  # a copy cut short
    common = ["generate", "--prompt", "1", "--steps", "2", "-o", str(tmp_path / "out")]
    t0 = time.monotonic()
    ends = run_two_nodes(common, (["--checkpoint", str(good)], ["--checkpoint", str(damaged)]), timeout=60,
                         hostnames=("node-a", "node-b"))
    assert time.monotonic() - t0 < 30, "\n".join(o for _, o in ends)
    assert_each_node_ends_with_one_error(ends, "error: checkpoint ")
    said = f"is damaged: tensors/{tensors.name} has {tensors.stat().st_size} bytes"
    assert all(said in output for _, output in ends), "\n".join(o for _, o in ends)
