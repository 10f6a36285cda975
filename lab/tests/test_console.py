"""The ``torch-uncertainty`` console: a configuration error is one line, a misspelt option gets
"did you mean", and every τ message states the same range."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from signorm_lab.cli.console import summarise_parse_error
from torch_uncertainty_signorm.signorm.regularization import check_tau

RECIPE = Path(__file__).parents[2] / "experiments" / "digits_signorm.yaml"
COMMAND = Path(sys.executable).parent / "torch-uncertainty"


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [str(COMMAND), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_misspelt_option_in_a_recipe_is_one_line_with_did_you_mean(tmp_path):
    recipe = yaml.safe_load(RECIPE.read_text())
    model = recipe["routine"]["init_args"]["model"]["init_args"]
    model["tua"] = model.pop("tau")
    (tmp_path / "typo.yaml").write_text(yaml.safe_dump(recipe))
    result = _run(["fit", "--config", "typo.yaml"], tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()  # no usage block, no Namespace dump
    assert line == (
        "torch-uncertainty: invalid configuration: routine.init_args.model: Option 'tua' is not "
        "accepted by torch_uncertainty_signorm.signorm_ensemble; did you mean 'tau'? "
        "(torch-uncertainty fit --help lists the options)"
    )
    assert not (tmp_path / "logs").exists()


def test_summaries_of_other_parse_errors():
    options = ["--trainer.max_epochs", "--trainer.max_steps", "--num_threads"]
    assert summarise_parse_error("Unrecognized arguments: --num_thread=1", options) == (
        "Unrecognized arguments: --num_thread=1; did you mean '--num_threads'?"
    )
    nested = (
        'Parser key "data":\n  Does not validate against any of the Union subtypes\n'
        "  Subtypes: [<class 'X'>]\n  Errors:\n    - Import path x.Y does not exist\n"
        "  Given value type: <class 'str'>\n  Given value: x.Y"
    )
    assert summarise_parse_error(nested) == 'Parser key "data": - Import path x.Y does not exist'


@pytest.mark.parametrize("tau", [0, -1.0, float("inf"), True, 1e-4, 1e9, "0.1"])
def test_every_bad_tau_states_the_same_range(tau):
    with pytest.raises(ValueError, match=r"is outside \[0.001, 1000\] \(TAU_RANGE\)") as error:
        check_tau(tau)
    assert f"got {tau!r}" in str(error.value)


def test_a_torchvision_built_for_another_torch_is_named(tmp_path):
    """torchvision failing to register its operators (a build for another torch) ends in one line
    naming both versions and the remedy, not an import traceback."""
    fake = tmp_path / "site" / "torchvision"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        'raise RuntimeError("operator torchvision::nms does not exist")\n'
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(tmp_path / "site"), os.environ.get("PYTHONPATH")])
        ),
    }
    result = subprocess.run(
        [str(COMMAND), "fit", "--config", str(RECIPE)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("torch-uncertainty: torchvision ") and " does not match torch " in line
    assert "install the pair together" in line


def test_a_missed_target_names_the_runs_own_member_spread():
    from torch_uncertainty_signorm.signorm.diversity_target import (
        DiversityTarget,
        missed_target_message,
    )

    upper = DiversityTarget(0.9, 10.0, 100)  # τ at its upper bound: members stay more diverse
    assert "member_spread" not in missed_target_message(upper, 0.6, 90, 0.0)
    assert "a lower member_spread (it is 0.3)" in missed_target_message(upper, 0.6, 90, 0.3)
    lower = DiversityTarget(0.3, 0.001, 100)  # τ at its lower bound: members share too much
    assert "Give the model member_spread (e.g. 0.3)" in missed_target_message(lower, 0.6, 90)
    assert "Raise member_spread (it is 0.3)" in missed_target_message(lower, 0.6, 90, 0.3)


def test_identical_members_are_warned_about_once_for_one_validation():
    """One epoch, one validation at its end, then the end of fit at the same step: one warning."""
    import warnings

    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from fixtures.backbones import randomize_norms, tiny_resnet
    from fixtures.digits import cpu_trainer
    from torch_uncertainty_signorm import signorm_ensemble
    from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine

    torch.manual_seed(0)
    model = signorm_ensemble(
        randomize_norms(tiny_resnet()),
        2,
        pretrained=True,
        regularized_layers="resnet18",
        tau=0.5,
        diversity_strength=1e-3,
    )
    routine = SigmaNormClassificationRoutine(
        model,
        10,
        nn.CrossEntropyLoss(),
        optim_recipe=lambda m: torch.optim.SGD(m.parameters(), lr=0.01),
    )
    generator = torch.Generator().manual_seed(0)
    data = TensorDataset(
        torch.randn(8, 3, 32, 32, generator=generator),
        torch.randint(0, 10, (8,), generator=generator),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cpu_trainer(max_epochs=1, num_sanity_val_steps=0).fit(
            routine, DataLoader(data, batch_size=4), DataLoader(data, batch_size=4)
        )
    identical = [w for w in caught if "members are still one model" in str(w.message)]
    assert len(identical) == 1, [str(w.message) for w in identical]


def test_a_wrapped_models_option_given_to_the_wrapper_names_the_spelling_that_works(tmp_path):
    """``--routine.init_args.model.init_args.width_multiplier`` works for Packed (its model is the
    ResNet) and is refused for σN-Ens, whose model wraps the ResNet: the refusal spells it out."""
    result = _run(
        [
            "fit",
            "--config",
            str(RECIPE),
            "--routine.init_args.model.init_args.width_multiplier=0.5",
        ],
        tmp_path,
    )
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert (
        "signorm_ensemble wraps a model: its options are spelt --routine.init_args.model."
        "init_args.model.init_args.width_multiplier"
    ) in line
