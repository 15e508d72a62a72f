"""Every package builds the normal way and installs from what it builds.

``python -m build`` makes the sdist, then the wheel *from the sdist*, so a file the sdist misses (or
a symbolic link that dangles once packed) fails here. The seven wheels are then installed with
``--no-deps`` into a fresh virtual environment; their third-party dependencies (torch, pluggy, ...)
come from this test environment through a ``.pth`` line, so nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())
LIBRARIES = ("vfm-models", "vfm-parallel", "vfm-data", "vfm-curator", "vfm-infer")


def _module(package: Path) -> str:
    return package.name.replace("-", "_")


def _run(*cmd, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    for package in PACKAGES:
        # --no-isolation: build with this environment's hatchling instead of downloading one
        _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, package)
    return out


def _wheel(dist: Path, package: Path) -> Path:
    (wheel,) = dist.glob(f"{_module(package)}-*.whl")
    return wheel


def test_every_package_is_listed_in_the_workspace():
    hatch = (ROOT / "hatch.toml").read_text()
    assert [p.name for p in PACKAGES] == sorted(f"vfm-{n}" for n in ("cli", "curator", "data", "infer", "models", "parallel", "plugins"))
    for package in PACKAGES:
        assert f'"packages/{package.name}"' in hatch, f"{package.name} is missing from hatch.toml's workspace"


@pytest.mark.slow
def test_each_sdist_holds_the_sources_and_its_wheel_every_module_and_data_file(dist):
    for package in PACKAGES:
        src = package / "src" / _module(package)
        # the modules and the package data (each host's plugins.toml: its kinds and built-ins)
        modules = {p.relative_to(src.parent).as_posix() for p in src.rglob("*")
                   if p.suffix in (".py", ".toml") and "__pycache__" not in p.parts}
        if package.name in LIBRARIES:
            assert f"{_module(package)}/plugins.toml" in modules, package.name
        (sdist,) = dist.glob(f"{_module(package)}-*.tar.gz")
        with tarfile.open(sdist) as tar:
            names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        assert {"pyproject.toml", "README.md"} <= names, sdist.name
        assert {f"src/{m}" for m in modules} <= names, sdist.name
        with zipfile.ZipFile(_wheel(dist, package)) as wheel:
            assert modules <= set(wheel.namelist()), f"{package.name}: missing {sorted(modules - set(wheel.namelist()))}"


@pytest.mark.slow
def test_libraries_depend_on_the_plugin_kit_and_models_and_parallel_not_on_each_other(dist):
    requires = {}
    for package in PACKAGES:
        with zipfile.ZipFile(_wheel(dist, package)) as wheel:
            (meta,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
            message = Parser().parsestr(wheel.read(meta).decode())
        requires[package.name] = {Requirement(r).name for r in message.get_all("Requires-Dist") or []}
        assert message["Requires-Python"] == ">=3.11", package.name
    for name in LIBRARIES:
        assert "vfm-plugins" in requires[name], name
    assert "vfm-parallel" not in requires["vfm-models"] and "vfm-models" not in requires["vfm-parallel"]
    ours = {p.name for p in PACKAGES}
    for name, reqs in requires.items():
        assert {r for r in reqs if r.startswith("vfm-")} <= ours, name


@pytest.mark.slow
def test_the_wheels_install_into_a_fresh_venv_and_run_from_there(dist, tmp_path):
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    wheels = [_wheel(dist, p) for p in PACKAGES]
    _run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", *wheels)
    # Third-party dependencies from this environment, after the venv's own site-packages. Its
    # .pth files (the editable vfm installs) are not read: the folder is not a site directory.
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    here = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site / "_test_dependencies.pth").write_text("\n".join(here) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}

    check = f"""
import importlib, importlib.metadata as md, json
site = {str(site)!r}
for module in {[_module(p) for p in PACKAGES]!r}:
    m = importlib.import_module(module)
    assert m.__file__.startswith(site), (module, m.__file__)
    assert md.version(module.replace("_", "-")) == m.__version__, module
"""
    _run(python, "-c", check, env=env, cwd=tmp_path)
    _run(venv / "bin" / "vfm", "--help", env=env, cwd=tmp_path)
    rows = json.loads(_run(venv / "bin" / "vfm", "plugins", "--json", env=env, cwd=tmp_path).stdout)
    assert {r["host"] for r in rows} == {name.replace("-", "_") for name in LIBRARIES}
    assert all(r["status"] == "ok" for r in rows), [r for r in rows if r["status"] != "ok"]
    # every built-in's lazy "module:attr" target is a module inside the installed wheels
    targets = _run(python, "-c", (
        "import json; from vfm_cli.hosts import all_hosts; "
        "print(json.dumps([e.target for h in all_hosts() for k in h.kinds for e in h.entries(k).values() "
        "if isinstance(e.target, str)]))"), env=env, cwd=tmp_path).stdout
    for target in json.loads(targets):
        path = site / target.split(":")[0].replace(".", "/")
        assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), target


def test_no_symbolic_links_in_the_repository():
    try:  # tracked files and untracked ones that are not ignored, as they are in the working tree
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    assert [f for f in files if (ROOT / f).is_symlink()] == []


#: third-party modules a library needs without importing them itself, and why
INDIRECT_NEEDS = {
    # torch.distributed.checkpoint's HuggingFaceStorageWriter/Reader (vfm_parallel.checkpoint) import it:
    # without it every checkpoint save failed ("No module named 'safetensors'")
    "vfm-parallel": {"safetensors"},
}

#: distributions of modules that may not be installed here (optional GPU libraries), whose module name
#: is not their distribution's; added to what is installed (a CUDA torch puts nvidia-cublas-cu12 and
#: others in the same ``nvidia`` namespace)
NOT_INSTALLED = {"nvidia": ["nvidia-dali-cuda120", "nvidia-dali-cuda130"]}


def _imported_modules(src: Path) -> set[str]:
    """Top-level names of every absolute import in ``src``, lazy ones inside functions included."""
    import ast

    names = set()
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("name", [p.name for p in PACKAGES])
def test_each_library_declares_every_third_party_module_it_imports(name):
    """``pip install vfm-models vfm-parallel`` is a user's whole install: a module reached only through
    another package's dependencies (or not at all) breaks when that package drops it."""
    import importlib.metadata as md
    import tomllib

    package = ROOT / "packages" / name
    project = tomllib.loads((package / "pyproject.toml").read_text())["project"]
    canonical = lambda n: n.lower().replace("_", "-")  # noqa: E731
    declared = {canonical(Requirement(r).name) for r in project["dependencies"]}
    declared |= {canonical(Requirement(r).name) for reqs in project.get("optional-dependencies", {}).values()
                 for r in reqs}
    installed = md.packages_distributions()
    distributions = {m: [*installed.get(m, []), *NOT_INSTALLED.get(m, [])] for m in {*installed, *NOT_INSTALLED}}
    needed = {m for m in _imported_modules(package / "src") if m not in sys.stdlib_module_names}
    needed -= {_module(package)}
    missing = sorted(m for m in needed | INDIRECT_NEEDS.get(name, set())
                     if not {canonical(d) for d in distributions.get(m, [m])} & declared)
    assert not missing, f"{name} imports {missing} but its pyproject.toml declares none of them"
