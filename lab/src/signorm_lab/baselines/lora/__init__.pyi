# The public names: read by type checkers, and by ``lazy_loader.attach_stub`` in __init__.py,
# which imports each name's module on first use.
from .config import LoRAEnsembleConfig as LoRAEnsembleConfig
from .layer import MemberLoRALinear as MemberLoRALinear
from .model import LoRAEnsemble as LoRAEnsemble
from .model import lora_ensemble as lora_ensemble
