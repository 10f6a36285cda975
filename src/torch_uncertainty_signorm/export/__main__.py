"""``python -m torch_uncertainty_signorm.export``: see :mod:`torch_uncertainty_signorm.export.command`."""

import sys

from .command import main

try:
    main()
except (ValueError, TypeError, FileNotFoundError, FileExistsError) as error:  # a refusal:
    print(f"python -m torch_uncertainty_signorm.export: {type(error).__name__}: {error}",
          file=sys.stderr)  # its line, without a traceback above it
    raise SystemExit(1) from None
