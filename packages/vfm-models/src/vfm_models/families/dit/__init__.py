"""The original class-conditional adaLN-Zero DiT (Peebles & Xie, 2023), on 3D patches."""
