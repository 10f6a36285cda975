"""``python -m torch_uncertainty_signorm.export``: see :mod:`torch_uncertainty_signorm.export.command`."""

from .command import main

main()
