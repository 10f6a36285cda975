"""Multi-head ensemble: one shared backbone pass, M fresh linear heads (the cheapest ensemble a
user could build from one pretrained model): its settings and its wrapper."""

from .config import MultiHeadConfig
from .model import MultiHeadEnsemble, multi_head_ensemble

__all__ = ["MultiHeadConfig", "MultiHeadEnsemble", "multi_head_ensemble"]
