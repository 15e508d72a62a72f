"""The Megatron engine: TP (``megatron-tp``) and TP + sequence parallelism (``megatron-sp``) built on
megatron-core's ``ColumnParallelLinear`` / ``RowParallelLinear``; ``pip install vfm-parallel[megatron]``.

Nothing here imports megatron-core at import time: :mod:`.strategy` does, inside ``apply``.
"""
