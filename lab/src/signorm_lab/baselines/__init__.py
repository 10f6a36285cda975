"""Baselines TorchUncertainty lacks, one folder each, built on the members' wrapper
(:mod:`torch_uncertainty_signorm.members`): FiLM-Ensemble (:mod:`.film`), LoRA-Ensemble
(:mod:`.lora`) and the multi-head ensemble (:mod:`.multi_head`)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
