# The public names: read by type checkers, and by ``lazy_loader.attach_stub`` in __init__.py,
# which imports each name's module on first use.
from .format import CONFIG_NAME as CONFIG_NAME
from .format import FORMAT as FORMAT
from .format import WEIGHTS_NAME as WEIGHTS_NAME
from .loading import EXPORTABLE_CLASS_PATHS as EXPORTABLE_CLASS_PATHS
from .loading import check_ensemble_spec as check_ensemble_spec
from .loading import load_ensemble as load_ensemble
from .loading import load_member as load_member
from .spec import build_model as build_model
from .writing import export_ensemble as export_ensemble
from .writing import member_model as member_model
