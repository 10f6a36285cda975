"""``python -m signorm_lab.export``: deprecated in 0.1.0, removed in 0.2.0.

The export command is ``signorm-export`` (or ``python -m signorm_lab.cli.export``),
with the same arguments; this form warns (``FutureWarning``) and runs it. The library,
:mod:`signorm_lab.export`, is unchanged and never imports the command: only running
this module does.
"""

import sys
import warnings

#: The warning of the old form, naming the new one.
MOVED = (
    "`python -m signorm_lab.export` is deprecated and will be removed in "
    "torch-uncertainty-signorm 0.2.0: run `signorm-export` (or `python -m "
    "signorm_lab.cli.export`), which takes the same arguments."
)

if __name__ == "__main__":
    warnings.warn(MOVED, FutureWarning, stacklevel=1)
    from ..cli.export import command

    sys.exit(command())
