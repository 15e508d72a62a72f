"""Diffusion formulations: how noise is added, what the network predicts, and the training loss.

Each formulation has ``loss(model, x0, cond, generator, noise_generator=None)`` (training is one
call) and what samplers need: ``denoise(model, x, level, cond)`` and ``network_time(level)``
(docs/contracts.md section 2).
"""

from vfm_models.formulations.base import Formulation, TrainingPieces, weighted_mse
from vfm_models.formulations.ddpm import DDPM
from vfm_models.formulations.edm import EDM
from vfm_models.formulations.rectified_flow import RectifiedFlow

__all__ = ["DDPM", "EDM", "Formulation", "RectifiedFlow", "TrainingPieces", "weighted_mse"]
