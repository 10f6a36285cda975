# The public names: read by type checkers, and by ``lazy_loader.attach_stub`` in __init__.py,
# which imports each name's module on first use.
from .config import MultiHeadConfig as MultiHeadConfig
from .model import MultiHeadEnsemble as MultiHeadEnsemble
from .model import multi_head_ensemble as multi_head_ensemble
