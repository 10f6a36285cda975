"""Multi-head ensemble: one shared backbone pass, M fresh linear heads (the cheapest ensemble a
user could build from one pretrained model): its settings and its wrapper."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
