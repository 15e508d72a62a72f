"""DiT with cross-attention to text and per-head QK RMSNorm (the seeds' main model), optional AdaLN-LoRA."""
