"""Baselines TorchUncertainty lacks, one folder each, built on the members' wrapper
(:mod:`torch_uncertainty_signorm.members`): FiLM-Ensemble (:mod:`.film`), LoRA-Ensemble
(:mod:`.lora`) and the multi-head ensemble (:mod:`.multi_head`)."""

from ..members.linear import MemberLinear
from .film import FiLMBatchNorm, FiLMConfig, FiLMEnsemble, film_ensemble
from .lora import LoRAEnsemble, LoRAEnsembleConfig, MemberLoRALinear, lora_ensemble
from .multi_head import MultiHeadConfig, MultiHeadEnsemble, multi_head_ensemble

__all__ = [
    "FiLMBatchNorm",
    "FiLMConfig",
    "FiLMEnsemble",
    "LoRAEnsemble",
    "LoRAEnsembleConfig",
    "MemberLinear",
    "MemberLoRALinear",
    "MultiHeadConfig",
    "MultiHeadEnsemble",
    "film_ensemble",
    "lora_ensemble",
    "multi_head_ensemble",
]
