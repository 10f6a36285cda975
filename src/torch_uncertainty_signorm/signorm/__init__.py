"""σNorm-Ensembles (σN-Ens), one module per part of the method, as peft's ``tuners/<method>/``.

:mod:`.layers` (the σNorm layers, with TorchUncertainty's ``from_<layer>`` converters),
:mod:`.registry` (which norm becomes which σNorm layer), :mod:`.normalization_layer` (σNorm
for the ``normalization_layer=`` of TorchUncertainty's builders),
:mod:`.conversion` (the walk that swaps them in), :mod:`.config` (the settings),
:mod:`.regularization` (the importance-sharing penalty) and :mod:`.regularization_guard`,
:mod:`.layer_selection` (the layers it acts on), :mod:`.diversity_target` (τ held at a target
σNorm-cos), :mod:`.optim` (the scale logits' parameter group) and :mod:`.ensemble` (the
wrapper, on :class:`~torch_uncertainty_signorm.members.MemberWrapper`).

The names listed in ``__init__.pyi`` are imported on first use (PEP 562).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
