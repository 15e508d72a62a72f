"""The training config: TOML sections as dataclasses (``sections``), reading with ``--set`` overrides
(``reading``), and validation with key and reason, one function per section (``validation``)."""

from vfm_parallel.trainer.config.reading import apply_overrides, from_dict, load, parse_override
from vfm_parallel.trainer.config.sections import (
    CheckpointConfig,
    ConfigError,
    DataConfig,
    EMAConfig,
    LoggingConfig,
    ModelConfig,
    OptimConfig,
    ParallelConfig,
    PrecisionConfig,
    PreviewConfig,
    TrainConfig,
    TrainSection,
    ValidationConfig,
)
from vfm_parallel.trainer.config.validation import (
    DTYPES,
    OPTIMIZERS,
    PP_SCHEDULES,
    RESUME_CHANGES,
    SOURCES,
    check_finite,
    check_pipeline,
    check_strategies,
    validate,
)

__all__ = [
    "CheckpointConfig", "ConfigError", "DataConfig", "EMAConfig", "LoggingConfig", "ModelConfig", "OptimConfig",
    "ParallelConfig", "PrecisionConfig", "PreviewConfig", "TrainConfig", "TrainSection", "ValidationConfig", "apply_overrides", "from_dict", "load",
    "parse_override", "DTYPES", "OPTIMIZERS", "PP_SCHEDULES", "RESUME_CHANGES", "SOURCES", "check_finite",
    "check_pipeline", "check_strategies", "validate",
]
