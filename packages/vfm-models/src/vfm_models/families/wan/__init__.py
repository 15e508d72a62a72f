"""Wan 2.1 text-to-video (Wan-AI): the layers of diffusers' ``WanTransformer3DModel`` on vfm's skeleton."""
