"""TransNet V2 (Souček & Lokoč, 2020, arXiv:2008.04838) in torch: a shot-transition network over
48x27 RGB frames.

Six DDCNN V2 cells in three stacks: each cell concatenates four (2+1)-D convolutions (a 1x3x3
spatial conv, then a 3x1x1 temporal conv dilated 1, 2, 4 and 8 frames), batch-normalised; each
stack adds its first cell's output to its last (a shortcut) and halves the spatial size. Two
side branches see the whole window: frame similarity (cosine similarity of each frame's pooled
features with the 50 frames each side) and colour histograms (the same over 512-bin RGB
histograms). A dense layer on [histogram, similarity, conv features] feeds two heads: "one hot"
(the frame is a transition's centre) and "many hot" (the frame is inside a transition).

Parameter names and shapes are those of the authors' PyTorch port, so its converted weights
(``transnetv2-pytorch-weights.pth`` saved as safetensors) load key for key.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

HEIGHT, WIDTH = 27, 48
LOOKUP = 101  # frames compared by the similarity branches: the frame and 50 each side


class Conv3DConfigurable(nn.Module):
    """A (2+1)-D conv: 1x3x3 spatial (``in -> 2 * filters``), then 3x1x1 temporal dilated ``dilation``."""

    def __init__(self, in_filters: int, filters: int, dilation: int, use_bias: bool = False) -> None:
        super().__init__()
        self.layers = nn.ModuleList([
            nn.Conv3d(in_filters, 2 * filters, kernel_size=(1, 3, 3), padding=(0, 1, 1), bias=False),
            nn.Conv3d(2 * filters, filters, kernel_size=(3, 1, 1), dilation=(dilation, 1, 1),
                      padding=(dilation, 0, 0), bias=use_bias),
        ])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class DilatedDCNNV2(nn.Module):
    """One DDCNN V2 cell: four dilated (2+1)-D convs side by side -> (B, 4 * filters, T, H, W)."""

    def __init__(self, in_filters: int, filters: int, activation: bool) -> None:
        super().__init__()
        self.Conv3D_1 = Conv3DConfigurable(in_filters, filters, 1)
        self.Conv3D_2 = Conv3DConfigurable(in_filters, filters, 2)
        self.Conv3D_4 = Conv3DConfigurable(in_filters, filters, 4)
        self.Conv3D_8 = Conv3DConfigurable(in_filters, filters, 8)
        self.bn = nn.BatchNorm3d(filters * 4, eps=1e-3)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.Conv3D_1(x), self.Conv3D_2(x), self.Conv3D_4(x), self.Conv3D_8(x)], dim=1)
        x = self.bn(x)
        return F.relu(x) if self.activation else x


class StackedDDCNNV2(nn.Module):
    """``n_blocks`` cells; relu, plus the first cell's output (shortcut), then 1x2x2 average pooling."""

    def __init__(self, in_filters: int, n_blocks: int, filters: int) -> None:
        super().__init__()
        self.DDCNN = nn.ModuleList([
            DilatedDCNNV2(in_filters if i == 0 else filters * 4, filters, activation=i != n_blocks - 1)
            for i in range(n_blocks)
        ])
        self.pool = nn.AvgPool3d(kernel_size=(1, 2, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = None
        for block in self.DDCNN:
            x = block(x)
            shortcut = x if shortcut is None else shortcut
        return self.pool(F.relu(x) + shortcut)


def _window_of(similarities: torch.Tensor, lookup: int) -> torch.Tensor:
    """(B, T, T) similarities -> (B, T, lookup): row t's entries for frames t - lookup//2 .. t + lookup//2
    (0 outside the window)."""
    b, t, _ = similarities.shape
    half = (lookup - 1) // 2
    padded = F.pad(similarities, [half, half])  # (B, T, T + lookup - 1); column t + half is frame t
    index = torch.arange(t, device=similarities.device)[:, None] + torch.arange(lookup, device=similarities.device)
    return padded.gather(2, index.expand(b, t, lookup))


class FrameSimilarity(nn.Module):
    """Cosine similarity of each frame's (projected, spatially pooled) features of every stack with
    those of the frames around it -> (B, T, output_dim)."""

    def __init__(self, in_filters: int, similarity_dim: int = 128, lookup_window: int = LOOKUP,
                 output_dim: int = 128) -> None:
        super().__init__()
        self.projection = nn.Linear(in_filters, similarity_dim, bias=True)
        self.fc = nn.Linear(lookup_window, output_dim)
        self.lookup_window = lookup_window

    def forward(self, block_features: list[torch.Tensor]) -> torch.Tensor:
        x = torch.cat([f.mean(dim=(3, 4)) for f in block_features], dim=1).transpose(1, 2)  # (B, T, C)
        x = F.normalize(self.projection(x), p=2, dim=2)
        return F.relu(self.fc(_window_of(x @ x.transpose(1, 2), self.lookup_window)))


class ColorHistograms(nn.Module):
    """Cosine similarity of each frame's 512-bin RGB histogram (3 bits per channel) with those of the
    frames around it -> (B, T, output_dim)."""

    def __init__(self, lookup_window: int = LOOKUP, output_dim: int = 128) -> None:
        super().__init__()
        self.fc = nn.Linear(lookup_window, output_dim)
        self.lookup_window = lookup_window

    @staticmethod
    def histograms(frames: torch.Tensor) -> torch.Tensor:
        """(B, T, H, W, 3) uint8 -> (B, T, 512) L2-normalised histograms."""
        b, t = frames.shape[:2]
        rgb = frames.reshape(b * t, -1, 3).long() >> 5  # 8 levels per channel
        bins = (rgb[..., 0] << 6) + (rgb[..., 1] << 3) + rgb[..., 2]  # (B*T, H*W) in [0, 512)
        counts = torch.zeros(b * t, 512, device=frames.device)
        counts.scatter_add_(1, bins, torch.ones_like(bins, dtype=counts.dtype))
        return F.normalize(counts.view(b, t, 512), p=2, dim=2)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        x = self.histograms(frames)
        return F.relu(self.fc(_window_of(x @ x.transpose(1, 2), self.lookup_window)))


class TransNetV2(nn.Module):
    """(B, T, 27, 48, 3) uint8 frames -> (one_hot, many_hot) logits, each (B, T, 1)."""

    def __init__(self, filters: int = 16, stacks: int = 3, blocks: int = 2, dense: int = 1024,
                 dropout: float = 0.5) -> None:
        super().__init__()
        widths = [filters * 2**i for i in range(stacks)]  # 16, 32, 64; each cell outputs 4x that
        self.SDDCNN = nn.ModuleList([
            StackedDDCNNV2(3 if i == 0 else widths[i - 1] * 4, blocks, widths[i]) for i in range(stacks)
        ])
        self.frame_sim_layer = FrameSimilarity(sum(4 * w for w in widths))
        self.color_hist_layer = ColorHistograms()
        pooled = (HEIGHT >> stacks, WIDTH >> stacks)  # 27x48 -> 3x6
        self.fc1 = nn.Linear(widths[-1] * 4 * pooled[0] * pooled[1] + 128 + 128, dense)
        self.dropout = nn.Dropout(dropout)
        self.cls_layer1 = nn.Linear(dense, 1)
        self.cls_layer2 = nn.Linear(dense, 1)
        self.eval()

    def forward(self, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if frames.dtype != torch.uint8 or frames.dim() != 5 or tuple(frames.shape[2:]) != (HEIGHT, WIDTH, 3):
            raise ValueError(f"TransNetV2 takes (B, T, {HEIGHT}, {WIDTH}, 3) uint8 frames; got "
                             f"{tuple(frames.shape)} {frames.dtype}")
        x = frames.permute(0, 4, 1, 2, 3).float() / 255.0  # (B, 3, T, H, W)
        features = []
        for stack in self.SDDCNN:
            x = stack(x)
            features.append(x)
        x = x.permute(0, 2, 3, 4, 1).flatten(2)  # (B, T, 3*6*256), (H, W, C) order as trained
        x = torch.cat([self.color_hist_layer(frames), self.frame_sim_layer(features), x], dim=2)
        x = self.dropout(F.relu(self.fc1(x)))
        return self.cls_layer1(x), self.cls_layer2(x)
