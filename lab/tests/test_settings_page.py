"""docs/settings.md agrees with the code: its defaults table is read against the signatures and
constants, its links resolve, and its two worked fine-tunes run (the CNN on a small timm
stand-in for the downloaded weights, the transformer on the packaged MiniLM), one training
step each through Lightning with the page's own routine, optimizer and Trainer."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path

import pytest
import torch
import yaml
from lightning.pytorch import Trainer

from torch_uncertainty_signorm import SigmaNormConfig, signorm_ensemble
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine
from torch_uncertainty_signorm.signorm import diversity_target, regularization
from torch_uncertainty_signorm.signorm.optim import (
    ADAPTIVE_SCALE_LR_MULTIPLIER,
    DEFAULT_SCALE_LR_MULTIPLIER,
    is_adaptive,
    scale_rate,
)

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "settings.md"
TEXT = PAGE.read_text()

MODEL = inspect.signature(signorm_ensemble).parameters
ROUTINE = inspect.signature(SigmaNormClassificationRoutine.__init__).parameters
TRAINER = inspect.signature(Trainer.__init__).parameters
CONFIG = {field.name: field.default for field in dataclasses.fields(SigmaNormConfig)}

#: Each setting the page must list: where it is set, and the defaults its row must state (the
#: signature's default first, then what an unset value resolves to).
EXPECTED = {
    "tau": ("signorm_ensemble", [regularization.DEFAULT_TAU]),
    "diversity_strength": ("signorm_ensemble", [regularization.DEFAULT_DIVERSITY_STRENGTH]),
    "regularized_layers": ("signorm_ensemble", [CONFIG["regularized_layers"]]),
    "num_estimators": ("signorm_ensemble", []),
    "member_spread": ("signorm_ensemble", [CONFIG["member_spread"]]),
    "scale_lr_multiplier": (
        "SigmaNormClassificationRoutine",
        [None, DEFAULT_SCALE_LR_MULTIPLIER, ADAPTIVE_SCALE_LR_MULTIPLIER],
    ),
    "member_lr_multiplier": (
        "SigmaNormClassificationRoutine",
        [ROUTINE["member_lr_multiplier"].default],
    ),
    "target_diversity": ("SigmaNormClassificationRoutine", [ROUTINE["target_diversity"].default]),
    "max_steps": ("Trainer", [TRAINER["max_steps"].default]),
    "gradient_clip_val": ("Trainer", [TRAINER["gradient_clip_val"].default]),
}


def _table(header: str) -> list[list[str]]:
    """The rows of the Markdown table whose header row starts with ``header``, as cells."""
    lines = TEXT[TEXT.index(header) :].splitlines()
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _literals(cell: str) -> list:
    """The backticked Python literals of a cell, in order (names such as `max_epochs` skipped)."""
    values = []
    for token in re.findall(r"`([^`]+)`", cell):
        try:
            values.append(ast.literal_eval(token))
        except (ValueError, SyntaxError):
            continue
    return values


def _section(title: str) -> str:
    text = TEXT[TEXT.index(title) :]
    return text[: text.index("\n## ", 1)] if "\n## " in text[1:] else text


def _python_blocks(section: str) -> list[str]:
    return [block.split("```", 1)[0] for block in _section(section).split("```python\n")[1:]]


def test_the_defaults_table_states_the_codes_defaults():
    rows = {
        re.search(r"`(\w+)`", row[1]).group(1): row
        for row in _table("| setting | argument | set on | default in the code |")
    }
    assert set(rows) == set(EXPECTED)
    for argument, (owner, defaults) in EXPECTED.items():
        _, _, set_on, default, _ = rows[argument]
        assert owner in set_on, argument
        assert _literals(default) == defaults, (argument, default)
    # The code's own defaults behind EXPECTED: signatures, the config, the constants.
    for name in ("tau", "diversity_strength", "regularized_layers", "member_spread"):
        assert MODEL[name].default == CONFIG[name], name
    assert MODEL["num_estimators"].default is inspect.Parameter.empty
    assert "required" in rows["num_estimators"][3]
    assert ROUTINE["scale_lr_multiplier"].default is None
    assert scale_rate(None, adaptive=False) == DEFAULT_SCALE_LR_MULTIPLIER
    assert scale_rate(None, adaptive=True) == ADAPTIVE_SCALE_LR_MULTIPLIER
    parameter = [torch.nn.Parameter(torch.zeros(1))]
    for optimizer in (
        torch.optim.Adam,
        torch.optim.AdamW,
        torch.optim.RMSprop,
        torch.optim.Adagrad,
        torch.optim.Adadelta,
    ):
        assert (
            is_adaptive(optimizer(parameter))
            and optimizer.__name__ in rows["scale_lr_multiplier"][3]
        )
    assert not is_adaptive(torch.optim.SGD(parameter, lr=0.1))


#: The packaged σN-Ens fine-tune recipes (experiments/<name>.yaml) by the "at a glance" column
#: that speaks for them: the Adam CNNs (digits' EfficientNet-Lite0, the six CIFAR ones), the
#: short SGD transformer fine-tune (MiniLM) and the paper's long SGD transformer recipes.
FINE_TUNE_RECIPES = {
    2: [
        "digits_lite0_signorm",
        *(
            f"{net}_{data}_signorm_finetune"
            for net in ("resnet18", "resnet50", "wrn")
            for data in ("c10", "c100")
        ),
    ],
    3: ["tweets_minilm_signorm"],
    4: ["vit_c100_signorm", "vit_imagenet_signorm", "bert_sst2_signorm"],
}


def test_the_at_a_glance_fine_tune_columns_give_the_recipes_tau_lambda_and_clipping():
    """The fine-tune columns of "at a glance" state the τ, the λ and the clipping that the
    packaged σN-Ens fine-tune recipes set: the guide and the recipes say the same thing."""
    rows = {row[0]: row for row in _table("| | from scratch (SGD) |")}
    cifar = {p.stem for p in (ROOT / "experiments").glob("*_signorm_finetune.yaml")}
    assert cifar == set(FINE_TUNE_RECIPES[2][1:])  # a new fine-tune recipe is checked too
    transformers = {p.stem for p in (ROOT / "experiments").glob("*_signorm.yaml")}
    assert {n for n in transformers if n.startswith(("vit_", "bert_"))} == set(FINE_TUNE_RECIPES[4])
    for column, recipes in FINE_TUNE_RECIPES.items():
        for name in recipes:
            config = yaml.safe_load((ROOT / "experiments" / f"{name}.yaml").read_text())
            model = config["routine"]["init_args"]["model"]["init_args"]
            tau = f"{float(model['tau']):g}"
            assert re.search(rf"(?<![\d.]){re.escape(tau)}(\.0)?(?![\d.])", rows["τ"][column]), (
                name,
                rows["τ"][column],
            )
            strength = f"{model['diversity_strength']:.0e}".replace("e-0", "e-")
            clip = config.get("trainer", {}).get("gradient_clip_val")
            assert rows["λ"][column].startswith(strength), (name, rows["λ"][column])
            expected = "none" if clip is None else f"{clip:.1f}"
            assert rows["clipping"][column].startswith(expected), (name, rows["clipping"][column])


def test_the_ranges_named_in_the_text_are_the_codes():
    constants = dict(
        re.findall(
            r"`(CONTROLLED_TAU_RANGE|TARGET_TOLERANCE|ACCURACY_DROP)` = "
            r"(\[[^\]]*\]|[0-9.]+)",
            TEXT,
        )
    )
    assert set(constants) == {"CONTROLLED_TAU_RANGE", "TARGET_TOLERANCE", "ACCURACY_DROP"}
    for name, value in constants.items():
        stated, expected = ast.literal_eval(value), getattr(diversity_target, name)
        assert (tuple(stated) if isinstance(stated, list) else stated) == expected, name
    tau_range, strength_range = re.search(
        r"τ and λ must lie\s+in (\[[^\]]*\]) and (\[[^\]]*\])", TEXT
    ).groups()
    assert tuple(ast.literal_eval(tau_range)) == regularization.TAU_RANGE
    assert tuple(ast.literal_eval(strength_range)) == (0, regularization.MAX_DIVERSITY_STRENGTH)


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_resolves():
    for target in re.findall(r"\]\(([^)]+)\)", TEXT):
        if target.startswith("http"):
            continue
        path, _, anchor = target.partition("#")
        resolved = (PAGE.parent / path).resolve() if path else PAGE
        assert resolved.exists(), target
        if anchor:
            headings = re.findall(r"^#+ (.+)$", resolved.read_text(), flags=re.MULTILINE)
            assert anchor in {_slug(h) for h in headings}, target


def _as_trained(model: torch.nn.Module) -> torch.nn.Module:
    """Norms moved off their initial state, as in a downloaded checkpoint (a conversion with
    pretrained=True refuses untrained norms)."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.weight.add_(0.01)
                module.running_var.fill_(2.0)
    return model


def _fit_one_step(namespace: dict, batches: list) -> None:
    """The page's routine and Trainer, one optimisation step (its other settings kept)."""
    trainer = namespace["trainer"]
    trainer.fit_loop.epoch_loop.max_steps = 1  # the page says its budget; one step here
    trainer.fit(
        namespace["routine"],
        train_dataloaders=torch.utils.data.DataLoader(batches, batch_size=None),
    )
    assert trainer.global_step == 1


def test_the_cnn_example_builds_and_trains_a_step(tmp_path, monkeypatch):
    import timm  # a dependency of the package

    monkeypatch.chdir(tmp_path)
    model_block, training_block = _python_blocks("## Worked example: a pretrained CNN")
    download = 'timm.create_model("resnet50.a1_in1k", pretrained=True, num_classes=10)'
    assert download in model_block
    # Stand-in for the downloaded weights: the same family (bottleneck blocks, "fc"), one block
    # a stage, untrained weights with norms moved off their initial state.
    namespace = {
        "stand_in": lambda: _as_trained(
            timm.create_model(
                "resnet50", pretrained=False, num_classes=10, layers=(1, 1, 1, 1), base_width=16
            )
        )
    }
    exec(compile(model_block.replace(download, "stand_in()"), str(PAGE), "exec"), namespace)
    exec(compile(training_block, str(PAGE), "exec"), namespace)

    model, trainer = namespace["model"], namespace["trainer"]
    assert model.num_estimators == 4 and model.regularized_layer_names
    recipe = yaml.safe_load((ROOT / "experiments" / "digits_lite0_signorm.yaml").read_text())
    # The example clips as the CNN fine-tune recipes do.
    assert trainer.max_steps == 1_600
    assert trainer.gradient_clip_val == recipe["trainer"].get("gradient_clip_val")
    optimizer = namespace["routine"].configure_optimizers()
    assert isinstance(optimizer, torch.optim.Adam)
    base, scales = optimizer.param_groups
    assert scales["lr"] == pytest.approx(ADAPTIVE_SCALE_LR_MULTIPLIER * base["lr"])
    assert base["lr"] == 1e-3 and scales["weight_decay"] == 0

    images, labels = torch.randn(2, 3, 32, 32), torch.tensor([0, 1])
    _fit_one_step(namespace, [(images, labels)] * 40)


def test_the_transformer_example_builds_and_trains_a_step(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model_block, training_block = _python_blocks("## Worked example: a pretrained transformer")
    namespace: dict = {}
    exec(compile(model_block, str(PAGE), "exec"), namespace)
    exec(compile(training_block, str(PAGE), "exec"), namespace)

    model, trainer, routine = namespace["model"], namespace["trainer"], namespace["routine"]
    assert model.num_estimators == 4 and model.regularized_layer_names
    assert trainer.max_steps == 480 and trainer.gradient_clip_val == 1.0
    recipe = routine.configure_optimizers()
    optimizer, scheduler = recipe["optimizer"], recipe["lr_scheduler"]
    assert isinstance(optimizer, torch.optim.SGD) and scheduler["interval"] == "step"
    shared, heads, scales = (group["initial_lr"] for group in optimizer.param_groups)
    assert (shared, heads) == pytest.approx((0.01, 0.01 * 4))
    assert scales == pytest.approx(0.01 * DEFAULT_SCALE_LR_MULTIPLIER * 4)

    tokenizer = namespace["datamodule"].tokenizer
    inputs = dict(tokenizer(["what a day", "not good at all"], padding=True, return_tensors="pt"))
    _fit_one_step(namespace, [(inputs, torch.tensor([0, 2]))] * 20)
