"""Shared transformer blocks: patch embedding, positions, conditioning embedders, AdaLN, attention, MLPs."""
