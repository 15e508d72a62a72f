"""libx264 is held to its AVX2 code on CPUs with AVX-512 (whose x264 code reads memory it never
wrote, so the same frames gave different bytes); elsewhere its options are left as given."""

from __future__ import annotations

from vfm_plugins import x264
from vfm_plugins.x264 import x264_asm, x264_options


def test_x264_keeps_to_avx2_only_where_the_cpu_has_avx512(tmp_path):
    with_avx512, without, elsewhere = tmp_path / "a", tmp_path / "b", tmp_path / "missing"
    with_avx512.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 bmi2 avx512f avx512bw\n")
    without.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 bmi2\n")
    assert x264_asm(str(with_avx512)) == "AVX2"
    assert x264_asm(str(without)) is None
    assert x264_asm(str(elsewhere)) is None  # not Linux: libx264's own choice


def test_the_asm_level_joins_the_x264_params_given(monkeypatch):
    monkeypatch.setattr(x264, "x264_asm", lambda: "AVX2")
    assert x264_options({"crf": "18"}) == {"crf": "18", "x264-params": "asm=AVX2"}
    assert x264_options({"x264-params": "keyint=8"})["x264-params"] == "keyint=8:asm=AVX2"
    monkeypatch.setattr(x264, "x264_asm", lambda: None)
    assert x264_options({"crf": "18"}) == {"crf": "18"}
