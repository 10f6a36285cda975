# The public names: read by type checkers, and by ``lazy_loader.attach_stub`` in __init__.py,
# which imports each name's module on first use.
from .classification import SigmaNormClassificationRoutine as SigmaNormClassificationRoutine
