"""The generic trainer: config, loop, LR schedule, EMA, metrics, MFU. Model and data are injected."""

from vfm_parallel.trainer.config import ConfigError, TrainConfig, apply_overrides, from_dict, load
from vfm_parallel.trainer.health import NonFiniteTrainingError, TrainingWarning
from vfm_parallel.trainer.parts import RunContext, TrainParts, TrainResult
from vfm_parallel.trainer.stopping import TrainingStopped
from vfm_parallel.trainer.trainer import train

__all__ = ["ConfigError", "TrainConfig", "apply_overrides", "from_dict", "load", "RunContext", "TrainParts", "TrainResult", "train",
           "NonFiniteTrainingError", "TrainingStopped", "TrainingWarning"]
