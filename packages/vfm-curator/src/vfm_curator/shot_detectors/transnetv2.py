"""``transnetv2``: the TransNet V2 network (:mod:`.transnetv2_model`) as a shot detector.

Weights come from a local safetensors file (the authors' ``transnetv2-pytorch-weights.pth``,
re-saved with ``safetensors.torch.save_file``); nothing is downloaded. Frames are read at 48x27
and predicted the way the reference inference does: the video is padded with 25 copies of its
first frame and 25-74 copies of its last, cut into windows of 100 frames that advance by 50, and
each window's middle 50 predictions are kept. Windows are streamed (memory holds one batch of
windows, whatever the video's length) and ``batch_size`` of them go through the network at once.
A frame is a transition when its "one hot" probability exceeds ``threshold``; shots follow the
reference's rule (:func:`~vfm_curator.shot_detectors.spans.shots_from_transitions`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from vfm_curator.shot_detectors.base import ShotDetector
from vfm_curator.shot_detectors.spans import shots_from_transitions

WINDOW, STRIDE, CONTEXT = 100, 50, 25  # frames per window, advance, context kept on each side


def padded_windows(frames: Iterable[np.ndarray]) -> Iterator[tuple[np.ndarray, int]]:
    """Yield ``(window (100, 27, 48, 3), frames_of_the_video_it_predicts)``: the reference's padding
    and windows, streamed. The last window's count is what is left, so predictions can be cut to
    the video's length."""
    buffer: list[np.ndarray] = []
    count = 0
    for frame in frames:
        if not buffer:
            buffer = [frame] * CONTEXT
        buffer.append(frame)
        count += 1
        if len(buffer) == WINDOW:
            yield np.stack(buffer), STRIDE
            buffer = buffer[STRIDE:]
    # the frames not yet predicted are those after the buffer's first CONTEXT; pad with the last
    # frame, as the reference does, until every one is in a window's middle
    pending = len(buffer) - CONTEXT if count else 0
    while pending > 0:
        buffer += [buffer[-1]] * (WINDOW - len(buffer))
        yield np.stack(buffer), min(pending, STRIDE)
        buffer = buffer[STRIDE:]
        pending -= STRIDE


def _read_header(path: Path) -> dict[str, tuple[int, ...]]:
    """Key -> shape of a safetensors file, from its header only (no tensor is read)."""
    from safetensors import safe_open

    if path.suffix.lower() in (".pth", ".pt", ".bin", ".ckpt"):
        raise ValueError(f"TransNetV2 weights {path}: pickled checkpoints are not loaded; accepted: a .safetensors "
                         f"file (convert once with safetensors.torch.save_file(torch.load(f, weights_only=True), out))")
    if not path.is_file():
        raise ValueError(f"TransNetV2 weights {path}: no such file; accepted: a local .safetensors file")
    try:
        with safe_open(str(path), framework="pt") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except Exception as exc:  # safetensors raises its own SafetensorError for a bad header
        raise ValueError(f"TransNetV2 weights {path}: not a readable safetensors file ({exc})") from exc


def check_weights(path: str | Path, expected: dict[str, tuple[int, ...]] | None = None) -> None:
    """``ValueError`` naming the file and the missing, unexpected or mis-shaped keys unless the file
    holds the network's state dict key for key (``num_batches_tracked`` counters, unused at
    inference, may be absent). Reads the header only, so the split stage checks it before any work."""
    path = Path(path)
    found = _read_header(path)
    if expected is None:
        import torch

        from vfm_curator.shot_detectors.transnetv2_model import TransNetV2

        with torch.device("meta"):
            expected = {k: tuple(v.shape) for k, v in TransNetV2().state_dict().items()}
    missing = sorted(k for k in expected if k not in found and not k.endswith("num_batches_tracked"))
    unexpected = sorted(k for k in found if k not in expected)
    shapes = sorted(f"{k} {found[k]} (expected {v})" for k, v in expected.items() if k in found and found[k] != v)
    if missing or unexpected or shapes:
        parts = [f"{label} ({len(keys)}): {', '.join(keys[:8])}{' ...' if len(keys) > 8 else ''}"
                 for label, keys in (("missing keys", missing), ("unexpected keys", unexpected),
                                     ("wrong shapes", shapes)) if keys]
        raise ValueError(f"TransNetV2 weights {path} do not fit the network: {'; '.join(parts)}")


def load_weights(model, path: str | Path) -> None:
    """Load a safetensors state dict into ``model``, key for key (:func:`check_weights` first)."""
    from safetensors.torch import load_file

    check_weights(path, {k: tuple(v.shape) for k, v in model.state_dict().items()})
    model.load_state_dict(load_file(str(path)), strict=False)


def save_weights(model, path: str | Path) -> None:
    """Write ``model``'s state dict as safetensors (what :func:`load_weights` reads)."""
    from safetensors.torch import save_file
    from vfm_plugins.files import fresh_file

    # written new and renamed: a link at path is replaced whatever the safetensors version does (0.8 does the same)
    with fresh_file(path) as tmp:
        save_file({k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}, str(tmp))


class TransNetV2Detector(ShotDetector):
    """``transnetv2``: shots from the TransNet V2 network on 48x27 frames (CPU or CUDA, batched windows).

    Options: ``weights`` (a local .safetensors file; required), ``threshold`` (0.5), ``device``
    (``auto``: CUDA when present, else CPU; or ``cpu``, ``cuda``, ``cuda:N``), ``batch_size``
    (windows of 100 frames per forward pass), ``random_init`` (no weights: for tests of the
    mechanics only, every prediction is meaningless).
    """

    name = "transnetv2"
    defaults = {"weights": None, "threshold": 0.5, "device": "auto", "batch_size": 8, "random_init": False}
    frame_size = (48, 27)

    def check_options(self) -> None:
        self.number("threshold", lo=0, hi=1)
        self.number("batch_size", lo=1, integer=True)
        device = self.opt["device"]
        if not isinstance(device, str) or not (device in ("auto", "cpu") or device.startswith("cuda")):
            raise ValueError(f"shot detector 'transnetv2': device = {device!r}; accepted: auto, cpu, cuda, cuda:N")
        weights = self.opt["weights"]
        if weights is None and not self.opt["random_init"]:
            raise ValueError("shot detector 'transnetv2' needs weights: a local .safetensors file "
                             "(detector_options.weights / --shot-option weights=PATH)")
        if weights is not None:
            path = Path(str(weights)).expanduser()
            if not path.is_file() or path.suffix.lower() != ".safetensors":
                raise ValueError(f"shot detector 'transnetv2': weights = {str(weights)!r} is not a .safetensors file; "
                                 "accepted: a local .safetensors file")
            check_weights(path)  # keys and shapes from the header, before any video
        self.model = None

    @property
    def uses_gpu(self) -> bool:
        device = self.opt["device"]
        if device == "auto":
            import importlib.util

            if importlib.util.find_spec("torch") is None:
                return False
            import torch

            return torch.cuda.is_available()
        return device.startswith("cuda")

    def setup(self) -> None:
        import torch

        from vfm_curator.shot_detectors.transnetv2_model import TransNetV2

        device = self.opt["device"]
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)  # random_init: the same network in every worker and every run
            model = TransNetV2()
        if self.opt["weights"] is not None:
            load_weights(model, Path(str(self.opt["weights"])).expanduser())
        self.model = model.to(device).eval()
        self.device = torch.device(device)

    def predict(self, frames: Iterable[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(T,) "one hot" and (T,) "many hot" probabilities of a stream of (27, 48, 3) uint8 frames."""
        import torch

        if self.model is None:
            self.setup()
        one: list[np.ndarray] = []
        many: list[np.ndarray] = []

        def run(batch: list[tuple[np.ndarray, int]]) -> None:
            x = torch.from_numpy(np.stack([w for w, _ in batch])).to(self.device)
            with torch.inference_mode():
                single, all_frames = self.model(x)
            single = torch.sigmoid(single[:, CONTEXT:CONTEXT + STRIDE, 0]).float().cpu().numpy()
            all_frames = torch.sigmoid(all_frames[:, CONTEXT:CONTEXT + STRIDE, 0]).float().cpu().numpy()
            for k, (_, keep) in enumerate(batch):
                one.append(single[k, :keep])
                many.append(all_frames[k, :keep])

        batch: list[tuple[np.ndarray, int]] = []
        for window in padded_windows(_checked(frames)):
            batch.append(window)
            if len(batch) == int(self.opt["batch_size"]):
                run(batch)
                batch = []
        if batch:
            run(batch)
        if not one:
            return np.zeros(0, np.float32), np.zeros(0, np.float32)
        return np.concatenate(one).astype(np.float32), np.concatenate(many).astype(np.float32)

    def frame_scores(self, frames: Iterable[np.ndarray]) -> np.ndarray:
        return self.predict(frames)[0]

    def spans(self, scores: np.ndarray, *, fps: float) -> list[tuple[int, int]]:
        return shots_from_transitions(np.asarray(scores) > float(self.opt["threshold"]))


def _checked(frames: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
    for frame in frames:
        frame = np.asarray(frame)
        if frame.shape != (27, 48, 3) or frame.dtype != np.uint8:
            raise ValueError(f"TransNetV2 reads (27, 48, 3) uint8 RGB frames; got {frame.shape} {frame.dtype}")
        yield frame
