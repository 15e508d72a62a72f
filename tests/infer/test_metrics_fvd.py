"""``fvd``: the Fréchet distance against closed forms, the I3D in the public port's layout, and the metric end
to end on real H264 files with a narrow random-init I3D, its reference statistics cached and invalidated."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import torch

from tests.infer.metric_models import moving_square, tiny_i3d_weights, write_videos
from vfm_infer.metrics import EvalItem
from vfm_infer.metrics.base import load_metric
from vfm_infer.metrics.frechet import GaussianStats, frechet_distance, trace_sqrt_product
from vfm_infer.metrics.fvd import FrechetVideoDistance, SmallSampleWarning, clip_frame_indices, i3d_clip
from vfm_infer.metrics.i3d import InceptionI3d, load_weights, network_for


def _random_cov(rng, d):
    a = rng.normal(size=(d, d))
    return a @ a.T + 0.1 * np.eye(d)


def test_frechet_distance_matches_the_closed_form_for_gaussians():
    rng = np.random.default_rng(0)
    # diagonal covariances commute: d^2 = |mu1 - mu2|^2 + sum (sqrt(a_i) - sqrt(b_i))^2
    a, b = rng.uniform(0.1, 3, 6), rng.uniform(0.1, 3, 6)
    mu1, mu2 = rng.normal(size=6), rng.normal(size=6)
    expected = np.sum((mu1 - mu2) ** 2) + np.sum((np.sqrt(a) - np.sqrt(b)) ** 2)
    assert frechet_distance(mu1, np.diag(a), mu2, np.diag(b)) == pytest.approx(expected, rel=1e-12)
    # 2x2 covariances that do not commute: tr (S1 S2)^(1/2) = sqrt(tr M + 2 sqrt(det M)), M = S1 S2
    s1, s2 = np.array([[2.0, 0.8], [0.8, 1.0]]), np.array([[1.0, -0.5], [-0.5, 3.0]])
    m = s1 @ s2
    assert not np.allclose(m, m.T)
    closed = np.sqrt(np.trace(m) + 2 * np.sqrt(np.linalg.det(m)))
    assert trace_sqrt_product(s1, s2) == pytest.approx(closed, rel=1e-12)
    mu = np.array([1.0, -2.0])
    assert frechet_distance(mu, s1, np.zeros(2), s2) == pytest.approx(5 + np.trace(s1) + np.trace(s2) - 2 * closed, rel=1e-12)
    # one-dimensional Gaussians: (mu1 - mu2)^2 + (s1 - s2)^2
    assert frechet_distance([3.0], [[4.0]], [1.0], [[9.0]]) == pytest.approx(4 + 1)


def test_frechet_distance_agrees_with_scipy_sqrtm_on_full_rank_covariances():
    linalg = pytest.importorskip("scipy.linalg")
    rng = np.random.default_rng(1)
    s1, s2 = _random_cov(rng, 20), _random_cov(rng, 20)
    reference = np.trace(linalg.sqrtm(s1 @ s2)).real
    assert trace_sqrt_product(s1, s2) == pytest.approx(reference, rel=1e-9)


def test_identical_sets_are_about_zero_also_with_singular_covariances():
    rng = np.random.default_rng(2)
    for n, d in ((500, 16), (10, 64)):  # the second: 10 vectors, covariance of rank 9 in 64 dimensions
        stats = GaussianStats.of(rng.normal(size=(n, d)))
        assert frechet_distance(stats.mu, stats.sigma, stats.mu, stats.sigma) < 1e-9 * np.trace(stats.sigma)
    other = GaussianStats.of(rng.normal(size=(10, 64)) + 1)
    value = frechet_distance(stats.mu, stats.sigma, other.mu, other.sigma)
    assert np.isfinite(value) and value > 0


def test_sample_statistics_of_two_gaussians_approach_the_closed_form():
    rng = np.random.default_rng(3)
    s1, s2 = np.array([[2.0, 0.8], [0.8, 1.0]]), np.array([[1.0, -0.5], [-0.5, 3.0]])
    x = rng.multivariate_normal([1.0, -2.0], s1, size=200_000)
    y = rng.multivariate_normal([0.0, 0.0], s2, size=200_000)
    a, b = GaussianStats.of(x), GaussianStats.of(y)
    assert frechet_distance(a.mu, a.sigma, b.mu, b.sigma) == pytest.approx(frechet_distance([1.0, -2.0], s1, [0, 0], s2), rel=0.01)


def test_i3d_has_the_public_pytorch_ports_layout():
    with torch.device("meta"):
        state = InceptionI3d().state_dict()
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    assert shapes["Conv3d_1a_7x7.conv3d.weight"] == (64, 3, 7, 7, 7)
    assert shapes["Conv3d_1a_7x7.bn.running_var"] == (64,)
    assert shapes["Conv3d_2c_3x3.conv3d.weight"] == (192, 64, 3, 3, 3)
    assert shapes["Mixed_4b.b0.conv3d.weight"] == (192, 480, 1, 1, 1)
    assert shapes["Mixed_5c.b3b.conv3d.weight"] == (128, 832, 1, 1, 1)
    assert shapes["logits.conv3d.weight"] == (400, 1024, 1, 1, 1) and shapes["logits.conv3d.bias"] == (400,)
    assert "logits.bn.weight" not in shapes and "Mixed_3b.b0.conv3d.bias" not in shapes
    assert len([k for k in shapes if k.endswith("conv3d.weight")]) == 3 + 9 * 6 + 1  # stem, six per Inception module, logits


def test_i3d_global_pool_is_the_ports_2x7x7_pool_at_16_frames_of_224():
    torch.manual_seed(0)
    model = InceptionI3d(width=32).eval()
    seen = {}
    model.Mixed_5c.register_forward_hook(lambda _m, _i, out: seen.update(out=out))
    x = torch.rand(1, 3, 16, 224, 224) * 2 - 1
    with torch.no_grad():
        logits = model(x)
    assert seen["out"].shape[2:] == (2, 7, 7)
    ported = torch.nn.AvgPool3d((2, 7, 7), stride=1)(seen["out"])  # pytorch-i3d's pool: one cell at this size
    assert torch.allclose(model.logits(ported).flatten(1), logits, atol=1e-5)


def test_i3d_logits_are_the_ports_2x7x7_pool_averaged_over_time_also_past_16_frames():
    # the TF-Hub module FVD reads ("RGB/inception_i3d/Mean") and the port both pool 2-frame windows with
    # stride 1 and average the windows' logits: at 32 frames 3 windows, the end frames weighed half
    torch.manual_seed(0)
    model = InceptionI3d(width=32)
    x = torch.rand(1, 3, 32, 224, 224) * 2 - 1
    x[:, :, 16:] = -x[:, :, 16:]  # another half: windows that differ (else any average of them is the same)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm3d):
            module.momentum = None  # statistics of x: with (0, 1) a random network's features are all alike
    with torch.no_grad():
        model.train()(x)
    model.eval()
    seen = {}
    model.Mixed_5c.register_forward_hook(lambda _m, _i, out: seen.update(out=out))
    with torch.no_grad():
        logits = model(x)
        assert seen["out"].shape[2:] == (4, 7, 7)
        ported = model.logits(torch.nn.AvgPool3d((2, 7, 7), stride=1)(seen["out"]))  # (1, 400, 3, 1, 1)
    assert torch.allclose(ported.flatten(2).mean(2), logits, atol=1e-5)


def test_weights_are_read_from_safetensors_only_and_must_fit(tmp_path):
    path = tiny_i3d_weights(tmp_path / "i3d.safetensors", width=16)
    model = load_weights(path)
    assert model.width == 16 and not model.training
    with pytest.raises(ValueError, match=r"pickled checkpoints are not loaded; .*torch.load\(f, weights_only=True\)"):
        network_for(tmp_path / "rgb_imagenet.pt")
    from safetensors.torch import load_file, save_file

    state = load_file(str(path))
    del state["Mixed_4c.b1b.conv3d.weight"]
    save_file(state, str(tmp_path / "cut.safetensors"))
    with pytest.raises(ValueError, match=r"do not fit the I3D network: missing keys \(1\): Mixed_4c.b1b.conv3d.weight"):
        network_for(tmp_path / "cut.safetensors")


def test_clips_are_the_first_16_frames_resized_to_224_in_minus_one_to_one():
    assert list(clip_frame_indices(40, 16)) == list(range(16))
    assert list(clip_frame_indices(8, 16)) == [i // 2 for i in range(16)]  # stretched by repeating frames
    video = moving_square(0, frames=20, size=48)
    clip = i3d_clip(video, 16, 224)
    assert clip.shape == (3, 16, 224, 224) and float(clip.min()) >= -1 and float(clip.max()) <= 1
    flat = np.full((16, 30, 50, 3), 255, np.uint8)
    assert torch.allclose(i3d_clip(flat, 16, 64), torch.ones(3, 16, 64, 64))


def test_clips_are_resized_on_the_grid_of_tf1_resize_bilinear_as_the_fvd_reference_resizes():
    # google-research's preprocess calls tf.image.resize_bilinear, whose defaults (align_corners and
    # half_pixel_centers False) sample output pixel i at input i * in / out, not at torch's (i + 0.5) * in / out - 0.5
    row = np.zeros((16, 2, 2, 3), np.uint8)
    row[:, :, 1] = 255  # columns 0 and 255, upscaled to 4: 0, 127.5, 255, 255 (the last one clamped to the edge)
    up = (i3d_clip(row, 16, 4)[0, 0, 0] + 1) * 255 / 2
    assert torch.allclose(up, torch.tensor([0.0, 127.5, 255.0, 255.0]), atol=1e-4)
    ramp = np.broadcast_to((np.arange(4) * 60).astype(np.uint8)[None, :, None], (4, 4, 3))[None].repeat(16, 0)
    down = (i3d_clip(ramp, 16, 2)[0, 0] + 1) * 255 / 2  # 4 -> 2 picks inputs 0 and 2 exactly, no averaging
    assert torch.allclose(down, torch.tensor([[0.0, 120.0], [0.0, 120.0]]), atol=1e-4)


def reference_and_generated(tmp_path):
    """(reference folder, generated folder, the metric's options) under ``tmp_path``: tiny I3D weights,
    four real H264 reference videos (one in a sub-folder) and three generated ones."""
    weights = tiny_i3d_weights(tmp_path / "i3d.safetensors", width=16)
    reference = tmp_path / "real"
    write_videos(reference, [10, 11, 12], frames=24, names=["a.mp4", "b.mp4", "c.mp4"])
    write_videos(reference / "more", [13], frames=24, names=["d.mp4"])
    generated = tmp_path / "videos"
    write_videos(generated, [20, 21, 22])
    options = dict(reference=str(reference), weights=str(weights), size=64, cache_dir=str(tmp_path / "cache"), device="cpu")
    return reference, generated, options


@pytest.fixture
def setup(tmp_path):
    reference, generated, options = reference_and_generated(tmp_path)
    (reference / "notes.txt").write_text("not a video: ignored (FFmpeg would read it as tty video)")
    return tmp_path, reference, generated, options


def _run(options, items):
    """The metric's result, its small-sample warning silenced (these sets are always small)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)
        return FrechetVideoDistance(**options).evaluate(items)


def _items(folder):
    from vfm_infer.metrics.base import read_items

    return read_items(folder, ["a red square moving right"] * len(list(folder.glob("*.mp4"))))


def test_fvd_end_to_end_on_h264_files_with_a_random_init_i3d(setup):
    tmp_path, reference, generated, options = setup
    metric = load_metric("fvd", options)
    with pytest.warns(SmallSampleWarning, match=r"at least 401 videos on each side"):
        result = metric.evaluate(_items(generated))
    assert result.per_video == []
    assert result.summary["videos"] == 3 and result.summary["reference_videos"] == 4 and result.summary["feature_dims"] == 400
    # well above 0: a random I3D with its batch-norm statistics left at (0, 1) gave every video the same features
    assert np.isfinite(result.summary["fvd"]) and result.summary["fvd"] > 1
    assert any("singular below 401 videos" in n for n in result.notes)
    # the same computed by hand: features of the clips (only the reference's first 16 frames), Fréchet distance
    from vfm_infer.metrics.fvd_reference import first_frames, reference_videos
    from vfm_infer.video.mp4 import read_mp4

    network = load_weights(options["weights"])
    feats = lambda videos: network(torch.stack([i3d_clip(v, 16, 64) for v in videos])).double().detach().numpy()  # noqa: E731
    ref = GaussianStats.of(feats([read_mp4(p)[:16] for p in reference_videos(reference)]))
    assert all(len(first_frames(p, 16)) == 16 for p in reference_videos(reference))
    gen = GaussianStats.of(feats([item.frames for item in _items(generated)]))
    assert result.summary["fvd"] == pytest.approx(frechet_distance(gen.mu, gen.sigma, ref.mu, ref.sigma), rel=1e-6)


def test_fvd_of_the_reference_videos_against_themselves_is_about_zero(setup):
    tmp_path, reference, _, options = setup
    from vfm_infer.metrics.fvd_reference import reference_videos
    from vfm_infer.video.mp4 import read_mp4

    items = [EvalItem("x", read_mp4(p)) for p in reference_videos(reference)]
    result = _run(options, items)
    assert abs(result.summary["fvd"]) < 1e-6


def test_the_reference_statistics_are_cached_reused_and_invalidated_when_a_file_changes(setup):
    tmp_path, reference, generated, options = setup
    items = _items(generated)
    first = _run(options, items)
    assert "computed and cached" in first.notes[0]
    (cached,) = (tmp_path / "cache").glob("fvd-*.npz")
    # reused: statistics planted in the cache file (same key) are what the second run measures against
    with np.load(cached) as data:
        planted = {k: data[k] for k in data.files}
    planted["mu"] = planted["mu"] + 1.0
    np.savez(cached, **planted)
    second = _run(options, items)
    assert "read from the cache" in second.notes[0]
    gen = GaussianStats.of(FrechetVideoDistance(**options).features(item.frames for item in items))
    assert second.summary["fvd"] == pytest.approx(frechet_distance(gen.mu, gen.sigma, planted["mu"], planted["sigma"]), rel=1e-9)
    assert second.summary["fvd"] != pytest.approx(first.summary["fvd"], rel=1e-3)
    # a reference file changes: a miss, the statistics recomputed, the stale cache file removed
    write_videos(reference, [99], frames=24, names=["b.mp4"])
    os.utime(reference / "b.mp4", ns=(1, 1))  # an old timestamp: the key holds the content, not "newer than"
    third = _run(options, items)
    assert "computed and cached" in third.notes[0]
    assert [p.name for p in (tmp_path / "cache").glob("fvd-*.npz")] != [cached.name]
    assert len(list((tmp_path / "cache").glob("fvd-*.npz"))) == 1
    assert third.summary["fvd"] != pytest.approx(first.summary["fvd"], rel=1e-3)
    # other weights: a miss as well
    tiny_i3d_weights(tmp_path / "other.safetensors", width=16, seed=1)
    fourth = _run({**options, "weights": str(tmp_path / "other.safetensors")}, items)
    assert "computed and cached" in fourth.notes[0]


def _padded_to(path: Path, size: int) -> None:
    """``path`` grown to ``size`` bytes by an MP4 'free' box at its end (readers skip it): another video of the same size."""
    extra = size - path.stat().st_size
    assert extra >= 8, f"{path} is not smaller than {size} bytes by a box's 8 at least"
    with open(path, "ab") as f:
        f.write(extra.to_bytes(4, "big") + b"free" + bytes(extra - 8))


def another_video_in_place_of(path: Path, scratch: Path) -> os.stat_result:
    """Another video written into ``path`` (the same inode), padded to its size, its mtime put back (``cp`` then
    ``touch -d``): only the bytes, and the ctime no one but the kernel sets, differ. ``path``'s stat before."""
    import shutil

    write_videos(scratch, [99], frames=24, names=[path.name])
    before = path.stat()
    _padded_to(scratch / path.name, before.st_size)
    shutil.copyfile(scratch / path.name, path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    return before


def test_a_reference_video_replaced_by_another_of_the_same_size_and_mtime_is_a_miss(setup):
    tmp_path, reference, generated, options = setup
    items = _items(generated)
    first = _run(options, items)
    # cp -p of another video of the same size and timestamp as the one it replaces: only the bytes differ
    replaced = reference / "b.mp4"
    before = another_video_in_place_of(replaced, tmp_path / "other")
    assert (replaced.stat().st_size, replaced.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    second = _run(options, items)
    assert "computed and cached" in second.notes[0]
    assert second.summary["fvd"] != pytest.approx(first.summary["fvd"], rel=1e-3)


def test_statistics_of_other_weights_stay_cached_beside_the_first(setup):
    tmp_path, reference, generated, options = setup
    items = _items(generated)
    tiny_i3d_weights(tmp_path / "other.safetensors", width=16, seed=1)
    other = {**options, "weights": str(tmp_path / "other.safetensors")}
    assert "computed and cached" in _run(options, items).notes[0]
    assert "computed and cached" in _run(other, items).notes[0]
    # each in turn again: both read from the cache (writing the second removed the first before)
    assert "read from the cache" in _run(options, items).notes[0]
    assert "read from the cache" in _run(other, items).notes[0]
    assert len(list((tmp_path / "cache").glob("fvd-*.npz"))) == 2


def test_a_truncated_or_misshapen_cache_file_is_a_miss_not_an_error(tmp_path):
    from vfm_infer.metrics.fvd_reference import read_cached, write_cached

    path = tmp_path / "fvd-folder-key.npz"
    write_cached(path, "key", GaussianStats(np.zeros(400), np.eye(400), 5))
    whole = path.read_bytes()
    assert read_cached(path, "key").count == 5
    for cut in (100, len(whole) // 2, len(whole) - 10):  # a copy cut short: a zip without its end (BadZipFile)
        path.write_bytes(whole[:cut])
        assert read_cached(path, "key") is None
    for mu, sigma in ((np.zeros(400), np.eye(3)), (np.zeros((2, 400)), np.eye(400))):  # the key's, but not stats of D features
        np.savez(path, key=np.array("key"), mu=mu, sigma=sigma, count=np.array(5))
        assert read_cached(path, "key") is None


def test_fvd_options_are_named_with_what_they_accept(setup):
    tmp_path, reference, generated, options = setup
    with pytest.raises(ValueError, match=r"^metric 'fvd' needs the option reference: a folder of real videos.*\(--option fvd.reference=DIR\)$"):
        load_metric("fvd", {"weights": options["weights"]})
    with pytest.raises(ValueError, match=r"^metric 'fvd' needs the option weights: a local .safetensors file .*\(--option fvd.weights=PATH\)$"):
        load_metric("fvd", {"reference": str(reference)})
    with pytest.raises(FileNotFoundError, match="fvd.reference = .* does not exist; accepted: a folder of real videos"):
        load_metric("fvd", {**options, "reference": str(tmp_path / "nope")})
    with pytest.raises(ValueError, match=r"fvd.frames = 0; accepted: an integer >= 1"):
        load_metric("fvd", {**options, "frames": 0})
    with pytest.raises(ValueError, match="fvd needs at least 2 generated videos"):
        FrechetVideoDistance(**options).evaluate(_items(generated)[:1])
