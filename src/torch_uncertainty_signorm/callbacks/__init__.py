"""Lightning callbacks for σNorm-Ensembles.

Each callback (listed in ``__init__.pyi``) is imported on first use (PEP 562):
``from ...callbacks import ExactResumeCheckpoint`` does not import the ownership figure's or the
metrics' libraries (TorchUncertainty's metrics bring scikit-learn and seaborn).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
