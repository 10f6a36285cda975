"""The one change the command makes to a datamodule: its ``setup`` wrapped for the running
subcommand (:func:`wrap_setup`)."""

from __future__ import annotations

from lightning.pytorch import LightningDataModule

__all__ = ["training_set_size", "wrap_setup"]


def training_set_size(datamodule: LightningDataModule) -> int | None:
    """The size of a TorchUncertainty datamodule's training set; ``None`` when unknown."""
    try:
        return len(datamodule.get_train_set())
    except (AttributeError, TypeError):  # no get_train_set, no training set, no length
        return None


def wrap_setup(
    datamodule: LightningDataModule,
    *,
    validate_as_fit: bool = False,
    refuse_empty_training_set: bool = False,
) -> None:
    """Wrap ``datamodule.setup`` (the instance's, which Lightning's trainer calls) for one run.

    Lightning calls ``datamodule.setup(stage)`` itself, with no hook in between, so the command
    sets an instance attribute over the class's method (the datamodule's class is left alone):

    Args:
        datamodule: The run's datamodule.
        validate_as_fit: Set up the ``validate`` stage as ``fit`` (TorchUncertainty's
            datamodules accept only ``fit`` and ``test``, and ``fit`` builds the validation split
            they serve).
        refuse_empty_training_set: After setting up ``fit``, raise a ``ValueError`` when the
            training set is empty (TorchUncertainty's ``get_train_set``), rather than failing in
            the data loader's sampler.
    """
    setup = datamodule.setup

    def run_setup(stage: str | None = None) -> None:
        setup("fit" if validate_as_fit and stage == "validate" else stage)
        if refuse_empty_training_set and stage == "fit" and training_set_size(datamodule) == 0:
            raise ValueError(
                f"The training set of {type(datamodule).__name__} is empty (0 samples): "
                f"there is nothing to fit. Check the recipe's data block (root, splits)."
            )

    datamodule.setup = run_setup
