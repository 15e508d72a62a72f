"""MovieGen-style Llama transformer: RMSNorm pre-norm, SwiGLU, GQA, 3D RoPE, cross-attention, adaLN."""
