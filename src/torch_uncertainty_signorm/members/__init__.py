"""What every member wrapper is built on, knowing no method: the wrapper base that runs all
members in one backbone pass (:mod:`.wrapper`), per-member normalization (:mod:`.norm`,
:mod:`.statistics`, :mod:`.distributed`), the members' heads (:mod:`.heads`, :mod:`.head_norm`,
:mod:`.linear`), the module swap (:mod:`.replace`), layer selection by name (:mod:`.selection`)
and the settings object's base (:mod:`.config`).

σN-Ens (:mod:`torch_uncertainty_signorm.signorm`), FiLM-Ensemble and LoRA-Ensemble
(:mod:`signorm_lab.baselines`) each build on it, as peft's methods on
``tuners_utils``.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
