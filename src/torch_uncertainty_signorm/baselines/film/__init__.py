"""FiLM-Ensemble (Turkoglu et al., 2022): its settings, its layer and its wrapper."""

from .config import FiLMConfig
from .layer import FiLMBatchNorm
from .model import FiLMEnsemble, film_ensemble

__all__ = ["FiLMBatchNorm", "FiLMConfig", "FiLMEnsemble", "film_ensemble"]
