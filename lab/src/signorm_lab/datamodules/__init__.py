"""Datamodules following the API of TorchUncertainty's ``TUDataModule``.

Each datamodule (listed in ``__init__.pyi``) is imported on first use (PEP 562): reading one
module of this folder, such as :mod:`.stand_in_data`'s run label for the results table, does not
import torch and the data libraries.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
