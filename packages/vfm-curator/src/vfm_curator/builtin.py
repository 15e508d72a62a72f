"""The built-in vfm-curator plugin: registers through the same hooks as any third-party plugin.

Targets are lazy ``"module:attr"`` strings, so listing plugins imports neither PyAV nor Ray.
"""

from __future__ import annotations

from vfm_curator.hookspecs import Register
from vfm_curator.plugins import hookimpl

_STAGES = {
    "decode": ("vfm_curator.stages.decode:DecodeStage", "probe + decode small frames (PyAV; NVDEC via hwaccel='cuda')"),
    "split": ("vfm_curator.stages.split:SplitStage", "shots from a registered shot detector (content, adaptive, transnetv2) or fixed stride; min/max clip length"),
    "stitch": ("vfm_curator.stages.stitch:StitchStage", "merge adjacent clips with similar boundary-frame embeddings"),
    "transcode": ("vfm_curator.stages.transcode:TranscodeStage", "frame-accurate H264 (libx264 CRF/preset, or NVENC)"),
    "embed": ("vfm_curator.stages.embed:EmbedStage", "clip embedding with a registered embedder"),
    "caption": ("vfm_curator.stages.caption:CaptionStage", "manifest/sidecar captions, or a registered captioner"),
    "filter": ("vfm_curator.stages.filter:FilterStage", "duration, resolution, motion and pluggable score filters"),
    "caption_qa": ("vfm_curator.stages.caption_qa:CaptionQAStage", "caption-frame agreement (CLIP/SigLIP cosine; VLM yes/no)"),
    "write": ("vfm_curator.stages.write:WriteStage", "clips as mp4, metadata parquet parts, resume records"),
}


@hookimpl
def vfm_curator_register_stages(register: Register) -> None:
    """Built-in stages of the clipping pipeline."""
    for name, (target, description) in _STAGES.items():
        register(name, target, description=description)


@hookimpl
def vfm_curator_register_embedders(register: Register) -> None:
    """Built-in embedders."""
    register("histogram", "vfm_curator.embedders.histogram:HistogramEmbedder", description="HSV histogram + layout, CPU, no weights")
    register("clip", "vfm_curator.embedders.clip:ClipEmbedder", description="CLIP vision tower from a local transformers folder")


@hookimpl
def vfm_curator_register_captioners(register: Register) -> None:
    """Built-in captioners."""
    register("vlm", "vfm_curator.captioners.vlm:VLMCaptioner", description="image-text-to-text model from a local transformers folder")
    register("endpoint", "vfm_curator.captioners.endpoint:EndpointCaptioner",
             description="an OpenAI-compatible chat-completions server (vLLM, SGLang, Ollama): frames as images")


@hookimpl
def vfm_curator_register_scorers(register: Register) -> None:
    """Built-in clip scores."""
    register("motion", "vfm_curator.stages.filter:MotionScorer", description="mean absolute frame difference in [0, 1]")


@hookimpl
def vfm_curator_register_shot_detectors(register: Register) -> None:
    """Built-in shot detectors."""
    register("content", "vfm_curator.shot_detectors.content:ContentDetector",
             description="HSV colour change above a threshold (PySceneDetect's ContentDetector rule)")
    register("adaptive", "vfm_curator.shot_detectors.content:AdaptiveDetector",
             description="HSV colour change against its rolling average (PySceneDetect's AdaptiveDetector rule)")
    register("transnetv2", "vfm_curator.shot_detectors.transnetv2:TransNetV2Detector",
             description="TransNet V2 network on 48x27 frames, local safetensors weights, CPU or CUDA")
