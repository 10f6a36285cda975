"""Baselines TorchUncertainty lacks, built on σN-Ens's member wrapper (``member_wrapper``)."""

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
