"""A tokenizer, a text encoder, a formulation, an adapter, a strategy, a blender, an embedder, a
captioner, a scorer, a shot detector, a decoder and a metric, each written from vfm's plugin docs."""
