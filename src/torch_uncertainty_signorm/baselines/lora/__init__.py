"""LoRA-Ensemble (Mühlematter et al., 2024): its settings, its layer and its wrapper."""

from .config import LoRAEnsembleConfig
from .layer import MemberLoRALinear
from .model import LoRAEnsemble, lora_ensemble

__all__ = ["LoRAEnsemble", "LoRAEnsembleConfig", "MemberLoRALinear", "lora_ensemble"]
