"""Video tokenizers: encode pixels (B, C, T, H, W) in [-1, 1] to latents (B, C', T', H', W') and back."""
