"""What the text datamodules share: the tokenizer, padding per batch and the loading checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from torch import Tensor
from torch.utils.data import DataLoader, Dataset
from torch_uncertainty.datamodules import TUDataModule

from torch_uncertainty_signorm.utils.checks import check_integer

from .. import _compat
from ._arguments_for import arguments_for

__all__ = ["PadToLongest", "TextDataModule", "check_text_loading", "load_tokenizer"]


def check_text_loading(num_tta: int, num_workers: int, persistent_workers: bool) -> None:
    """Text has no test-time augmentation; persistent workers need workers."""
    if num_tta != 1:
        raise ValueError(
            f"num_tta must be 1 (text has no test-time augmentation), got {num_tta!r}."
        )
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers=True needs num_workers > 0. Got num_workers=0.")


class PadToLongest:
    """Collate tokenised examples into ``(inputs, labels)``, padded to the longest example.

    Wraps :class:`transformers.DataCollatorWithPadding`; ``inputs`` is the tokenizer's
    mapping (``input_ids``, ``attention_mask``, ...) and ``labels`` an ``int64`` tensor.
    """

    def __init__(self, tokenizer: Any) -> None:
        from transformers import DataCollatorWithPadding

        self.pad = DataCollatorWithPadding(tokenizer, padding="longest", return_tensors="pt")

    def __call__(self, examples: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Tensor], Tensor]:
        batch = dict(self.pad(list(examples)))
        labels = batch.pop("labels").long()
        return batch, labels


def load_tokenizer(tokenizer: Any) -> Any:
    """A tokenizer object as is; a model id or local directory through ``AutoTokenizer``."""
    if not isinstance(tokenizer, (str, Path)):
        if not callable(tokenizer) or not hasattr(tokenizer, "pad"):
            raise TypeError(
                f"tokenizer must be a model id, a local directory or a transformers tokenizer, "
                f"got {type(tokenizer).__name__}."
            )
        return tokenizer
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(tokenizer), trust_remote_code=False)
    except OSError as error:
        raise ValueError(
            f"tokenizer={str(tokenizer)!r} could not be loaded ({error}). Pass the backbone's "
            f"model id (needs internet) or a local directory written by save_pretrained."
        ) from error


class TextDataModule(TUDataModule):
    """A ``TUDataModule`` of tokenised texts, batches padded to their longest text.

    Subclasses keep an explicit signature (recipes are parsed from it) and pass the loading
    arguments on. Test loaders: the clean one, the OOD one if ``eval_ood``, then one per dataset
    of :attr:`eval_datasets` (empty unless the subclass fills it in ``setup``).
    """

    training_task = "classification"

    def __init__(
        self,
        root: str | Path,
        tokenizer: Any,
        max_length: int,
        eval_ood: bool,
        batch_size: int,
        eval_batch_size: int | None,
        val_split: float | None,
        num_tta: int,
        postprocess_set: Literal["val", "test"],
        num_workers: int,
        pin_memory: bool,
        persistent_workers: bool,
    ) -> None:
        """Check the loading arguments, pass them to ``TUDataModule`` and load ``tokenizer``."""
        for name, value, low in (
            ("batch_size", batch_size, 1),
            ("max_length", max_length, 2),
            ("num_workers", num_workers, 0),
        ):
            check_integer(name, value, low)
        if eval_batch_size is not None:
            check_integer("eval_batch_size", eval_batch_size, 1)
        check_text_loading(num_tta, num_workers, persistent_workers)
        super().__init__(**arguments_for(TUDataModule.__init__, locals()))
        self.eval_ood = eval_ood
        self.max_length = max_length
        self.tokenizer = load_tokenizer(tokenizer)
        self.collate = PadToLongest(self.tokenizer)
        self.eval_datasets: list[Dataset] = []

    def test_dataloader(self) -> list[DataLoader]:
        """The test loader, the OOD loader if ``eval_ood``, then one per :attr:`eval_datasets`."""
        loaders = [_compat.tu_data_loader(self, self.get_test_set(), training=False)]
        if self.eval_ood:
            loaders.append(_compat.tu_data_loader(self, self.get_ood_set(), training=False))
        return loaders + [
            _compat.tu_data_loader(self, dataset, training=False) for dataset in self.eval_datasets
        ]

    def _data_loader(self, dataset: Dataset, training: bool, shuffle: bool = False) -> DataLoader:
        """TorchUncertainty's loader, with batches padded to their longest text."""
        return DataLoader(
            dataset,
            batch_size=self.batch_size if training else self.eval_batch_size,
            shuffle=shuffle,
            collate_fn=self.collate,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            persistent_workers=self.persistent_workers,
        )
