"""Former name of :mod:`torch_uncertainty_signorm.export.files`, kept for one release.

``import torch_uncertainty_signorm.export_files`` gives that module itself (one module object,
so setting its bounds applies to loading too).
"""

import sys

from .export import files

sys.modules[__name__] = files
