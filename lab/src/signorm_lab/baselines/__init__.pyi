# The public names: read by type checkers, and by ``lazy_loader.attach_stub`` in __init__.py,
# which imports each name's module on first use.
from .film import FiLMBatchNorm as FiLMBatchNorm
from .film import FiLMConfig as FiLMConfig
from .film import FiLMEnsemble as FiLMEnsemble
from .film import film_ensemble as film_ensemble
from .lora import LoRAEnsemble as LoRAEnsemble
from .lora import LoRAEnsembleConfig as LoRAEnsembleConfig
from .lora import MemberLoRALinear as MemberLoRALinear
from .lora import lora_ensemble as lora_ensemble
from .multi_head import MultiHeadConfig as MultiHeadConfig
from .multi_head import MultiHeadEnsemble as MultiHeadEnsemble
from .multi_head import multi_head_ensemble as multi_head_ensemble
from .multi_head.model import MemberLinear as MemberLinear
