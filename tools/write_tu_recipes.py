"""Export the σN-Ens, FineTune and FiLM rows of ``experiments/`` to TorchUncertainty's format.

    python tools/write_tu_recipes.py experiments

writes ``experiments/torch_uncertainty/classification/<dataset>/configs/<backbone>/<method>.yaml``
(18 recipes, generated: edit the source recipe of ``experiments/``, then rerun), so that they sit
next to TorchUncertainty's Packed-Ensembles recipes. Each is the source recipe, its base files
merged in (:func:`signorm_lab.cli.recipe_bases.composed_recipe`), through
:func:`signorm_lab.cli.tu_format.to_tu_format` under a header naming its source.
``tests/test_tu_format_recipes.py`` checks that the committed files are up to date.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from signorm_lab.cli.recipe_bases import composed_recipe
from signorm_lab.cli.tu_format import to_tu_format

__all__ = ["EXPORTED_METHODS", "EXPORT_FOLDER", "exported_recipes", "main"]

#: The rows of ``experiments/`` exported to TorchUncertainty's format (one source of truth).
EXPORTED_METHODS = ("signorm", "signorm_finetune", "film")
#: ``experiments/`` name parts -> TorchUncertainty's folder names.
BACKBONE_FOLDERS = {"resnet18": "resnet18", "resnet50": "resnet50", "wrn": "wideresnet28x10"}
DATASET_FOLDERS = {"c10": "cifar10", "c100": "cifar100"}
#: Where the exported recipes go, relative to ``experiments/``.
EXPORT_FOLDER = Path("torch_uncertainty") / "classification"

_HEADER = """\
# Generated from experiments/{source} by
#   python tools/write_tu_recipes.py experiments
# (edit that file, then rerun). TorchUncertainty's recipe format, to sit next to its recipes in
# experiments/classification/{dataset}/configs/{backbone}/; from experiments/classification/, run
#   torch-uncertainty fit --config {target} --data {datamodule}
"""


def exported_recipes(experiments: Path) -> dict[Path, str]:
    """``{path relative to experiments/: text}`` of the exported σN-Ens, FineTune, FiLM rows."""
    texts = {}
    for backbone, backbone_folder in BACKBONE_FOLDERS.items():
        for dataset, dataset_folder in DATASET_FOLDERS.items():
            for method in EXPORTED_METHODS:
                source = f"{backbone}_{dataset}_{method}.yaml"
                config = composed_recipe(experiments / source)  # self-contained
                target = (
                    EXPORT_FOLDER
                    / dataset_folder
                    / "configs"
                    / backbone_folder
                    / (f"{method}.yaml")
                )
                header = _HEADER.format(
                    source=source,
                    dataset=dataset_folder,
                    backbone=backbone_folder,
                    target=target.relative_to(EXPORT_FOLDER),
                    datamodule=config["data"]["class_path"].rpartition(".")[2],
                )
                texts[target] = header + yaml.safe_dump(to_tu_format(config), sort_keys=False)
    return texts


def main(argv: list[str] | None = None) -> None:
    """Write :func:`exported_recipes` of the ``experiments`` folder given on the command line."""
    parser = argparse.ArgumentParser(
        prog="python tools/write_tu_recipes.py",
        description="Export the σN-Ens, FineTune and FiLM recipes to TorchUncertainty's format.",
    )
    parser.add_argument("experiments", type=Path, help="The experiments/ folder.")
    experiments = parser.parse_args(argv).experiments
    for path, text in exported_recipes(experiments).items():
        (experiments / path).parent.mkdir(parents=True, exist_ok=True)
        (experiments / path).write_text(text)
        print(experiments / path)


if __name__ == "__main__":
    main()
