"""``python -m signorm_lab.cli``: the ``torch-uncertainty`` command."""

from .command import main

if __name__ == "__main__":
    main()
