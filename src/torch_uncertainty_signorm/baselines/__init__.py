"""Baselines TorchUncertainty lacks, built on σN-Ens's member wrapper (``member_wrapper``)."""

from ..config import FiLMConfig, LoRAEnsembleConfig
from .film_ensemble import FiLMBatchNorm, FiLMEnsemble, film_ensemble
from .lora_ensemble import LoRAEnsemble, MemberLinear, MemberLoRALinear, lora_ensemble

__all__ = [
    "FiLMBatchNorm",
    "FiLMConfig",
    "FiLMEnsemble",
    "LoRAEnsemble",
    "LoRAEnsembleConfig",
    "MemberLinear",
    "MemberLoRALinear",
    "film_ensemble",
    "lora_ensemble",
]
