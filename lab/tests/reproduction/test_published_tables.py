"""The paper's tables as package data: every table present, sidecars complete, numbers right."""

import math
from pathlib import Path

import pytest

from signorm_lab.cli.recipe_bases import composed_recipe
from signorm_lab.reproduction.published import TABLES, load_table

#: Every ``\begin{table}`` label of the paper (signorm_ensembles.tex), in order of appearance.
PAPER_TABLE_LABELS = [
    "tab:main",
    "tab:sst2",
    "tab:vit",
    "tab:lambda",
    "tab:rn18",
    "tab:fourmetric",
    "tab:mscaling",
    "tab:shift-cnn",
    "tab:shift-vit",
]


def test_every_table_of_the_paper_has_a_data_file():
    assert sorted(TABLES.values()) == sorted(PAPER_TABLE_LABELS)
    for name, label in TABLES.items():
        assert load_table(name).label == label


@pytest.mark.parametrize("name", sorted(TABLES))
def test_sidecar_names_its_source_settings_and_units(name):
    table = load_table(name)
    assert table.meta["caption"] and table.meta["section"].startswith("sec:")
    assert len(table.meta["settings"]) > 40
    assert set(table.key_columns) <= set(table.columns)
    for column in table.metric_columns:
        base = column.removesuffix("_std")
        assert base in table.meta["units"], f"{name}: no unit for {column}"
        if column.endswith("_std"):
            assert base in table.columns
    keys = [tuple(row[k] for k in table.key_columns) for row in table.rows]
    assert len(set(keys)) == len(keys), f"{name}: key columns do not identify rows"


@pytest.mark.parametrize(
    ("name", "keys", "column", "value"),
    [
        ("main", {"dataset": "CIFAR-10", "arch": "ResNet-50", "method": "Packed"}, "FPR95", 14.4),
        (
            "main",
            {"dataset": "CIFAR-100", "arch": "WideResNet-28-10", "method": "σN-Ens"},
            "NLL",
            0.584,
        ),
        (
            "main",
            {"dataset": "CIFAR-100", "arch": "ResNet-50", "method": "Deep Ensembles"},
            "Params",
            94.82,
        ),
        (
            "main",
            {"dataset": "CIFAR-10", "arch": "WideResNet-28-10", "method": "σN-Ens FineTune"},
            "ECE",
            0.79,
        ),
        ("rn18", {"dataset": "CIFAR-100", "method": "MIMO"}, "AUROC", 80.7),
        ("rn18", {"dataset": "CIFAR-10", "method": "Packed"}, "MAdds", 0.48),
        ("sst2", {"method": "Hydra-Ens (Circ)"}, "FPR95", 55.06),
        ("vit", {"dataset": "ImageNet-1k", "method": "LoRA-Ens"}, "ECE_std", 9.21),
        ("vit", {"dataset": "CIFAR-100", "method": "σN-Ens"}, "Brier", 0.1055),
        ("mscaling", {"method": "σN-Ens", "num_estimators": 12}, "AUROC_std", 3.2),
        ("mscaling", {"method": "Packed", "num_estimators": 16}, "ECE", 11.9),
        ("lambda", {"arch": "ResNet-50", "diversity_strength": "1e-1"}, "ECE", 2.3),
        (
            "fourmetric",
            {"arch": "ResNet-50", "correlation": "pearson", "metric": "jensen_gap"},
            "rho",
            -0.83,
        ),
        (
            "shift_cnn",
            {"arch": "WideResNet-28-10", "method": "σN-Ens", "severity": 5},
            "NLL",
            1.992,
        ),
        ("shift_cnn", {"arch": "ResNet-50", "method": "FiLM-Ensemble", "severity": 3}, "ECE", 13.5),
        (
            "shift_vit",
            {"dataset": "ImageNet-C", "method": "Deep Ensembles", "severity": 5},
            "ECE",
            0.86,
        ),
        (
            "shift_vit",
            {"dataset": "CIFAR-100-C", "method": "LoRA-Ens", "severity": 2},
            "Acc",
            80.61,
        ),
    ],
)
def test_spot_checked_numbers_match_the_paper(name, keys, column, value):
    assert load_table(name).row(**keys)[column] == pytest.approx(value, abs=1e-9)


def test_table_sizes_match_the_paper():
    sizes = {name: len(load_table(name).rows) for name in TABLES}
    assert sizes == {
        "main": 36,
        "rn18": 18,
        "sst2": 6,
        "vit": 8,
        "mscaling": 10,
        "lambda": 12,
        "fourmetric": 18,
        "shift_cnn": 40,
        "shift_vit": 40,
    }


def test_unreported_values_are_nan_and_printed_text_is_kept():
    table = load_table("mscaling")
    assert math.isnan(table.row(method="Packed", num_estimators=12)["Acc"])
    (printed,) = table.select_text(method="Packed", num_estimators=12)
    assert printed["Acc"] == ""
    (main_row,) = load_table("main").select_text(
        dataset="CIFAR-10", arch="ResNet-50", method="Packed"
    )
    assert main_row["MAdds"] == "1.00"  # trailing zero as printed


def test_bad_names_and_ambiguous_rows_raise_clear_errors():
    with pytest.raises(ValueError, match=r"unknown published table 'tab:main'.*available"):
        load_table("tab:main")
    with pytest.raises(ValueError, match=r"\['model'\] are not columns of table 'main'"):
        load_table("main").select(model="x")
    with pytest.raises(ValueError, match=r"4 rows of table 'main' match.*valid values"):
        load_table("main").row(method="σN-Ens")


def test_where_accepts_ascii_and_short_spellings_and_lists_valid_values_otherwise():
    table = load_table("main")
    exact = table.row(dataset="CIFAR-100", arch="WideResNet-28-10", method="σN-Ens")
    assert table.row(dataset="cifar100", arch="WRN-28-10", method="sigmaN-Ens") == exact
    assert table.row(dataset="C100", arch="RN50", method="sigman-ens finetune") == table.row(
        dataset="CIFAR-100", arch="ResNet-50", method="σN-Ens FineTune"
    )
    with pytest.raises(ValueError) as error:
        table.row(dataset="CIFAR-100", arch="WRN", method="sigmaN-Ens")
    # the values the other keys allow, spelled as in the table
    assert "arch: ResNet-50, WideResNet-28-10;" in str(error.value)
    assert "σN-Ens FineTune" in str(error.value) and "WRN for WideResNet" in str(error.value)


def test_sidecar_budgets_follow_the_recipes():
    main, vit = load_table("main"), load_table("vit")
    row = main.row(dataset="CIFAR-100", arch="WideResNet-28-10", method="σN-Ens")
    assert main.budget(row)["max_epochs"] == 200
    finetune = main.row(dataset="CIFAR-100", arch="WideResNet-28-10", method="σN-Ens FineTune")
    assert main.budget(finetune)["max_epochs"] == 25
    assert vit.budget(vit.row(dataset="ImageNet", method="sigmaN-Ens"))["max_steps"] == 20000
    assert (
        load_table("rn18").budget(
            load_table("rn18").row(dataset="CIFAR-10", arch="ResNet-18", method="σN-Ens")
        )["max_epochs"]
        == 75
    )
    assert load_table("sst2").budget({"method": "σN-Ens", "heads": "12"}) is None
    experiments = Path(__file__).parents[3] / "experiments"
    for recipe, (table, keys) in {
        "wrn_c100_signorm.yaml": (main, row),
        "wrn_c100_signorm_finetune.yaml": (main, finetune),
        "resnet18_c10_signorm.yaml": (
            load_table("rn18"),
            load_table("rn18").row(dataset="CIFAR-10", arch="ResNet-18", method="σN-Ens"),
        ),
        "vit_imagenet_signorm.yaml": (vit, vit.row(dataset="ImageNet", method="sigmaN-Ens")),
    }.items():
        trainer = composed_recipe(experiments / recipe)["trainer"]
        budget = table.budget(keys)
        assert all(trainer.get(k) == v for k, v in budget.items() if k != "source"), recipe


def _build(block):
    """A recipe's ``class_path``/``init_args`` block, built (ResNet ``style`` names as the enum)."""
    import importlib

    from torch_uncertainty.models.classification.resnet.utils import ResNetStyle

    if not (isinstance(block, dict) and "class_path" in block):
        return block
    module, _, name = block["class_path"].rpartition(".")
    args = {key: _build(value) for key, value in (block.get("init_args") or {}).items()}
    if "style" in args:
        args["style"] = ResNetStyle[args["style"]]
    args.pop("checkpoint", None)  # FineTune: the architecture, not the single model's weights
    if name == "finetune_ensemble":  # FineTune builds a σN-Ens from its checkpoint
        module, name = "torch_uncertainty_signorm", "signorm_ensemble"
    if name == "signorm_ensemble":
        args["pretrained"] = False
    return getattr(importlib.import_module(module), name)(**args)


ERRATA = [
    (name, erratum) for name in ("main", "rn18") for erratum in load_table(name).meta["errata"]
]


@pytest.mark.parametrize(
    ("name", "erratum"), ERRATA, ids=[f"{e['row']['arch']}-{e['row']['method']}" for _, e in ERRATA]
)
def test_params_errata_hold_the_printed_and_the_recomputed_count(name, erratum):
    """The published value is the CSV's (as printed); the corrected one is parameter_counts of
    the CIFAR-10 recipe's model (built on the meta device: no memory, no time)."""
    from pathlib import Path

    import torch

    from signorm_lab.evaluation.parameter_counts import parameter_counts

    table = load_table(name)
    row = table.row(**erratum["row"])
    assert row[erratum["column"]] == pytest.approx(erratum["published"])
    assert table.errata(row) == {"Params": erratum}
    recipe = erratum["reason"].split("experiments/")[1].split(".yaml")[0]
    config = composed_recipe(Path(__file__).parents[3] / "experiments" / f"{recipe}.yaml")
    with torch.device("meta"):
        model = _build(config["routine"]["init_args"]["model"])
    millions = parameter_counts(model)["total"] / 1e6
    assert round(millions, 2) == pytest.approx(erratum["corrected"])
    assert abs(millions - erratum["published"]) > 0.01  # the printed value would fail regression


def test_only_cifar10_params_of_the_affected_methods_have_errata():
    rows = {(e["row"]["dataset"], e["row"]["method"], e["column"]) for _, e in ERRATA}
    assert rows == {
        ("CIFAR-10", m, "Params") for m in ("σN-Ens", "σN-Ens FineTune", "FiLM-Ensemble")
    }
    assert len(ERRATA) == 9  # x ResNet-18, ResNet-50, WideResNet-28-10
    table = load_table("main")
    assert table.errata(table.row(dataset="CIFAR-100", arch="ResNet-50", method="σN-Ens")) == {}
