"""FiLM-Ensemble (Turkoglu et al., 2022): its settings, its layer and its wrapper."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
