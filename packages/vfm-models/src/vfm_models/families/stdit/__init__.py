"""Spatio-temporal DiT: spatial, temporal and cross-attention plus an MLP in every block."""
