"""Baselines TorchUncertainty lacks, one folder each, built on the members' wrapper
(:mod:`torch_uncertainty_signorm.members`): FiLM-Ensemble (:mod:`.film`) and LoRA-Ensemble
(:mod:`.lora`)."""

from ..members.linear import MemberLinear
from .film import FiLMBatchNorm, FiLMConfig, FiLMEnsemble, film_ensemble
from .lora import LoRAEnsemble, LoRAEnsembleConfig, MemberLoRALinear, lora_ensemble

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
