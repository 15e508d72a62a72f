"""Optional engines: strategies built on a third-party parallel library instead of DTensor.

Each engine is an extra (``pip install vfm-parallel[<engine>]``) that registers its strategies
through the ordinary ``vfm_parallel_register_strategies`` hook and imports its library only inside
``apply``, so vfm-parallel itself never needs it.
"""
