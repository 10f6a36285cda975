"""σNorm-Ensembles for TorchUncertainty: implicit ensembles with temperature-controlled diversity.

The public names, listed in ``__init__.pyi``, are imported on first use (PEP 562, through
SPEC 1's ``lazy_loader``), so that importing a submodule, such as the ``torch-uncertainty``
command answering ``--help`` or :mod:`.reproduction.regression` in a CI job, does not import
torch, timm and transformers first.
"""

import os
import sys

if sys.argv[:1] == ["-m"] and sys.path and sys.path[0] in ("", os.getcwd()):
    # `python -m torch_uncertainty_signorm.<command>` put the working directory first on the
    # import path: a module lying beside a downloaded recipe would be imported as a library.
    del sys.path[0]

import lazy_loader

from .utils.moved_modules import MovedModules

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

#: Modules that moved (old path: new path, or the new paths its names went to), importable at
#: the old path with a ``FutureWarning`` until 0.2.0.
MOVED_MODULES = {
    f"{__name__}.{old}": (
        f"{__name__}.{new}" if isinstance(new, str) else tuple(f"{__name__}.{n}" for n in new)
    )
    for old, new in {
        "optim": "signorm.optim",
        "diversity": "evaluation.diversity",
        "prediction": "evaluation.prediction",
        "backbones": "models.backbones",
        "offline_assets": "models.packaged",
        "transforms": "datamodules.transforms",
        "lr_schedulers": "optim_recipes",
        # the stand-in files, and the command that writes them and labels their runs
        "stand_in_data": ("datamodules.stand_in_data", "cli.stand_in"),
    }.items()
}
MovedModules(MOVED_MODULES, removed_in="0.2.0").install()

#: The package's version, read by the build from this line (pyproject.toml's ``dynamic``).
__version__ = "0.1.0"
