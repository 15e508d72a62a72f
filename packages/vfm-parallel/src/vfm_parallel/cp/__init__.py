"""Context parallelism: ring (P2P) and all-to-all (Ulysses) attention, and the hybrid for ST-DiT."""
