"""Hardware profiles as data: peak FLOP/s, memory and bandwidths of one GPU kind, plus the few
calibrated constants the time model uses. Built-ins live in ``profiles/<name>.toml``; ``vfm plan
--calibrate`` writes the same format from measurements on the present machine.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vfm_plugins.text import did_you_mean

PROFILES_DIR = Path(__file__).with_name("profiles")


class ProfileError(ValueError):
    """A hardware profile that is missing, unreadable or has a wrong value."""


@dataclass(frozen=True)
class Calibration:
    """Global constants of the time model, fitted once (never per layout or per table row)."""

    #: Achieved fraction of peak FLOP/s of the linear layers' matmuls (6 N per token).
    matmul_efficiency: float = 0.6
    #: Achieved fraction of peak FLOP/s of the attention products (12 L h S per token).
    attention_efficiency: float = 0.5
    #: Fraction of tensor-parallel (SP all-gather / reduce-scatter) time hidden behind compute.
    tp_overlap: float = 0.0
    #: Fraction of a collective's volume that the data-parallel (FSDP/DDP) prefetch hides, at most.
    dp_overlap: float = 0.9
    #: Fixed cost per kernel (launch gap and the tail of small kernels), microseconds.
    kernel_overhead_us: float = 5.0
    #: Weight of the HBM term in the GEMM / attention shape roofline (1 = the minimal bytes moved).
    gemm_roofline: float = 1.0
    #: Activation memory as a multiple of the counted bytes (allocator fragmentation, temporaries).
    activation_overhead: float = 1.0
    source: str = ""


@dataclass(frozen=True)
class HardwareProfile:
    name: str
    description: str
    peak_bf16_tflops: float
    peak_fp8_tflops: float
    memory_gib: float
    #: Memory the framework cannot use (CUDA context, NCCL buffers, allocator fragmentation).
    reserved_gib: float
    hbm_gbps: float
    #: One direction, per GPU, inside a node (NVLink / NVSwitch), as collectives achieve it.
    intra_node_gbps: float
    #: One direction, per GPU, between nodes (InfiniBand / RoCE NIC per GPU), as collectives achieve it.
    inter_node_gbps: float
    gpus_per_node: int = 8
    #: The kind of device the figures describe, ``"cuda"`` or ``"cpu"``: what ``vfm plan --calibrate``
    #: checks against the device it would measure (a GPU's memory and NVLink figures beside a CPU's
    #: measured peak plan neither). ``--calibrate`` writes the device it measured; a file without the
    #: key (written before it) is read as :func:`_device_before_the_key` says.
    device: str = "cuda"
    #: Fixed cost of one collective call (launch + latency), microseconds.
    collective_latency_us: float = 20.0
    calibration: Calibration = field(default_factory=Calibration)
    path: str = ""

    @property
    def peak_flops(self) -> float:
        return self.peak_bf16_tflops * 1e12

    @property
    def usable_bytes(self) -> float:
        return (self.memory_gib - self.reserved_gib) * 2**30

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("path")
        return data


#: The kinds of device a profile describes (its ``device``).
DEVICES = ("cuda", "cpu")

_REQUIRED = ("name", "peak_bf16_tflops", "memory_gib", "intra_node_gbps", "inter_node_gbps")


#: Calibration constants that are shares of a collective's time (0 to 1); the efficiencies must be
#: above 0 (a calibrated one may exceed 1 where the machine beats the base profile's datasheet peak).
_SHARES = ("tp_overlap", "dp_overlap")
_POSITIVE = ("matmul_efficiency", "attention_efficiency", "activation_overhead")


def from_dict(data: dict[str, Any], where: str = "<profile>") -> HardwareProfile:
    """A profile from TOML-shaped dicts; unknown keys and non-positive numbers are errors naming the key."""
    known = {f.name for f in dataclasses.fields(HardwareProfile)} - {"path"}
    unknown = sorted(set(data) - known)
    if unknown:  # before the missing keys: a misspelt key is both, and its spelling is the problem
        raise ProfileError(f"{where}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], known, quote=True)}; "
                           f"accepted: {', '.join(sorted(known))}")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ProfileError(f"{where}: missing key(s) {', '.join(missing)}; a profile needs {', '.join(_REQUIRED)}")
    values = dict(data)
    cal = values.pop("calibration", {}) or {}
    if not isinstance(cal, dict):
        raise ProfileError(f"{where}: 'calibration' must be a table ([calibration]), got {cal!r}")
    cal_known = {f.name for f in dataclasses.fields(Calibration)}
    bad = sorted(set(cal) - cal_known)
    if bad:
        raise ProfileError(f"{where}: unknown key 'calibration.{bad[0]}'{did_you_mean(bad[0], cal_known, quote=True)}; "
                           f"accepted: {', '.join(sorted(cal_known))}")
    values.setdefault("device", _device_before_the_key(values["name"], cal.get("source", "")))
    if values["device"] not in DEVICES:
        raise ProfileError(f"{where}: 'device' must be one of {', '.join(map(repr, DEVICES))} (the kind of device the "
                           f"profile describes), got {values['device']!r}")
    for key, value in values.items():
        if key == "device":
            continue
        if key in ("name", "description"):
            if not isinstance(value, str) or (key == "name" and not value):
                raise ProfileError(f"{where}: '{key}' must be a non-empty string, got {value!r}")
            continue
        # TOML reads nan and inf as floats: a NaN peak made every layout's time NaN and any one the winner
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 \
                or (value == 0 and key != "reserved_gib"):
            raise ProfileError(f"{where}: '{key}' must be a positive finite number, got {value!r}")
    if "gpus_per_node" in values and (not isinstance(values["gpus_per_node"], int)):
        raise ProfileError(f"{where}: 'gpus_per_node' must be a whole number of GPUs >= 1, got {values['gpus_per_node']!r}")
    for key, value in cal.items():
        name = f"calibration.{key}"
        if key == "source":
            if not isinstance(value, str):
                raise ProfileError(f"{where}: '{name}' must be a string, got {value!r}")
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ProfileError(f"{where}: '{name}' must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ProfileError(f"{where}: '{name}' must be a finite number, got {value!r}")
        if key in _SHARES and not 0 <= value <= 1:
            raise ProfileError(f"{where}: '{name}' must be a share from 0 to 1, got {value!r}")
        if key in _POSITIVE and not value > 0:
            raise ProfileError(f"{where}: '{name}' must be a positive number, got {value!r}")
        if value < 0:
            raise ProfileError(f"{where}: '{name}' must be a non-negative number, got {value!r}")
    values.setdefault("description", values["name"])
    values.setdefault("peak_fp8_tflops", 2 * values["peak_bf16_tflops"])
    values.setdefault("reserved_gib", 0.0)
    values.setdefault("hbm_gbps", 1000.0)
    if values.get("reserved_gib", 0) >= values["memory_gib"]:
        raise ProfileError(f"{where}: 'reserved_gib' ({values['reserved_gib']}) must be less than 'memory_gib' ({values['memory_gib']})")
    return HardwareProfile(**values, calibration=Calibration(**cal), path=where)


def _device_before_the_key(name: str, source: Any) -> str:
    """The device of a profile written before profiles said it: a CPU's where older versions took it
    for one (its name, ``cpu`` or ``cpu-calibrated``) or where ``--calibrate`` measured a CPU (its
    ``calibration.source``), else a GPU's, as every other built-in profile was."""
    measured_cpu = isinstance(source, str) and source.startswith("vfm plan --calibrate on cpu")
    named_cpu = isinstance(name, str) and name.removesuffix("-calibrated") == "cpu"
    return "cpu" if measured_cpu or named_cpu else "cuda"


def available() -> list[str]:
    """Names of the built-in profiles."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.toml"))


def load_profile(name_or_path: str | Path) -> HardwareProfile:
    """A built-in profile by name (``h100``, ``h200``, ``a100``) or a profile TOML file by path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = PROFILES_DIR / f"{name_or_path}.toml"
        if not path.is_file():
            raise ProfileError(f"unknown GPU profile {str(name_or_path)!r}; available: {', '.join(available())} "
                               "(or a path to a profile .toml, e.g. one written by vfm plan --calibrate)")
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ProfileError(f"no profile file at {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path} is not valid TOML: {exc}") from None
    except RecursionError:  # tomllib's own error for arrays nested past Python's recursion limit
        raise ProfileError(f"{path} is not valid TOML: arrays or tables nested too deep to read; accepted: a profile "
                           "as vfm plan --calibrate writes it (keys and numbers, one [calibration] table)") from None
    return from_dict(data, str(path))


def to_toml(profile: HardwareProfile, comment: str = "") -> str:
    """The profile as TOML (the format ``load_profile`` reads)."""
    lines = [f"# {line}" for line in comment.splitlines()] if comment else []
    data = profile.to_dict()
    cal = data.pop("calibration")
    for key, value in data.items():
        lines.append(f"{key} = {_toml_value(value)}")
    lines.append("")
    lines.append("[calibration]")
    for key, value in cal.items():
        lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
    return f'"{text}"'
