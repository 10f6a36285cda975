# The public names: read by type checkers, and by ``lazy_loader.attach_stub`` in __init__.py,
# which imports each name's module on first use.
from .config import MethodConfig as MethodConfig
from .heads import MemberHeads as MemberHeads
from .linear import MemberLinear as MemberLinear
from .norm import MemberBatchNorm as MemberBatchNorm
from .norm import MemberNorm as MemberNorm
from .replace import replace_modules as replace_modules
from .wrapper import MemberModel as MemberModel
from .wrapper import MemberWrapper as MemberWrapper
