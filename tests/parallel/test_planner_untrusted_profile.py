"""A hardware profile TOML handed to ``vfm plan --gpu FILE`` (someone's calibration) is data: a number
that is not finite (TOML's ``nan`` and ``inf``) or a document nested too deep to read is refused
naming the file and the key; a NaN peak made every layout's time NaN and the table's winner an
arbitrary one, printed as ``best``."""

from __future__ import annotations

import pytest

from vfm_parallel.planner import ProfileError, load_profile
from vfm_parallel.planner.hardware import PROFILES_DIR


def _profile(tmp_path, old: str, new: str):
    text = (PROFILES_DIR / "h100.toml").read_text()
    assert old in text
    path = tmp_path / "mine.toml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize("value", ["nan", "inf", "+inf", "-nan"])
@pytest.mark.parametrize("key", ["peak_bf16_tflops", "memory_gib", "calibration.matmul_efficiency",
                                 "calibration.kernel_overhead_us"])
def test_a_profile_number_that_is_not_finite_is_refused_naming_the_file_and_the_key(tmp_path, key, value):
    name = key.rpartition(".")[2]
    old = {"peak_bf16_tflops": "peak_bf16_tflops = 989.4", "memory_gib": "memory_gib = 79.6",
           "matmul_efficiency": "matmul_efficiency = 0.7", "kernel_overhead_us": "kernel_overhead_us = 5.0"}[name]
    path = _profile(tmp_path, old, f"{name} = {value}")
    with pytest.raises(ProfileError, match=rf"{path}: '{key}' must be a (positive|finite|non-negative).*number.* got {value.lstrip('+-')}"):
        load_profile(path)


def test_a_profile_nested_too_deep_to_read_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "deep.toml"
    path.write_text("name = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ProfileError, match=rf"{path} is not valid TOML: .*nested too deep"):
        load_profile(path)


def test_the_shipped_profiles_still_load():
    assert load_profile("h100").peak_bf16_tflops == 989.4
