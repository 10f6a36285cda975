"""The members' diversity measures and the ensemble's prediction (names in ``__init__.pyi``,
imported on first use); the OOD and shift evaluation that was here moved to
``signorm_lab.evaluation``."""

import lazy_loader

from .. import MOVED_REMOVED_IN, _moved_names_of
from ..utils.moved_modules import moved_names

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
__getattr__ = moved_names(__name__, _moved_names_of(__name__), MOVED_REMOVED_IN, __getattr__)
