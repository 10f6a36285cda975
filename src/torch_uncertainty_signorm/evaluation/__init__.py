"""The members' diversity measures and the ensemble's prediction (names in ``__init__.pyi``,
imported on first use); the OOD and shift evaluation that was here moved to
``signorm_lab.evaluation``."""

import lazy_loader

from .. import MOVED_NAMES, MOVED_REMOVED_IN
from ..utils.moved_modules import moved_names, names_moved_from

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
__getattr__ = moved_names(
    __name__, names_moved_from(__name__, MOVED_NAMES), MOVED_REMOVED_IN, __getattr__
)
