"""Baselines TorchUncertainty lacks, built on the same member-major conventions as σN-Ens."""

from .film_ensemble import FiLMBatchNorm, FiLMEnsemble, film_ensemble
from .lora_ensemble import LoRAEnsemble, MemberLinear, MemberLoRALinear, lora_ensemble

__all__ = [
    "FiLMBatchNorm",
    "FiLMEnsemble",
    "LoRAEnsemble",
    "MemberLinear",
    "MemberLoRALinear",
    "film_ensemble",
    "lora_ensemble",
]
