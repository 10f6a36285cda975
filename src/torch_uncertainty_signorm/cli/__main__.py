"""``python -m torch_uncertainty_signorm.cli``: the ``torch-uncertainty`` command."""

from .command import main

if __name__ == "__main__":
    main()
