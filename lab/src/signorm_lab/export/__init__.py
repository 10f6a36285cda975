r"""Export a trained σNorm-Ensemble as safetensors, and each member as a plain model.

An export directory holds ``ensemble.safetensors`` (every weight and buffer), ``config.json``
(the number of members and the model block that rebuilds the architecture) and, with
``--members``, ``member_<m>.safetensors`` for each member ``m``::

    signorm-export --config recipe.yaml \
        --ckpt_path "logs/.../checkpoints/epoch=…-val_acc=….ckpt" --output exported/ [--members]

The command reads the recipe with the ``torch-uncertainty`` command's own parser
(:func:`~signorm_lab.cli.recipe_parsing.parse_recipe`, imported by
:mod:`~signorm_lab.cli.export` alone; further arguments such as
``--routine.init_args.model.init_args.num_estimators=2`` override it as on that command), so
it builds the model the command trained.

**Loading runs no code of the export.** Weights are safetensors (no pickle); ``config.json``
is JSON whose ``class_path`` entries must each be one of :data:`EXPORTABLE_CLASS_PATHS` (the
exportable models of :mod:`~signorm_lab.safety.model_registry`, plus the exact
``extra_class_paths`` a caller trusts), checked over the whole spec before anything is
imported or built.

**Exports are self-contained**: ``config.json`` describes the architecture alone, so loading
needs neither the FineTune ``checkpoint`` (a ``finetune_ensemble`` run is exported as the
``signorm_ensemble`` with ``pretrained=True`` it built), nor ``pretrained_path``, nor a
download; the weights come from the safetensors files (a ``bert_classifier`` stores its Hugging Face
configuration, see :func:`~signorm_lab.models.backbones.bert_config`), and the
regularized layers are stored by name. Loading refuses a model block asking for weights
from elsewhere, and checks the architecture against the safetensors headers before
allocating anything (:mod:`~signorm_lab.export.format`): an untrusted export can
neither run code nor make the loader fetch, hang or exhaust memory.

A *member model* (:func:`member_model`, i.e. :meth:`SigmaNormEnsemble.member_model
<torch_uncertainty_signorm.members.wrapper.MemberWrapper.member_model>`) is member ``m``
alone, built from ordinary layers: every σNorm layer is folded back into the normalization
layer it came from (its ``to_plain``), with member ``m``'s statistics and its effective
affine,

.. math::
    w = k\,s \odot \sigma(\gamma_m), \qquad b = \beta \ (0 \text{ from scratch}),

(σBN → ``BatchNorm``, σLN → ``LayerNorm``, σRMSNorm → ``RMSNorm``, channels-first σLN →
timm's ``LayerNorm2d``, σGN → ``GroupNorm``), and member ``m``'s head becomes its norm
followed by an ``nn.Linear``. Its output equals the ensemble's rows of member ``m``.

The package holds :mod:`~signorm_lab.export.spec` (the model block written as
data, and built), :mod:`~signorm_lab.export.writing`
(:func:`export_ensemble`), :mod:`~signorm_lab.export.loading`
(:func:`load_ensemble`, :func:`load_member`) and :mod:`~signorm_lab.export.format`
(an export's files read as untrusted data); the model block is checked by
:mod:`~signorm_lab.safety.export_spec`. The command lives with the other commands
(:mod:`~signorm_lab.cli.export`); nothing here imports it.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
