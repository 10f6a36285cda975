"""Lightning routines for σNorm-Ensembles, built on TorchUncertainty's."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
