# The public names: read by type checkers, and by ``lazy_loader.attach_stub`` in __init__.py,
# which imports each name's module on first use.
from .config import FiLMConfig as FiLMConfig
from .layer import FiLMBatchNorm as FiLMBatchNorm
from .model import FiLMEnsemble as FiLMEnsemble
from .model import film_ensemble as film_ensemble
