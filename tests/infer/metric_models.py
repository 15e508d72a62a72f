"""Tiny random-init models for the clip-score and fvd metrics, saved as their real files are (a transformers
CLIP / SigLIP folder, an I3D .safetensors), and videos written as real H264 files."""

from __future__ import annotations

from pathlib import Path

import numpy as np

WORDS = ["<pad>", "<s>", "</s>", "<unk>", "a", "red", "green", "blue", "circle", "square", "moving", "right", "left",
         "up", "down", "fox", "in", "the", "snow"]


def _word_tokenizer(folder: Path, max_length: int) -> None:
    """A word-level fast tokenizer adding <s> ... </s>, saved as transformers saves one."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)])
    PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                            model_max_length=max_length).save_pretrained(folder)


def tiny_clip_folder(folder: Path, kind: str = "clip", seed: int = 0) -> Path:
    """A random tiny CLIP (32 px, shortest-edge resize + center crop) or SigLIP (resize to 32x32) model folder."""
    import torch
    import transformers as tf

    folder.mkdir(parents=True, exist_ok=True)
    max_length = 12
    text = dict(vocab_size=len(WORDS), hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                max_position_embeddings=max_length, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    vision = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2, image_size=32,
                  patch_size=8)
    _word_tokenizer(folder, max_length)
    torch.manual_seed(seed)
    if kind == "clip":
        tf.CLIPModel(tf.CLIPConfig(text_config=text, vision_config=vision, projection_dim=8)).save_pretrained(folder)
        tf.CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    else:
        tf.SiglipModel(tf.SiglipConfig(text_config=text, vision_config=vision)).save_pretrained(folder)
        tf.SiglipImageProcessor(size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder


def tiny_i3d_weights(path: Path, width: int = 16, seed: int = 0, size: int = 64) -> Path:
    """A random I3D with every channel count divided by ``width``, saved as safetensors.

    Its batch-norm statistics are those of a few clips at ``size`` (as training leaves them): with the
    default ones (mean 0, variance 1) the activations of a random network shrink layer after layer and
    every video gets the same features to 1e-7, which would make any FVD about 0."""
    import torch

    from vfm_infer.metrics.fvd import i3d_clip
    from vfm_infer.metrics.i3d import InceptionI3d, save_weights

    torch.manual_seed(seed)
    model = InceptionI3d(width=width)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm3d):
            module.momentum = None  # a cumulative average over the calibration batches
    clips = torch.stack([i3d_clip(moving_square(1000 + i, 16, size), 16, size) for i in range(4)])
    with torch.no_grad():
        model.train()(clips)
    save_weights(model.eval(), path)
    return path


def moving_square(seed: int, frames: int = 20, size: int = 48, colour=None) -> np.ndarray:
    """(T, size, size, 3) uint8: a square of a random colour crossing a textured background."""
    rng = np.random.default_rng(seed)
    background = rng.integers(0, 256, size=(size // 8, size // 8, 3)).repeat(8, 0).repeat(8, 1)
    colour = rng.integers(0, 256, size=3) if colour is None else np.asarray(colour)
    video = np.repeat(background[None], frames, axis=0).astype(np.uint8)
    side = size // 4
    for t in range(frames):
        x = (t * (size - side)) // max(frames - 1, 1)
        video[t, size // 3:size // 3 + side, x:x + side] = colour
    return video


def write_videos(folder: Path, seeds, frames: int = 20, size: int = 48, names=None) -> list[Path]:
    """H264 MP4s of :func:`moving_square`, named ``0000.mp4``, ... (as vfm generate names them) or ``names``."""
    from vfm_infer.video.mp4 import write_mp4

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, seed in enumerate(seeds):
        name = names[i] if names else f"{i:04d}.mp4"
        paths.append(write_mp4(folder / name, moving_square(seed, frames, size)))
    return paths
