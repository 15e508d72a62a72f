"""Shot detectors as a plugin kind: the adaptive rule (PySceneDetect's AdaptiveDetector definition
on our content score), TransNet V2 in torch (shapes, the reference's windowing, safetensors
weights), and a detector chosen by name running through the curate pipeline on real H264."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

import vfm_curator
from vfm_curator.io.video import iter_frames
from vfm_curator.plugins import host
from vfm_curator.shot_detectors import apply_shot_options, build_detector
from vfm_curator.shot_detectors.content import adaptive_cuts, adaptive_ratios, detect_cuts
from vfm_curator.shot_detectors.spans import limit_lengths, shots_from_transitions
from vfm_curator.shot_detectors.transnetv2 import (
    TransNetV2Detector, load_weights, padded_windows, save_weights,
)
from vfm_curator.shot_detectors.transnetv2_model import TransNetV2
from vfm_curator.config import CurateConfig
from vfm_curator.stages.decode import DecodeStage
from vfm_curator.stages.split import SplitStage
from vfm_curator.synth import make_video
from vfm_curator.tasks import VideoTask


def test_shot_detectors_are_a_plugin_kind_with_the_three_built_ins():
    assert {"content", "adaptive", "transnetv2"} <= set(host.names("shot_detectors"))
    assert build_detector("adaptive", {"window_width": 3}).opt["window_width"] == 3
    with pytest.raises(KeyError, match="unknown shot detector 'nope'; available: adaptive, content, transnetv2"):
        build_detector("nope")


# --- adaptive: the documented definition ------------------------------------------------------

def test_adaptive_ratio_is_the_score_over_the_mean_of_its_neighbours_capped_at_255():
    scores = np.array([0, 10, 10, 50, 10, 10, 10, 0, 0, 20, 0, 0, 0, 5, 0, 0], np.float32)
    r = adaptive_ratios(scores, window_width=2, min_content_val=15.0)
    assert r[3] == pytest.approx(50 / 10)  # neighbours 10, 10, 10, 10
    assert r[4] == pytest.approx(10 / ((10 + 50 + 10 + 10) / 4))
    assert r[9] == 255.0  # every neighbour 0 and the score reaches min_content_val
    assert r[13] == 0.0  # every neighbour 0 but the score is under min_content_val
    assert r[0] == r[1] == r[-1] == r[-2] == 0.0  # no full window: never judged
    assert adaptive_ratios(np.array([0, 1e-3, 1e-3, 900, 1e-3, 1e-3, 1e-3]), window_width=2)[3] == 255.0  # capped


def test_adaptive_ignores_fast_motion_that_the_fixed_threshold_cuts():
    scores = np.full(60, 40.0, np.float32)  # fast camera motion: every frame changes a lot
    scores[0] = 0.0
    scores[30] = 160.0  # a cut stands out from its neighbours
    assert len(detect_cuts(scores, threshold=27.0, min_shot=6)) > 5
    assert adaptive_cuts(scores, adaptive_threshold=3.0, min_shot=6) == [30]
    assert adaptive_cuts(scores, adaptive_threshold=4.5, min_shot=6) == []  # 160 / 40 = 4 < 4.5


def test_adaptive_spacing_counts_from_the_last_cut_to_the_newest_frame_seen():
    scores = np.zeros(40, np.float32)
    scores[[10, 14]] = 100.0
    # 14 is judged when frame 14 + window_width = 16 arrives: 16 - 10 = 6 frames after the last cut
    assert adaptive_cuts(scores, window_width=2, min_shot=6) == [10, 14]
    assert adaptive_cuts(scores, window_width=2, min_shot=7) == [10]


def test_adaptive_detector_finds_the_known_cuts_of_h264_videos_through_the_split_stage(tmp_path):
    for seed in range(3):
        path = tmp_path / f"v{seed}.mp4"
        truth = make_video(path, [30, 26, 41, 33], seed=seed, speed=2.0)
        task = VideoTask(str(path))
        DecodeStage().process([task])
        SplitStage(method="adaptive", min_clip_s=0.1).process([task])
        assert task.failure is None, task.failure
        assert task.meta["cuts"] == truth


def test_apply_shot_options_sets_the_split_method_and_parses_values():
    cfg = CurateConfig.from_dict({"options": {"split": {"threshold": 20.0}}})
    apply_shot_options(cfg, "adaptive", ["adaptive_threshold=2.5", "window_width=3"])
    assert cfg.options["split"] == {"method": "adaptive", "detector_options": {"adaptive_threshold": 2.5, "window_width": 3}}
    apply_shot_options(cfg, None, ["weights=/models/t.safetensors"])  # not JSON: kept as text
    assert cfg.options["split"]["detector_options"]["weights"] == "/models/t.safetensors"
    with pytest.raises(ValueError, match="KEY=VALUE"):
        apply_shot_options(cfg, None, ["novalue"])
    apply_shot_options(cfg, "stride", ["stride_s=2"])
    assert cfg.options["split"] == {"method": "stride", "stride_s": 2}
    with pytest.raises(ValueError, match="the stride method takes only stride_s"):
        apply_shot_options(cfg, "stride", ["threshold=3"])
    with pytest.raises(ValueError, match="method 'stride' uses no shot detector, so detector_options must be empty"):
        SplitStage(method="stride", detector_options={"threshold": 3})


# --- TransNet V2 ---------------------------------------------------------------------------------

def _reference_keys() -> dict[str, tuple[int, ...]]:
    """The state-dict names and shapes of the authors' PyTorch port (transnetv2_pytorch.py with its
    defaults F=16, L=3, S=2, D=1024), written out from its layer structure."""
    keys: dict[str, tuple[int, ...]] = {}
    in_ch = 3
    for i, f in enumerate((16, 32, 64)):
        for j in range(2):
            cin = in_ch if j == 0 else 4 * f
            for d in (1, 2, 4, 8):
                keys[f"SDDCNN.{i}.DDCNN.{j}.Conv3D_{d}.layers.0.weight"] = (2 * f, cin, 1, 3, 3)
                keys[f"SDDCNN.{i}.DDCNN.{j}.Conv3D_{d}.layers.1.weight"] = (f, 2 * f, 3, 1, 1)
            for name in ("weight", "bias", "running_mean", "running_var"):
                keys[f"SDDCNN.{i}.DDCNN.{j}.bn.{name}"] = (4 * f,)
            keys[f"SDDCNN.{i}.DDCNN.{j}.bn.num_batches_tracked"] = ()
        in_ch = 4 * f
    keys |= {"frame_sim_layer.projection.weight": (128, 448), "frame_sim_layer.projection.bias": (128,),
             "frame_sim_layer.fc.weight": (128, 101), "frame_sim_layer.fc.bias": (128,),
             "color_hist_layer.fc.weight": (128, 101), "color_hist_layer.fc.bias": (128,),
             "fc1.weight": (1024, 4864), "fc1.bias": (1024,), "cls_layer1.weight": (1, 1024), "cls_layer1.bias": (1,),
             "cls_layer2.weight": (1, 1024), "cls_layer2.bias": (1,)}
    return keys


def test_transnetv2_has_the_reference_parameter_names_and_shapes():
    ours = {k: tuple(v.shape) for k, v in TransNetV2().state_dict().items()}
    assert ours == _reference_keys()


def test_transnetv2_maps_uint8_windows_to_two_heads_per_frame_and_refuses_other_input():
    model = TransNetV2(filters=4, dense=32)
    x = torch.randint(0, 256, (2, 30, 27, 48, 3), dtype=torch.uint8)
    with torch.inference_mode():
        one, many = model(x)
        assert one.shape == many.shape == (2, 30, 1)
        # windows of a batch are independent (eval mode): the second alone gives the same
        alone, _ = model(x[1:])
    torch.testing.assert_close(one[1:], alone, atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match=r"\(B, T, 27, 48, 3\) uint8"):
        model(x.float())
    with pytest.raises(ValueError, match=r"\(B, T, 27, 48, 3\) uint8"):
        model(torch.zeros(1, 5, 48, 27, 3, dtype=torch.uint8))


def _reference_padded(frames: np.ndarray) -> np.ndarray:
    """The reference inference's padding: 25 copies of the first frame before, and after the video
    copies of the last frame up to the next multiple of 50 plus 25."""
    n = len(frames)
    tail = 25 + 50 - (n % 50 if n % 50 else 50)
    return np.concatenate([frames[:1]] * 25 + [frames] + [frames[-1:]] * tail)


@pytest.mark.parametrize("n", [1, 10, 49, 50, 51, 75, 100, 120, 173])
def test_streamed_windows_are_the_reference_windows(n):
    frames = np.random.default_rng(n).integers(0, 256, (n, 27, 48, 3), dtype=np.uint8)
    padded = _reference_padded(frames)
    expected = [padded[p:p + 100] for p in range(0, len(padded) - 99, 50)]
    got = list(padded_windows(iter(frames)))
    assert len(got) == len(expected)
    for (window, keep), ref in zip(got, expected):
        np.testing.assert_array_equal(window, ref)
    assert sum(keep for _, keep in got) == n


def test_batched_streaming_prediction_equals_the_reference_one_window_at_a_time():
    torch.manual_seed(0)
    model = TransNetV2(filters=4, dense=32).eval()
    frames = np.random.default_rng(1).integers(0, 256, (173, 27, 48, 3), dtype=np.uint8)
    padded = _reference_padded(frames)
    expected = []
    with torch.inference_mode():
        for p in range(0, len(padded) - 99, 50):
            one, _ = model(torch.from_numpy(padded[p:p + 100][None]))
            expected.append(torch.sigmoid(one)[0, 25:75, 0].numpy())
    expected = np.concatenate(expected)[:173]
    detector = TransNetV2Detector(random_init=True, batch_size=3, device="cpu")
    detector.model, detector.device = model, torch.device("cpu")
    got = detector.frame_scores(iter(frames))
    assert got.shape == (173,)
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_transnetv2_weights_round_trip_through_safetensors_and_wrong_keys_are_refused(tmp_path):
    from safetensors.torch import load_file, save_file

    torch.manual_seed(3)
    model = TransNetV2()
    path = tmp_path / "transnetv2.safetensors"
    save_weights(model, path)
    other = TransNetV2()
    load_weights(other, path)
    for key, value in model.state_dict().items():
        torch.testing.assert_close(other.state_dict()[key], value, rtol=0, atol=0)

    state = load_file(str(path))
    del state["fc1.bias"]
    state["head.extra"] = torch.zeros(3)
    bad = tmp_path / "bad.safetensors"
    save_file(state, str(bad))
    with pytest.raises(ValueError, match=r"bad\.safetensors do not fit the network: missing keys \(1\): fc1\.bias; "
                                         r"unexpected keys \(1\): head\.extra"):
        load_weights(TransNetV2(), bad)

    state = load_file(str(path))
    state["cls_layer2.weight"] = torch.zeros(2, 1024)
    save_file(state, str(bad))
    with pytest.raises(ValueError, match=r"wrong shapes \(1\): cls_layer2\.weight \(2, 1024\) \(expected \(1, 1024\)\)"):
        load_weights(TransNetV2(), bad)

    # num_batches_tracked counters (unused at inference) may be missing from a conversion
    state = {k: v for k, v in load_file(str(path)).items() if not k.endswith("num_batches_tracked")}
    save_file(state, str(bad))
    load_weights(TransNetV2(), bad)

    with pytest.raises(ValueError, match="pickled checkpoints are not loaded; accepted: a .safetensors"):
        load_weights(TransNetV2(), tmp_path / "transnetv2-pytorch-weights.pth")
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="junk.safetensors: not a readable safetensors file"):
        load_weights(TransNetV2(), tmp_path / "junk.safetensors")


def test_transnetv2_options_are_checked_when_the_split_stage_is_built(tmp_path):
    with pytest.raises(ValueError, match="needs weights: a local .safetensors file"):
        SplitStage(method="transnetv2")
    with pytest.raises(ValueError, match="is not a .safetensors file"):
        SplitStage(method="transnetv2", detector_options={"weights": str(tmp_path / "missing.safetensors")})
    with pytest.raises(ValueError, match="option threshold = 1.5 is out of range"):
        SplitStage(method="transnetv2", detector_options={"random_init": True, "threshold": 1.5})
    with pytest.raises(ValueError, match="device = 'tpu'; accepted: auto, cpu, cuda, cuda:N"):
        SplitStage(method="transnetv2", detector_options={"random_init": True, "device": "tpu"})
    from safetensors.torch import save_file

    bad = tmp_path / "other-net.safetensors"
    save_file({"fc1.weight": torch.zeros(4, 4)}, str(bad))
    with pytest.raises(ValueError, match=r"stage 'split': TransNetV2 weights .*other-net.safetensors do not fit the "
                                         r"network: missing keys \(83\).*wrong shapes \(1\): fc1.weight \(4, 4\)"):
        SplitStage(method="transnetv2", detector_options={"weights": str(bad)})  # refused in the driver
    stage = SplitStage(method="transnetv2", detector_options={"random_init": True, "device": "cpu"})
    assert stage.configured_resources.gpus == 0 and stage.configured_resources.memory_mb > SplitStage.resources.memory_mb


def test_transnetv2_through_the_curate_pipeline_gives_the_scenes_of_its_predictions(tmp_path):
    video = tmp_path / "in" / "v.mp4"
    make_video(video, [22, 28], seed=4)  # 50 frames: one window of the network
    detector = TransNetV2Detector(random_init=True, device="cpu")
    detector.setup()
    frames = [f for _, f in iter_frames(str(video), width=48, height=27)]
    predictions = detector.frame_scores(iter(frames))
    assert predictions.shape == (50,) and np.all((predictions >= 0) & (predictions <= 1))
    # random weights: choose the threshold that flags the three highest frames, so there are cuts
    top = np.sort(predictions)[::-1]
    threshold = float((top[2] + top[3]) / 2)
    expected = limit_lengths(shots_from_transitions(predictions > threshold), min_len=6, max_len=480)
    assert len(expected) >= 2

    out = tmp_path / "out"
    summary = vfm_curator.curate([str(video.parent)], out, {
        "stages": ["decode", "split", "transcode", "write"],
        "run": {"runner": "serial"},
        "options": {"split": {"method": "transnetv2", "min_clip_s": 0.25,
                              "detector_options": {"random_init": True, "threshold": threshold, "device": "cpu"}}},
    })
    assert summary.failures == 0
    table = pq.read_table(out / "clips.parquet").to_pydict()
    spans = list(zip(table["start_frame"], table["end_frame"]))
    assert spans == expected
    assert all(0 <= a < b <= 50 for a, b in spans) and all(b1 <= a2 for (_, b1), (a2, _) in zip(spans, spans[1:]))


def test_vfm_curate_shot_detector_option_and_vfm_plugins_listing(tmp_path):
    import json
    import subprocess
    import sys

    from typer.testing import CliRunner

    from vfm_cli.main import app

    make_video(tmp_path / "in" / "v.mp4", [30, 26, 41], seed=2, speed=2.0)
    out = tmp_path / "out"
    args = ["curate", str(tmp_path / "in"), "-o", str(out), "--runner", "serial", "--no-progress",
            "--shot-detector", "adaptive", "--shot-option", "min_content_val=1000"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    # the content detector would cut at 30 and 56; adaptive with a score floor of 1000 cuts nowhere
    table = pq.read_table(out / "clips.parquet").to_pydict()
    assert list(zip(table["start_frame"], table["end_frame"])) == [(0, 97)]
    bad = CliRunner().invoke(app, [*args[:4], str(tmp_path / "o2"), "--shot-detector", "adaptive",
                                   "--shot-option", "window_width=0"])
    assert bad.exit_code == 2 and "window_width = 0 is out of range" in bad.output

    listed = subprocess.run([sys.executable, "-m", "vfm_cli.main", "plugins", "--json", "--kind", "shot_detectors"],
                            capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    rows = {(r["host"], r["name"]) for r in json.loads(listed.stdout)}
    assert {("vfm_curator", "content"), ("vfm_curator", "adaptive"), ("vfm_curator", "transnetv2")} <= rows


def test_the_split_stage_asks_for_what_its_detector_needs(tmp_path):
    from vfm_curator.pipelines.clipping import stage_specs

    plain = {s.name: s for s in stage_specs(CurateConfig.from_dict({"stages": ["decode", "split", "write"]}), tmp_path)}
    assert plain["split"].declared() == SplitStage.resources  # content: the class's half CPU
    cfg = CurateConfig.from_dict({"stages": ["decode", "split", "write"], "options": {"split": {
        "method": "transnetv2", "detector_options": {"random_init": True, "device": "cpu"}}}})
    split = {s.name: s for s in stage_specs(cfg, tmp_path)}["split"]
    assert (split.declared().cpus, split.declared().gpus, split.declared().memory_mb) == (1.0, 0.0, 3072)
