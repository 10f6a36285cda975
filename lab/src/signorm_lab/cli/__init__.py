"""The ``torch-uncertainty`` command: TorchUncertainty's Lightning CLI for any routine and
datamodule.

TorchUncertainty ships one entry script per dataset (``experiments/classification/cifar10/main.py``
and siblings), each binding :class:`~torch_uncertainty.utils.cli.TULightningCLI` to one routine
class and one datamodule class. This package provides a single command instead: the routine (the
``routine:`` block) and the datamodule (the ``data:`` block) are both chosen in the recipe by
``class_path``, so every recipe in ``experiments/`` runs through the same entry point::

    torch-uncertainty fit --config experiments/wrn_c100_signorm.yaml
    torch-uncertainty test --config experiments/wrn_c100_signorm.yaml \
        --ckpt_path "logs/.../checkpoints/epoch=…-val_acc=….ckpt"

TorchUncertainty's own recipes run unmodified (:func:`tu_format_args`): a ``routine:`` block
without ``class_path`` is its ``ClassificationRoutine``, and the datamodule of a ``data:`` block
without ``class_path`` is named once on the command line::

    torch-uncertainty fit --config cifar10/configs/resnet18/packed.yaml --data CIFAR10DataModule

On top of :class:`TULightningCLI`, with class_path blocks:

* ``eval_ood``, ``eval_shift`` and ``num_tta`` are forwarded from the datamodule to the routine.
  ``TULightningCLI`` links ``data.eval_ood`` to ``routine.eval_ood``; with class_path blocks those
  keys are ``data.init_args.eval_ood`` and ``routine.init_args.eval_ood``, jsonargparse rejects the
  link with a ``ValueError``, and ``TULightningCLI`` suppresses that error, so nothing is linked.
* ``--eval_after_fit`` tests the best checkpoint once ``fit`` ends (TorchUncertainty does this in
  its
  entry scripts, outside the CLI); ``--eval_after_fit=false`` overrides a recipe's ``true``.
* The resolved configuration is saved next to the logs: TorchUncertainty 0.13's ``TULightningCLI``
  defaults ``save_config_callback`` to ``None``, so its scripts save nothing; :class:`SaveRunConfig`
  (TorchUncertainty's ``TUSaveConfigCallback``, saving for ``test`` runs too) is the default here.
* Routines calling ``save_hyperparameters()`` store their ``routine:`` block, so
  ``load_from_checkpoint`` and ``--ckpt_path`` work (Lightning reads a ``model:`` block).
  ``--ckpt_path`` never imports a class the checkpoint names: the recipe names the classes, a
  checkpoint contradicting the recipe or the command line is an error (but for
  :data:`EVALUATION_ONLY_ARGS`, where the given value is used), and only values left at their
  defaults are taken from it.

Optimiser parameter groups: the top-level ``optimizer:`` / ``lr_scheduler:`` blocks are parsed
as Lightning's ``OptimizerCallable`` / ``LRSchedulerCallable`` and built on the routine's
``optimizer_param_groups(lr)`` when it defines one (the σNorm scale logits at a larger learning
rate, without weight decay), else on ``routine.parameters()``; the result is the routine's
TorchUncertainty ``optim_recipe``. See :meth:`TUSigmaNormCLI.configure_routine_optimizer`.

The package holds one job per module; :class:`TUSigmaNormCLI` calls them from Lightning's hooks:

* :mod:`~signorm_lab.cli.command`: :class:`TUSigmaNormCLI`, :func:`cli_main` and
  :func:`main` (the console script's entry point);
* :mod:`~signorm_lab.cli.tu_recipes`: TorchUncertainty's recipe format on the
  command line (:func:`tu_format_args`) and the jsonargparse types the recipes use
  (:func:`~signorm_lab.cli.tu_recipes.register_types`, called by the command);
* :mod:`~signorm_lab.cli.forwarding`: datamodule arguments copied to the routine
  (:func:`forward_datamodule_args`);
* :mod:`~signorm_lab.cli.ckpt_path_args`: what ``--ckpt_path`` may bring (the
  values it takes checked by :mod:`~signorm_lab.safety.checkpoint_args`);
* :mod:`~signorm_lab.cli.optimizer`: the ``optimizer:`` / ``lr_scheduler:``
  blocks built on the routine's parameter groups;
* :mod:`~signorm_lab.cli.datamodule_setup`: the datamodule's ``setup`` wrapped
  for ``validate`` and ``fit``;
* :mod:`~signorm_lab.cli.trainer`: TorchUncertainty's trainer, reading an ``int``
  batch limit (``--trainer.limit_val_batches=1``) as batches, not as a fraction;
* :mod:`~signorm_lab.cli.run_folders`: the run's logger folder (saved
  configuration, the version a resumed run continues, the folder of a run that wrote nothing);
* :mod:`~signorm_lab.cli.interruption`: SIGTERM / Ctrl-C exit codes
  (:class:`RunInterrupted`) and the command resuming a run (:func:`resume_command`);
* :mod:`~signorm_lab.cli.tu_format`: TorchUncertainty's recipe format itself
  (shorthands, its ``model:`` block, renamed class paths);
* :mod:`~signorm_lab.cli.recipe_bases`: recipes extending base files (``base:``);
* :mod:`~signorm_lab.cli.recipe_parsing`: a recipe read as the command reads it,
  without building anything;
* :mod:`~signorm_lab.cli.export`: the export command
  (``signorm-export``), on the export library
  (:mod:`signorm_lab.export`, which never imports this package).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
