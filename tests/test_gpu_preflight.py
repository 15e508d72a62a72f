"""CPU preflight of what a GPU session runs (benchmarks/gpu_session/README.md), so that a bug costs
seconds here instead of lent device minutes: every GPU benchmark in its ``--smoke`` mode (toy size
on the CPU; compile traced with dynamo's ``eager`` backend), the gpu-marked tests collecting with
every name they use present, and ``run.sh``'s gathering of bundle parts across calls. The smoke runs
see the packages the GPU machine lacks (megatron-energon, webdataset, Ray) as not installed."""

from __future__ import annotations

import ast
import hashlib
import importlib
import io
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
GPU_TEST_FILES = [*sorted((ROOT / "tests" / "gpu").glob("test_*.py")), ROOT / "tests" / "curator" / "test_decoders.py"]


#: installed here, absent on the GPU machine until the session's optional last calls (../shared/GPU.md)
MISSING_THERE = ("megatron", "webdataset", "ray")


@pytest.fixture(scope="module")
def gpu_machine_path(tmp_path_factory) -> str:
    """A folder that, first on PYTHONPATH, makes the packages the GPU machine lacks unimportable, so
    the smoke runs find an import of them where the GPU run would."""
    root = tmp_path_factory.mktemp("absent-on-the-gpu-machine")
    for name in MISSING_THERE:
        (root / name).mkdir()
        (root / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed on the GPU machine')\n")
    return str(root)


def run_script(*args: str, path: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(p for p in (path, os.environ.get("PYTHONPATH", "")) if p))
    result = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    assert result.returncode == 0, f"{args[0]} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def test_what_the_gpu_machine_lacks_cannot_be_imported_in_the_smoke_runs(gpu_machine_path):
    for name in ("megatron.energon", "webdataset", "ray"):
        with pytest.raises(AssertionError, match="is not installed on the GPU machine"):
            run_script("-c", f"import {name}", path=gpu_machine_path)


def test_gpu_attention_smoke_runs_vfm_default_and_math_and_names_the_cuda_kernels(tmp_path, gpu_machine_path):
    out = tmp_path / "attention.json"
    result = run_script("benchmarks/gpu_attention.py", "--smoke", "--json", str(out), path=gpu_machine_path)
    figures = json.loads(out.read_text())
    kernels = {row["kernel"]: row for row in figures["rows"]}
    assert figures["smoke"] and {"vfm-default", "math"} <= set(kernels)
    assert kernels["vfm-default"]["rel_err"] < 1e-2 and kernels["vfm-default"]["fwd_bwd_ms"] > 0
    assert sum(k.startswith("cross") for k in kernels) == 3  # no mask, all-true, half-padded
    for name in ("flash", "efficient", "cudnn"):
        assert f"{name} skipped: a CUDA kernel" in result.stdout


@pytest.mark.slow
def test_gpu_train_smoke_runs_every_mode_for_vfm_and_the_peer(tmp_path, gpu_machine_path):
    out = tmp_path / "train.json"
    run_script("benchmarks/gpu_train.py", "--smoke", "--tokens", "8k", "--json", str(out), path=gpu_machine_path)
    rows = json.loads(out.read_text())["rows"]
    got = {(r["mode"], r["model"]) for r in rows if r.get("tps", 0) > 0 and not r.get("oom")}
    expected = {(m, k) for m in ("eager", "compile", "compile+ac") for k in ("vfm", "peer")} | {("packed", "vfm")}
    assert got == expected
    assert all(r["vfm_over_peer"] > 0 for r in rows if r["model"] == "vfm")


@pytest.mark.slow
def test_gpu_generate_smoke_times_vfm_and_the_peer_eager_and_compiled(tmp_path, gpu_machine_path):
    out = tmp_path / "generate.json"
    run_script("benchmarks/gpu_generate.py", "--smoke", "--tokens", "8k", "--json", str(out), path=gpu_machine_path)
    rows = json.loads(out.read_text())["rows"]
    assert {(r["mode"], r["model"]) for r in rows if r.get("step", 0) > 0} == {
        (m, k) for m in ("eager", "compile") for k in ("vfm", "peer")}
    assert all(r["vfm_speed_over_peer"] > 0 for r in rows if r["model"] == "vfm")


@pytest.mark.slow
def test_curator_gpu_smoke_runs_the_cpu_pipeline_and_decode_speeds(tmp_path, gpu_machine_path):
    out = tmp_path / "curator.json"
    result = run_script("benchmarks/curator_gpu.py", "--smoke", "--workdir", str(tmp_path / "w"), "--json", str(out),
                        path=gpu_machine_path)
    figures = json.loads(out.read_text())
    (cpu,) = figures["runs"]
    assert cpu["clips"] > 0 and cpu["failures"] == 0 and cpu["rate"] > 0
    assert {"decode", "transcode", "embed"} <= set(cpu["stage_s"])
    decode = {row[0]: row for row in figures["decode_only"]}
    assert float(decode["pyav"][1]) > 0 and float(decode["pyav"][2]) > 0
    if "no CUDA device" in figures["device"]:
        assert "the GPU run (--gpus 1) is skipped" in result.stdout


def test_decode_fps_smoke_measures_pyav_and_says_what_auto_picks(tmp_path, gpu_machine_path):
    out = tmp_path / "decode.json"
    result = run_script("benchmarks/gpu_session/decode_fps.py", "--smoke", "--workdir", str(tmp_path / "w"),
                        "--json", str(out), path=gpu_machine_path)
    rows = json.loads(out.read_text())["rows"]
    pyav = next(r for r in rows if r.get("decoder") == "pyav")
    assert pyav["full_fps"] > 0 and pyav["small_fps"] > 0
    auto = next(r["auto"] for r in rows if "auto" in r)
    assert not auto.startswith("failed"), auto
    assert "auto picks" in result.stdout


def test_plan_measure_plans_the_sessions_one_gpu_config_at_its_real_size(tmp_path, gpu_machine_path):
    """The config step 4 measures, at its real dims on the H100 profile: it loads, the planner ranks
    its one-GPU layouts (micro-batch x checkpointing), and the driver writes its JSON. (Running
    layouts under torchrun is ``vfm plan --measure``'s own path, tested in tests/cli/test_plan_command.py.)"""
    out = tmp_path / "plan.json"
    result = run_script("benchmarks/gpu_session/plan_measure.py", "benchmarks/gpu_session/plan-1gpu.toml", "--gpu", "h100",
                        "--gpus", "1", "--measure", "0", "--json", str(out), path=gpu_machine_path)
    figures = json.loads(out.read_text())
    assert figures["seq_len"] == 8192 and 0.6e9 < figures["params"] < 0.75e9 and figures["rows"] == []
    ranked = [line for line in result.stdout.splitlines() if line[:1].isdigit()]
    fits = [line for line in ranked if "OOM" not in line]
    assert len(fits) >= 4, result.stdout  # micro-batches with and without checkpointing, less what does not fit
    assert {" ac mb" in line for line in fits} == {True, False} and "measuring 0 layouts" in result.stdout


def test_gpu_marked_tests_collect_without_import_errors():
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu", "-p", "no:cacheprovider",
         *map(str, GPU_TEST_FILES)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    collected = [line for line in result.stdout.splitlines() if "::" in line]
    files = {line.split("::")[0] for line in collected}
    assert {str(p.relative_to(ROOT)) for p in GPU_TEST_FILES} <= files
    assert len(collected) >= 30


def _aliases(nodes) -> dict[str, str]:
    """name -> dotted target for the vfm_* / tests.* imports among ``nodes``."""
    out = {}
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(("vfm_", "tests.")):
            out.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("vfm_"):
                    top = a.name.split(".")[0]
                    out[a.asname or top] = a.name if a.asname else top
    return out


def _vfm_names(tree: ast.Module):
    """(module, name, line) for every ``from vfm_*/tests.* import name`` in the file (at any depth),
    and (target, attribute, line) for each ``alias.attribute`` where ``alias`` is such an import in
    that scope (a test's parameter or local variable of the same name shadows a module-level one)."""
    imports = [(n.module, a.name, n.lineno) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0
               and (n.module or "").startswith(("vfm_", "tests.")) for a in n.names]
    module_level = _aliases(tree.body)
    attrs = []

    def scan(nodes, aliases):
        for node in nodes:
            for n in ast.walk(node):
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in aliases:
                    attrs.append((aliases[n.value.id], n.attr, n.lineno))

    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scan(stmt.decorator_list, module_level)  # evaluated at module level
            args = stmt.args
            local = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
            local |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            inner = _aliases(n for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom)))
            scope = {k: v for k, v in module_level.items() if k not in local} | inner
            scan(stmt.body, scope)
        else:
            scan([stmt], module_level)
    return imports, attrs


def _missing_names(source: str, name: str) -> list[str]:
    missing = []
    imports, attrs = _vfm_names(ast.parse(source))
    for module, attr, line in imports:
        mod = importlib.import_module(module)
        if not hasattr(mod, attr):
            try:
                importlib.import_module(f"{module}.{attr}")
            except ImportError:
                missing.append(f"{name}:{line}: from {module} import {attr}")
    for target, attr, line in attrs:
        try:
            obj = importlib.import_module(target)
        except ImportError:  # a class or function imported by name, not a module
            module, _, member = target.rpartition(".")
            obj = getattr(importlib.import_module(module), member, None)
        if obj is not None and not hasattr(obj, attr):
            missing.append(f"{name}:{line}: {target}.{attr}")
    return missing


def test_every_vfm_name_the_gpu_tests_use_exists():
    """The gpu tests import most names inside the test functions, which a CPU run never executes:
    a renamed function would surface only on the GPU machine. Check each here."""
    missing = [m for path in GPU_TEST_FILES for m in _missing_names(path.read_text(), path.name)]
    assert not missing, "names the gpu tests use that do not exist:\n" + "\n".join(missing)


def test_the_name_check_finds_renamed_names_and_respects_shadowing():
    source = """
from vfm_curator import decoders
from vfm_models.blocks import backends

def test_a(decoders):
    decoders.anything                   # a parameter, not the module
    backends.no_such_kernel             # missing
    from vfm_curator.decoders import nvdec_renamed   # missing

def test_b():
    from vfm_curator.decoders import nvdec
    nvdec.no_such_function              # missing
    backends.attend                     # exists
"""
    assert _missing_names(source, "t.py") == [
        "t.py:8: from vfm_curator.decoders import nvdec_renamed",
        "t.py:7: vfm_models.blocks.backends.no_such_kernel",
        "t.py:12: vfm_curator.decoders.nvdec.no_such_function",
    ]


# --- run.sh: bundles carried in parts over several calls ------------------------------------------------


def _wheel(folder: Path) -> Path:
    """A minimal real wheel (pip installs it): the package ``preflight_demo`` 0.1."""
    path = folder / "preflight_demo-0.1-py3-none-any.whl"
    files = {"preflight_demo/__init__.py": "VALUE = 42\n",
             "preflight_demo-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: preflight-demo\nVersion: 0.1\n",
             "preflight_demo-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{name},,\n" for name in files) + "preflight_demo-0.1.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in {**files, "preflight_demo-0.1.dist-info/RECORD": record}.items():
            z.writestr(name, text)
    return path


def _bundle_parts(tmp_path: Path, name: str, n: int) -> list[bytes]:
    """``name``.tar holding one wheel, cut into ``n`` parts, with its checksum (as prepare.sh does)."""
    wheel = _wheel(tmp_path)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(wheel, arcname=wheel.name)
    data = buf.getvalue()
    (tmp_path / f"{name}.tar.sha256").write_text(f"{hashlib.sha256(data).hexdigest()}  {name}.tar\n")
    step = -(-len(data) // n)
    return [data[i * step:(i + 1) * step] for i in range(n)]


def _device_call(root: Path, tmp_path: Path, name: str, carried: dict[str, bytes], step: str = "part") -> str:
    """One simulated device call: only this call's carried folder is in the tree."""
    folder = root / ".gpu_session"
    subprocess.run(["rm", "-rf", str(folder)], check=True)
    (folder / "xN").mkdir(parents=True)
    for file, data in carried.items():
        (folder / "xN" / file).write_bytes(data)
    (folder / "xN" / f"{name}.tar.sha256").write_text((tmp_path / f"{name}.tar.sha256").read_text())
    (folder / "xN" / f"{name}.tar.nparts").write_text("2\n")
    env = dict(os.environ, PYTHON=sys.executable, OUT=str(tmp_path / "out"), VFM_GPU_STATE=str(tmp_path / "state"),
               VFM_GPU_SITE=str(tmp_path / "site"), VFM_GPU_SESSION_SMOKE="1", VFM_GPU_SESSION_INSTALL="1")
    result = subprocess.run(["bash", str(root / "benchmarks" / "gpu_session" / "run.sh"), step], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture
def device_root(tmp_path):
    root = tmp_path / "root"
    (root / "benchmarks" / "gpu_session").mkdir(parents=True)
    script = (BENCH / "gpu_session" / "run.sh").read_text()
    (root / "benchmarks" / "gpu_session" / "run.sh").write_text(script)
    return root


def test_run_sh_installs_a_bundle_once_its_parts_came_in_separate_calls(device_root, tmp_path):
    parts = _bundle_parts(tmp_path, "demo", 2)
    first = _device_call(device_root, tmp_path, "demo", {"demo.tar.part1": parts[1]})
    assert "bundle demo: 1 of 2 parts here; missing part0" in first
    assert not (tmp_path / "site" / "preflight_demo").exists()
    second = _device_call(device_root, tmp_path, "demo", {"demo.tar.part0": parts[0]})
    assert "bundle demo: all 2 parts here" in second and "bundle demo: installing preflight_demo" in second
    assert (tmp_path / "site" / "preflight_demo" / "__init__.py").read_text() == "VALUE = 42\n"
    assert "bundle demo: installed" in _device_call(device_root, tmp_path, "demo", {})
    assert (tmp_path / "out" / "steppart.log").is_file()


def test_run_sh_refuses_a_bundle_whose_parts_do_not_match_the_checksum(device_root, tmp_path):
    parts = _bundle_parts(tmp_path, "demo", 2)
    _device_call(device_root, tmp_path, "demo", {"demo.tar.part0": parts[0]})
    out = _device_call(device_root, tmp_path, "demo", {"demo.tar.part1": bytes([parts[1][0] ^ 1]) + parts[1][1:]})
    assert "bundle demo: the checksum does not match" in out
    assert not (tmp_path / "site" / "preflight_demo").exists()


def test_run_sh_rejects_an_unknown_step():
    result = subprocess.run(["bash", str(BENCH / "gpu_session" / "run.sh"), "6"], capture_output=True, text=True)
    assert result.returncode == 2 and "STEP: 1, 2, 3, 4, 5, part, extras" in result.stderr
