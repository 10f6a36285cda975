"""The σN-Ens lab, built on the method (:mod:`torch_uncertainty_signorm`): the
``torch-uncertainty`` command and its untrusted-file checks, export and loading, the comparison,
the regression check and results tables, stand-in data, the research datamodules, backbones
and baselines, and the run callbacks (exact resume, run record, prediction writer, OOD and shift
metrics, parameter counts).

Nothing of the method imports this package.
"""

import os
import sys

if sys.argv[:1] == ["-m"] and sys.path and sys.path[0] in ("", os.getcwd()):
    # `python -m signorm_lab.<command>` put the working directory first on the import path: a
    # module lying beside a downloaded recipe would be imported as a library.
    del sys.path[0]

#: The lab's version: the method's release it is built with (pyproject.toml pins the method).
__version__ = "0.2.0"
