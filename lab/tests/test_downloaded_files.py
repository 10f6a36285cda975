"""Nothing a downloaded file names may write, import or hang: checkpoints, exports, recipes given
to the export command, and results folders.

Each case runs where a user meets it (the ``torch-uncertainty`` command, the export command,
``signorm-regression``, ``load_ensemble``) on files crafted in a temporary folder, and checks that
the user's files are unchanged, that no marker module was imported, that the answer comes within a
time bound, and that the refusal is one line naming the file, the value and what is valid.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
import yaml

ROOT = Path(__file__).parents[2]
DIGITS = ROOT / "experiments" / "digits_signorm.yaml"
BIN = Path(sys.executable).parent
ROUTINE = "torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine"
TINY = [
    "--routine.init_args.model.init_args.num_estimators=2",
    "--routine.init_args.model.init_args.model.init_args.width_multiplier=0.0625",
]
PROFILE = b"export PATH=$HOME/bin:$PATH\nalias ll='ls -l'\n"


def _run(command: list[str], cwd: Path, timeout: float = 240, **env: str):
    """``command`` in ``cwd``: (exit status, stderr's last line, seconds)."""
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", **env}
    start = time.perf_counter()
    done = subprocess.run(
        command,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
        check=False,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return done.returncode, (lines[-1] if lines else ""), time.perf_counter() - start, done


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def _marker_module(folder: Path, name: str) -> Path:
    """``folder/name.py``, which creates the returned marker file when imported."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / f"{name}.imported"
    (folder / f"{name}.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).touch()\nclass Evil:\n    pass\n"
    )
    return marker


# ------------------------------------------------------------------ a trained-looking checkpoint
@pytest.fixture(scope="module")
def digits_checkpoint(tmp_path_factory) -> Path:
    """A Lightning checkpoint of the digits recipe at a tiny size (M = 2), as a run saves it."""
    import lightning

    from signorm_lab.cli import cli_main

    root = tmp_path_factory.mktemp("checkpoint")
    cwd = Path.cwd()
    os.chdir(root)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            routine = cli_main(
                ["--config", str(DIGITS), *TINY, "--trainer.logger=false"], run=False
            ).routine
    finally:
        os.chdir(cwd)
    path = root / "digits.ckpt"
    torch.save(
        {
            "state_dict": routine.state_dict(),
            "hyper_parameters": dict(routine.hparams),
            "pytorch-lightning_version": lightning.__version__,
            "global_step": 0,
            "epoch": 0,
        },
        path,
    )
    return path


def _crafted(checkpoint: Path, path: Path, **hyper_parameters) -> Path:
    saved = torch.load(checkpoint, weights_only=True)
    saved["hyper_parameters"] = {**saved["hyper_parameters"], **hyper_parameters}
    torch.save(saved, path)
    return path


# ------------------------------------------------------------------------------- 1. data loss
@pytest.mark.slow
def test_a_checkpoint_never_chooses_where_results_are_written(digits_checkpoint, tmp_path):
    """csv_filename and save_to_csv come from the recipe: a checkpoint's absolute path (a
    user's shell profile) is never written, the results stay in the run's folder, written whole."""
    profile = tmp_path / "home" / ".bashrc"
    profile.parent.mkdir()
    profile.write_bytes(PROFILE)
    ckpt = _crafted(
        digits_checkpoint,
        tmp_path / "downloaded.ckpt",
        csv_filename=str(profile),
        save_to_csv=True,
        log_plots=True,
    )
    older = tmp_path / "logs" / "digits" / "signorm" / "version_0" / "checkpoints"
    older.mkdir(parents=True)  # an earlier run killed (SIGKILL) while writing a checkpoint
    stale = older / ".epoch=0-step=3.ckpt.4242-0123456789abcdef.partial"
    stale.write_bytes(b"x" * 2_000_000)
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    status, _, seconds, done = _run(
        [
            str(BIN / "torch-uncertainty"),
            "test",
            "--config",
            str(DIGITS),
            *TINY,
            "--ckpt_path",
            str(ckpt),
            "--trainer.limit_test_batches=1",
            "--trainer.callbacks=null",
        ],
        tmp_path,
    )
    assert status == 0, done.stderr[-3000:]
    assert profile.read_bytes() == PROFILE
    assert sorted(p.name for p in profile.parent.iterdir()) == [".bashrc"]
    run = tmp_path / "logs" / "digits" / "signorm" / "version_1"
    assert (run / "results.csv").read_text().count("\n") == 2  # header and one row
    assert (run / "config.yaml").stat().st_size > 0
    assert not list(run.rglob("*.png")) and list(tmp_path.rglob(".*.partial")) == [stale]
    # another run's partial file: named on one line, left where it is
    reported = [line for line in done.stderr.splitlines() if stale.name in line]
    assert len(reported) == 1 and "other runs' folders" in reported[0], done.stderr[-3000:]
    assert reported[0].startswith("torch-uncertainty: 1 partial file(s) (2.0 MB)")
    assert seconds < 240


@pytest.mark.slow  # the trained checkpoint it reads takes seconds to make
def test_load_routine_refuses_a_file_name_leading_out(digits_checkpoint, tmp_path):
    from signorm_lab.safety.routine_checkpoints import load_routine

    elsewhere = str(tmp_path / "elsewhere" / "x.csv")  # an absolute path out of the run
    ckpt = _crafted(digits_checkpoint, tmp_path / "downloaded.ckpt", csv_filename=elsewhere)
    with pytest.raises(ValueError, match=rf"csv_filename='{elsewhere}' is not a plain file name"):
        load_routine(ckpt)


def _link_to_profile(run: Path, outside: Path) -> Path:
    (run / "results.csv").symlink_to(outside)
    return run / "results.csv"


def _foreign_table(run: Path, outside: Path) -> Path:
    (run / "results.csv").write_bytes(PROFILE)
    return run / "results.csv"


def _other_run(run: Path, outside: Path) -> Path:
    return outside


@pytest.mark.parametrize(
    "make",
    [_link_to_profile, _foreign_table, _other_run],
    ids=["symlink", "not a results table", "outside the run"],
)
def test_extra_results_rewrite_only_the_runs_own_table(make, tmp_path):
    from signorm_lab.evaluation import append_to_last_row

    run, outside = tmp_path / "run", tmp_path / ".bashrc"
    run.mkdir()
    outside.write_bytes(PROFILE)
    path = make(run, outside)
    before = _digest(tmp_path)
    with pytest.warns(UserWarning, match=r"was not updated with the extra results: "):
        append_to_last_row(path, {"test/div/jensen_gap": 0.5}, run_dir=run)
    assert _digest(tmp_path) == before


def test_extra_results_are_added_to_the_runs_table_whole(tmp_path):
    from signorm_lab.evaluation import append_to_last_row

    (tmp_path / "results.csv").write_text("test/cls/Acc\n0.9000\n")
    append_to_last_row(tmp_path / "results.csv", {"test/div/jensen_gap": 0.5}, run_dir=tmp_path)
    assert (tmp_path / "results.csv").read_text().splitlines() == [
        "test/cls/Acc,test/div/jensen_gap",
        "0.9000,0.5000",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]


# ---------------------------------------------------------------------- 2. code execution
_EVIL = "evil_marker.Evil"
_MODEL = {
    "class_path": "torch_uncertainty_signorm.signorm_ensemble",
    "init_args": {
        "model": {
            "class_path": "torch_uncertainty.models.classification.resnet",
            "init_args": {"in_channels": 1, "num_classes": 10, "arch": 18, "style": "cifar"},
        },
        "num_estimators": 2,
    },
}


def _recipe(**blocks) -> dict:
    recipe = {
        "routine": {"class_path": ROUTINE, "init_args": {"num_classes": 10, "model": _MODEL}},
        "data": {"class_path": "signorm_lab.datamodules.DigitsDataModule"},
    }
    for dotted, value in blocks.items():
        *parents, leaf = dotted.split("__")
        node = recipe
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return recipe


_BLOCK = {"class_path": _EVIL, "init_args": {}}
RECIPES = {
    # TorchUncertainty's format: model: at the top, renamed routine: after the old check
    "tu format model:": ({"model": {"model": _BLOCK, "num_classes": 10}}, "model.model.class_path"),
    "model block as a YAML string": (
        _recipe(routine__init_args__model=json.dumps(_BLOCK)),
        "routine.init_args.model",
    ),
    "routine: as a file path": ({"routine": "routine.yaml"}, "routine='routine.yaml'"),
    "data:": (_recipe(data=_BLOCK), "data.class_path"),
    "optimizer:": (_recipe(optimizer=_BLOCK), "optimizer.class_path"),
    "loss": (_recipe(routine__init_args__loss=_BLOCK), "routine.init_args.loss.class_path"),
    "trainer.logger": (_recipe(trainer__logger=_BLOCK), "trainer.logger.class_path"),
    "trainer.callbacks": (_recipe(trainer__callbacks=[_BLOCK]), "trainer.callbacks[0].class_path"),
    "a base file": ({"base": "base.yaml", **_recipe()}, "trainer.callbacks[0].class_path"),
    "a class as a dotted string": (
        _recipe(routine__init_args__loss=_EVIL),
        "routine.init_args.loss",
    ),
    # a string YAML reads as a block on one line, where the parser takes a class
    "a one-line YAML block": (
        _recipe(routine__init_args__loss=f"class_path: {_EVIL}"),
        "routine.init_args.loss.class_path",
    ),
    "a one-line block inside init_args": (
        _recipe(
            routine__init_args__loss={
                "class_path": "torch.nn.CrossEntropyLoss",
                "init_args": {"weight": f"class_path: {_EVIL}"},
            }
        ),
        "routine.init_args.loss.init_args.weight.class_path",
    ),
    "a one-line block as format_batch_fn": (
        _recipe(routine__init_args__format_batch_fn=f"class_path: {_EVIL}"),
        "routine.init_args.format_batch_fn.class_path",
    ),
    # a value naming a named pipe, which the parser would open and block on
    "a value naming a pipe": (
        _recipe(routine__init_args__loss="pipe.yaml"),
        "routine.init_args.loss='pipe.yaml' names",
    ),
}

_DRIVER = """
import json, sys, time
from signorm_lab.cli.export import main
for name, recipe in json.loads(sys.argv[1]).items():
    start = time.perf_counter()
    try:
        main(["--config", recipe, "--ckpt_path", "run.ckpt", "--output", "out_" + name])
        message = "exported"
    except BaseException as error:
        message = f"{type(error).__name__}: {error}"
    print(json.dumps([name, message, time.perf_counter() - start]), flush=True)
"""


@pytest.fixture(scope="module")
def export_refusals(tmp_path_factory) -> tuple[dict[str, tuple[str, float]], Path, dict]:
    """Every crafted recipe given to the export command (one interpreter, the marker module
    importable from PYTHONPATH): {case: (what the command said, seconds)}."""
    root = tmp_path_factory.mktemp("export_recipes")
    marker = _marker_module(root / "site", "evil_marker")
    (root / "run.ckpt").write_bytes(b"never read")
    (root / "routine.yaml").write_text(
        yaml.safe_dump({"class_path": ROUTINE, "init_args": {"model": _BLOCK}})
    )
    (root / "base.yaml").write_text(yaml.safe_dump({"trainer": {"callbacks": [_BLOCK]}}))
    os.mkfifo(root / "pipe.yaml")
    recipes = {}
    for index, (name, (recipe, _)) in enumerate(RECIPES.items()):
        recipes[name] = f"recipe_{index}.yaml"
        (root / recipes[name]).write_text(yaml.safe_dump(recipe))
    (root / "driver").mkdir()
    (root / "driver" / "driver.py").write_text(_DRIVER)
    before = _digest(root)
    done = subprocess.run(
        [sys.executable, str(root / "driver" / "driver.py"), json.dumps(recipes)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(root / "site"), "OMP_NUM_THREADS": "1"},
        check=False,
    )
    answers = {
        name: (message, seconds)
        for name, message, seconds in map(json.loads, done.stdout.splitlines())
    }
    assert not marker.exists(), "a class path of a recipe was imported"
    assert _digest(root) == before
    return answers, root, recipes


@pytest.mark.slow
@pytest.mark.parametrize("case", list(RECIPES))
def test_the_export_command_checks_every_class_path_of_the_recipe(case, export_refusals):
    answers, root, recipes = export_refusals
    message, seconds = answers[case]
    assert message.startswith("ValueError: "), message
    assert "\n" not in message
    assert RECIPES[case][1] in message and "RECIPE_CLASS_PATHS" in message
    assert recipes[case] in message or "routine.yaml" in message or "base.yaml" in message
    if case == "a value naming a pipe":
        assert "is not a regular file (a named pipe" in message
    assert seconds < 30
    assert not (root / f"out_{case}").exists()


@pytest.mark.slow
def test_python_m_imports_nothing_from_the_working_directory(tmp_path):
    """A module named like a library the command imports late, lying beside the recipe."""
    marker = _marker_module(tmp_path, "safetensors")
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(_recipe()))
    status, last, _, done = _run(
        [
            sys.executable,
            "-m",
            "signorm_lab.cli.export",
            "--config",
            "recipe.yaml",
            "--ckpt_path",
            "missing.ckpt",
            "--output",
            "out",
        ],
        tmp_path,
        timeout=180,
    )
    assert not marker.exists(), done.stderr[-2000:]
    assert status != 0 and "missing.ckpt" in last


@pytest.mark.slow
def test_the_export_script_runs_the_installed_package_not_a_folder_named_like_it(tmp_path):
    """``signorm-export`` from a folder holding a ``torch_uncertainty_signorm/`` package of its
    own: the installed package runs (``python -m`` would find the folder first)."""
    package = tmp_path / "torch_uncertainty_signorm"
    marker = _marker_module(package, "__init__")
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(_recipe()))
    script = Path(sys.executable).parent / "signorm-export"
    status, last, _, done = _run(
        [str(script), "--config", "recipe.yaml", "--ckpt_path", "missing.ckpt", "--output", "out"],
        tmp_path,
        timeout=180,
    )
    assert not marker.exists(), done.stderr[-2000:]
    assert status != 0 and "missing.ckpt" in last


# --------------------------------------------------------------------- 3. hangs and memory
def _alias_bomb(levels: int = 9) -> str:
    lines = ["seed_everything: 0", "routine:", "  a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def _regression_folder(tmp_path: Path, case: str) -> list[str]:
    run = tmp_path / "runs" / "version_0"
    run.mkdir(parents=True)
    reference = tmp_path / "reference.csv"
    reference.write_text("method,Acc\nours,90.0\n")
    if case == "FIFO results.csv":
        os.mkfifo(run / "results.csv")
    else:
        (run / "results.csv").write_text("test/cls/Acc\n0.9\n")
    if case == "alias bomb config.yaml":
        (run / "config.yaml").write_text(_alias_bomb())
    if case == "FIFO --reference":
        reference.unlink()
        os.mkfifo(reference)
    if case == "row with an extra field":
        (run / "results.csv").write_text("test/cls/Acc,test/cls/NLL\n0.9,0.3,0.1\n")
    tolerance = ["--tol", "Acc=inf"] if case == "--tol Acc=inf" else []
    return [str(tmp_path / "runs"), "--reference", str(reference), *tolerance]


REGRESSION = {
    "FIFO results.csv": r"results='.*results.csv' is a named pipe \(FIFO\); expected a results",
    "alias bomb config.yaml": r"config='.*config.yaml' expands to more than 100000 YAML nodes",
    "FIFO --reference": r"rows='.*reference.csv' is a named pipe \(FIFO\)",
    "row with an extra field": r"results.csv: line 2 has 3 fields but the header has 2",
    "--tol Acc=inf": r"--tol Acc=inf: expected a finite number >= 0",
}


@pytest.mark.parametrize("case", list(REGRESSION))
def test_the_regression_check_refuses_what_would_hang_it(case, tmp_path):
    import re

    args = _regression_folder(tmp_path, case)
    before = {p.name for p in tmp_path.rglob("*")}
    status, last, seconds, done = _run(
        [str(BIN / "signorm-regression"), *args], tmp_path, timeout=60
    )
    assert status == 2 and re.search(REGRESSION[case], last), done.stderr
    assert last.startswith("signorm-regression: error: ") and "usage:" not in done.stderr
    assert seconds < 30
    assert {p.name for p in tmp_path.rglob("*")} == before


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory) -> Path:
    from signorm_lab.export import build_model, export_ensemble

    spec = {
        "class_path": "torch_uncertainty_signorm.signorm_ensemble",
        "init_args": {
            "model": {
                "class_path": "torch_uncertainty.models.classification.resnet",
                "init_args": {
                    "in_channels": 1,
                    "num_classes": 10,
                    "arch": 18,
                    "style": "cifar",
                    "width_multiplier": 0.0625,
                },
            },
            "num_estimators": 2,
        },
    }
    return export_ensemble(
        build_model(spec).eval(), spec, tmp_path_factory.mktemp("export") / "export", members=True
    )


def _edited_export(export_dir: Path, folder: Path, edit) -> Path:
    import shutil

    shutil.copytree(export_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    edit(config, folder)
    (folder / "config.json").write_text(json.dumps(config).replace('"HUGE"', "9" * 5000))
    return folder


def _other_model_type(config, folder):
    config["model"]["init_args"]["model"] = {
        "class_path": "signorm_lab.models.backbones.bert_classifier",
        "init_args": {
            "pretrained": False,
            "config": {"model_type": "gpt2", "n_layer": 100000, "n_layers": 30000},
        },
    }


def _nested_blocks(config, folder):
    block = config["model"]["init_args"]["model"]
    for _ in range(12):
        block = {
            "class_path": "torch_uncertainty_signorm.signorm_ensemble",
            "init_args": {"model": block, "num_estimators": 2},
        }
    config["model"]["init_args"]["model"] = block


def _members_without_heads(config, folder):
    from safetensors.torch import load_file, save_file

    config["num_estimators"] = config["model"]["init_args"]["num_estimators"] = 1000
    weights = load_file(folder / "ensemble.safetensors")
    del weights["heads.weight"]
    save_file(weights, folder / "ensemble.safetensors")


def _regex_in_config_block(config, folder):
    config["model"]["init_args"]["config"] = {"regularized_layers": "(.*a){30}X"}


def _unknown_key(config, folder):
    config["trusted"] = ["os"]


def _huge_integer(config, folder):
    config["num_estimators"] = "HUGE"  # written as 5,000 digits


def _negative_running_var(config, folder):
    from safetensors.torch import load_file, save_file

    for name in ("ensemble.safetensors", "member_0.safetensors"):
        weights = load_file(folder / name)
        key = next(key for key in weights if key.endswith("running_var"))
        weights[key] = -weights[key].abs() - 1
        save_file(weights, folder / name)


def _heads_of_1024_members(config, folder):
    from safetensors.torch import load_file, save_file

    config["num_estimators"] = config["model"]["init_args"]["num_estimators"] = 1024
    weights = load_file(folder / "ensemble.safetensors")
    heads = weights["heads.weight"]
    weights["heads.weight"] = heads[:1].expand(1024, *heads.shape[1:]).contiguous()
    save_file(weights, folder / "ensemble.safetensors")


EXPORTS = {
    "heads of 1024 members, σNorm layers of 2": (
        _heads_of_1024_members,
        (
            r"num_estimators=1024, but '.*ensemble.safetensors' holds "
            r"σNorm scale logits of another number of members "
            r"\(backbone\..*scale_logits \(2, \d+\) and \d+ more\)"
        ),
    ),
    "negative running_var": (
        _negative_running_var,
        r"safetensors' holds negative values in .*running_var",
    ),
    "unknown top-level key": (_unknown_key, r"config.json' has unknown keys 'trusted'"),
    "5,000-digit integer": (_huge_integer, r"config.json' could not be read \(Exceeds the limit"),
    "bert_classifier of another model type": (
        _other_model_type,
        (
            r"config.n_layer=100000 repeats a layer 100000 times \(valid: 0 to "
            r"128\)"
        ),
    ),
    "nested backbone blocks": (_nested_blocks, r"model nests 1[0-9] class blocks \(at most 6"),
    "num_estimators=1000 without heads": (
        _members_without_heads,
        r"ensemble.safetensors' lacks heads.weight",
    ),
    "regex in the config: block": (
        _regex_in_config_block,
        (
            r"model.init_args.config.regularized_layers='\(\.\*a\)\{30\}X' "
            r"is a pattern; an export holds the names"
        ),
    ),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", list(EXPORTS))
def test_an_export_is_checked_against_its_weights_before_anything_is_built(
    case, export_dir, tmp_path
):
    from signorm_lab.export import load_ensemble, load_member

    edit, message = EXPORTS[case]
    folder = _edited_export(export_dir, tmp_path / "export", edit)
    before = _digest(folder)
    start = time.perf_counter()
    for load in (lambda: load_ensemble(folder), lambda: load_member(folder, 0)):
        with pytest.raises(ValueError, match=message) as error:
            load()
        assert "\n" not in str(error.value)
    assert time.perf_counter() - start < 20
    assert _digest(folder) == before


def _regex_checkpoint(tmp_path: Path, digits_checkpoint: Path) -> Path:
    hyper = torch.load(digits_checkpoint, weights_only=True)["hyper_parameters"]
    model = json.loads(json.dumps(hyper["model"]))
    model["init_args"]["regularized_layers"] = "(a+)+$"
    return _crafted(digits_checkpoint, tmp_path / "downloaded.ckpt", model=model)


def _deflate_bomb(tmp_path: Path, digits_checkpoint: Path) -> Path:
    path = tmp_path / "downloaded.ckpt"
    with (
        zipfile.ZipFile(digits_checkpoint) as source,
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as bomb,
    ):
        for info in source.infolist():
            bomb.writestr(info.filename, source.read(info.filename))
        bomb.writestr("downloaded/data/999", b"\0" * (64 << 20))
    return path


def _fifo_checkpoint(tmp_path: Path, digits_checkpoint: Path) -> Path:
    os.mkfifo(tmp_path / "downloaded.ckpt")
    return tmp_path / "downloaded.ckpt"


def _negative_variance(tmp_path: Path, digits_checkpoint: Path) -> Path:
    saved = torch.load(digits_checkpoint, weights_only=True)
    key = next(key for key in saved["state_dict"] if key.endswith("running_var"))
    saved["state_dict"][key] = -saved["state_dict"][key].abs() - 1
    torch.save(saved, tmp_path / "downloaded.ckpt")
    return tmp_path / "downloaded.ckpt"


def _reading_a_user_file(tmp_path: Path, digits_checkpoint: Path) -> Path:
    """A checkpoint choosing the file the model's weights are read from (the recipe leaves
    `checkpoint` unset)."""
    hyper = torch.load(digits_checkpoint, weights_only=True)["hyper_parameters"]
    model = json.loads(json.dumps(hyper["model"]))
    model["init_args"].update(checkpoint=str(tmp_path / ".bashrc"), pretrained=True)
    return _crafted(digits_checkpoint, tmp_path / "downloaded.ckpt", model=model)


def _infinite_target(tmp_path: Path, digits_checkpoint: Path) -> Path:
    return _crafted(digits_checkpoint, tmp_path / "downloaded.ckpt", target_diversity=float("inf"))


def _nan_optimizer_state(tmp_path: Path, digits_checkpoint: Path) -> Path:
    saved = torch.load(digits_checkpoint, weights_only=True)
    saved["optimizer_states"] = [
        {
            "state": {0: {"momentum_buffer": torch.full((3,), torch.nan)}},
            "param_groups": [{"lr": 0.1, "params": [0]}],
        }
    ]
    torch.save(saved, tmp_path / "downloaded.ckpt")
    return tmp_path / "downloaded.ckpt"


CHECKPOINTS = {
    "NaN optimizer state": (
        _nan_optimizer_state,
        (
            "holds non-finite values (NaN or inf) in optimizer_states[0]"
            "['state'][0]['momentum_buffer']"
        ),
    ),
    "a weights file chosen by the checkpoint": (
        _reading_a_user_file,
        (
            ".bashrc', which the recipe leaves unset: an argument that "
            "reads or fetches weights or files (signorm_lab."
            "safety.model_registry.FETCHING_ARGUMENTS) is never taken from a "
            "checkpoint"
        ),
    ),
    "an infinite setting": (
        _infinite_target,
        (
            "sets routine.init_args.target_diversity=inf, which the recipe "
            "leaves unset: a value taken from a checkpoint must be a finite "
            "number"
        ),
    ),
    "negative running_var": (_negative_variance, "holds negative values in state_dict['model."),
    "regex in regularized_layers": (
        _regex_checkpoint,
        "regularized_layers='(a+)+$' holds a repeat inside a repeat",
    ),
    "deflate bomb": (_deflate_bomb, "record 'downloaded/data/999' inflates from"),
    "FIFO": (_fifo_checkpoint, "is not a regular file (a device or a pipe)"),
}


_CLI_DRIVER = """
import contextlib, io, json, sys, time
from signorm_lab.cli import main
for name, args in json.loads(sys.argv[1]).items():
    stderr, start, status = io.StringIO(), time.perf_counter(), 0
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            main(args)
    except SystemExit as stop:
        status = stop.code
    except BaseException as error:
        status, stderr = -1, io.StringIO(f"Traceback: {type(error).__name__}: {error}")
    print(json.dumps([name, status, stderr.getvalue(), time.perf_counter() - start]), flush=True)
"""
CSV_NAMES = ["../../.bashrc"]  # through the command; the other names by check_file_name


@pytest.fixture(scope="module")
def command_refusals(digits_checkpoint, tmp_path_factory) -> tuple[dict, Path]:
    """Every crafted checkpoint and output name given to ``torch-uncertainty test`` (one
    interpreter): {case: (exit status, stderr, seconds)}."""
    root = tmp_path_factory.mktemp("command_refusals")
    recipe = root / "recipe.yaml"  # leaves regularized_layers unset
    recipe.write_text(DIGITS.read_text().replace("        regularized_layers: resnet18\n", ""))
    cases = {}
    for name, (make, _) in CHECKPOINTS.items():
        folder = root / name.replace(" ", "_")
        folder.mkdir()
        cases[name] = [
            "test",
            "--config",
            str(recipe),
            *TINY,
            "--ckpt_path",
            str(make(folder, digits_checkpoint)),
        ]
    for name in CSV_NAMES:
        cases[f"csv_filename={name}"] = [
            "test",
            "--config",
            str(DIGITS),
            *TINY,
            f"--routine.init_args.csv_filename={name}",
        ]
    (root / "driver").mkdir()
    (root / "driver" / "driver.py").write_text(_CLI_DRIVER)
    before = _digest(root)
    done = subprocess.run(
        [sys.executable, str(root / "driver" / "driver.py"), json.dumps(cases)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    answers = {
        name: (status, stderr, seconds)
        for name, status, stderr, seconds in map(json.loads, done.stdout.splitlines())
    }
    assert set(answers) == set(cases), done.stderr[-3000:]
    assert _digest(root) == before and not (root / "logs").exists()
    return answers, root


def _refusal(answer) -> str:
    status, stderr, seconds = answer
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert status == 1 and "Traceback" not in stderr, stderr[-3000:]
    assert seconds < 60
    return lines[-1]


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CHECKPOINTS))
def test_a_checkpoint_given_to_the_command_cannot_hang_it(case, command_refusals):
    last = _refusal(command_refusals[0][case])
    assert CHECKPOINTS[case][1] in last and "downloaded.ckpt" in last


@pytest.mark.slow
@pytest.mark.parametrize("name", CSV_NAMES)
def test_a_results_file_name_leading_out_of_the_run_is_refused(name, command_refusals):
    last = _refusal(command_refusals[0][f"csv_filename={name}"])
    assert f"csv_filename={name!r} is not a plain file name" in last and "results.csv" in last


@pytest.mark.parametrize("name", ["absolute", "..", "", "a/b.csv", "x\0.csv"])
def test_only_plain_file_names_are_output_names(name, tmp_path):
    from signorm_lab.safety.files import check_file_name

    if name == "absolute":
        name = str(tmp_path / "elsewhere.csv")

    with pytest.raises(
        ValueError,
        match=r"csv_filename=.* is not a plain file name: a run writes "
        r"its files inside its own folder only",
    ):
        check_file_name(name, "routine.init_args.csv_filename")
    assert check_file_name("results_ood.csv", "csv_filename") == "results_ood.csv"


@pytest.mark.timeout(30)
def test_a_checkpoint_swapped_for_a_pipe_after_the_checks_is_refused_at_open(tmp_path):
    """What Lightning's load meets when --ckpt_path became a FIFO after the command's checks."""
    from signorm_lab.safety.checkpoint_io import AtomicCheckpointIO

    os.mkfifo(tmp_path / "best.ckpt")
    with pytest.raises(
        ValueError,
        match=r"ckpt_path='.*best.ckpt' is a named pipe \(FIFO\); "
        r"expected a checkpoint file",
    ):
        AtomicCheckpointIO().load_checkpoint(tmp_path / "best.ckpt")


# ----------------------------------------------------------------- 4. partial and mixed files
def test_an_interrupted_overwrite_leaves_the_previous_export_whole(
    export_dir, tmp_path, monkeypatch
):
    """SIGTERM (SystemExit in the command) while a member is written: the folder is the
    previous export, file for file, with no partial file; then --overwrite replaces it whole."""
    import shutil

    from signorm_lab.export import build_model, export_ensemble, load_member, writing

    out = tmp_path / "export"
    shutil.copytree(export_dir, out)
    (out / "notes.txt").write_text("the user's")
    before = _digest(out)
    spec = json.loads((out / "config.json").read_text())["model"]
    spec["init_args"] = {k: spec["init_args"][k] for k in ("model", "num_estimators")}
    spec["init_args"]["num_estimators"] = 3
    calls = []

    def cut_off(module, path, **kwargs):
        calls.append(path)
        if len(calls) == 3:
            raise SystemExit(143)
        return save_model(module, path, **kwargs)

    save_model = writing.save_model
    monkeypatch.setattr(writing, "save_model", cut_off)
    with pytest.raises(SystemExit):
        export_ensemble(build_model(spec).eval(), spec, out, members=True, overwrite=True)
    assert _digest(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]
    monkeypatch.undo()
    export_ensemble(build_model(spec).eval(), spec, out, members=True, overwrite=True)
    assert (out / "notes.txt").read_text() == "the user's"
    assert json.loads((out / "config.json").read_text())["num_estimators"] == 3
    assert load_member(out, 2).training is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]


def test_config_yaml_is_written_whole_or_not_at_all(tmp_path):
    """A run stopped while its config.yaml is written leaves no empty config.yaml."""
    from jsonargparse import ArgumentParser

    from signorm_lab.cli.run_folders import _save_whole

    parser = ArgumentParser()
    parser.add_argument("--tau", type=float, default=0.1)

    def stopped(*args, **kwargs):
        raise SystemExit(143)

    parser.dump = stopped
    with pytest.raises(SystemExit):
        _save_whole(
            parser,
            parser.save,
            parser.parse_args([]),
            tmp_path / "config.yaml",
            skip_none=False,
            overwrite=False,
            multifile=False,
        )
    assert list(tmp_path.iterdir()) == []
    del parser.dump
    _save_whole(
        parser,
        parser.save,
        parser.parse_args([]),
        tmp_path / "config.yaml",
        skip_none=False,
        overwrite=False,
        multifile=False,
    )
    assert yaml.safe_load((tmp_path / "config.yaml").read_text()) == {"tau": 0.1}


def test_partial_files_left_by_sigkill_are_named_and_left_untouched(tmp_path):
    """Only the process that created a temporary file removes it: another's (SIGKILL), and
    a user's file that merely looks like one, are named or ignored, never removed."""
    from signorm_lab.safety.checkpoint_io import AtomicCheckpointIO

    stale = tmp_path / ".epoch=0-step=10.ckpt.4242-0123456789abcdef.partial"
    stale.write_bytes(b"x" * 2_000_000)
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    mine = tmp_path / "notes.partial"
    mine.write_text("not ours")
    with pytest.warns(
        UserWarning,
        match=r"1 temporary file\(s\) left in .* by a write "
        r"that was cut off .*epoch=0-step=10.*left untouched",
    ):
        AtomicCheckpointIO().save_checkpoint({"state_dict": {}}, tmp_path / "last.ckpt")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["last.ckpt", "notes.partial", stale.name]
    )
    assert stale.read_bytes() == b"x" * 2_000_000


# ------------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("layer1.*", None),
        ("(.*\\.)?layer\\d+\\.\\d+\\.bn2", None),
        ("(a|ab)*c", "an alternation inside a repeat"),
        (".*.*.*.*.*x", "holds 5 repeats"),
        ("(x)\\1", "a back-reference"),
    ],
)
def test_patterns_read_from_files_match_in_bounded_time(name, expected):
    from signorm_lab.safety.patterns import check_pattern

    if expected is None:
        assert check_pattern("regularized_layers", name) == name
    else:
        with pytest.raises(ValueError, match=rf"regularized_layers=.* {expected}"):
            check_pattern("regularized_layers", name)


def test_a_device_as_checkpoint_is_named_as_such(tmp_path):
    from signorm_lab.safety.checkpoints import read_backbone_checkpoint

    with pytest.raises(
        ValueError,
        match=r"checkpoint='/dev/zero' is not a regular file "
        r"\(a device or a pipe\)",
    ):
        read_backbone_checkpoint(torch.nn.Linear(2, 2), "/dev/zero")


def test_yaml_aliases_are_bounded_before_anything_walks_them():
    from signorm_lab.safety.files import load_yaml

    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"recipe expands to more than 100000 YAML nodes"):
        load_yaml(_alias_bomb(12), "recipe")
    assert time.perf_counter() - start < 2
    assert load_yaml(
        textwrap.dedent("""
        a: &a {b: 1}
        c: *a
    """),
        "recipe",
    ) == {"a": {"b": 1}, "c": {"b": 1}}


@pytest.mark.parametrize("url", [" http://example.org/x.ckpt", "\nhttps://example.org/x.ckpt"])
def test_a_url_with_leading_blanks_is_a_url(url):
    from signorm_lab.safety.checkpoints import local_file

    with pytest.raises(ValueError, match=r"is a URL: checkpoints are read from local files only"):
        local_file(url, "ckpt_path")


def test_the_recipes_and_a_saved_config_pass_the_export_recipe_check(tmp_path):
    """Every σN-Ens recipe of experiments/ (each file of its chain) passes, and a run's saved
    config.yaml naming its checkpoint (a large binary file) too."""
    from signorm_lab.cli.recipe_bases import recipe_chain
    from signorm_lab.safety.allowlist import check_recipe

    recipes = sorted((ROOT / "experiments").glob("*signorm*.yaml"))
    assert len(recipes) > 10
    for recipe in recipes:
        for path, content in recipe_chain(recipe):
            check_recipe(content, str(path), folder=Path(path).parent)
    (tmp_path / "best.ckpt").write_bytes(b"\0" * (2 << 20))
    saved = yaml.safe_load(DIGITS.read_text()) | {"ckpt_path": str(tmp_path / "best.ckpt")}
    check_recipe(saved, "config.yaml", folder=tmp_path)


def test_one_rule_for_a_setting_given_twice(tmp_path):
    """A setting the config: block holds is the config's for the model, the export and the
    results table alike; a keyword for a setting the block does not hold is used as given."""
    from fixtures.backbones import tiny_resnet
    from signorm_lab.export.spec import ensemble_from_spec
    from signorm_lab.reproduction.runs import read_settings
    from torch_uncertainty_signorm import SigmaNormEnsemble

    model = SigmaNormEnsemble(tiny_resnet(), 2, {"tau": 0.5}, diversity_strength=0.05)
    assert (model.config.tau, model.config.diversity_strength) == (0.5, 0.05)
    with pytest.raises(
        ValueError,
        match=r"Both config and keyword arguments set tau=0.2 "
        r"\(config: 0.5\)",
    ):
        SigmaNormEnsemble(tiny_resnet(), 2, {"tau": 0.5}, tau=0.2)
    block = {
        "class_path": "torch_uncertainty_signorm.signorm_ensemble",
        "init_args": {
            "model": {
                "class_path": "torch_uncertainty.models.classification.resnet",
                "init_args": {
                    "in_channels": 3,
                    "num_classes": 10,
                    "arch": 18,
                    "style": "cifar",
                    "width_multiplier": 0.125,
                },
            },
            "num_estimators": 2,
            "tau": 0.1,
            "config": {
                "class_path": "torch_uncertainty_signorm.SigmaNormConfig",
                "init_args": {"tau": 0.5},
            },
        },
    }
    assert ensemble_from_spec(block, ()).config.tau == 0.5
    (tmp_path / "config.yaml").write_text(
        yaml.safe_dump({"routine": {"class_path": ROUTINE, "init_args": {"model": block}}})
    )
    assert read_settings(tmp_path)["tau"] == 0.5


@pytest.mark.parametrize(
    ("key", "value"),
    [("previous", float("nan")), ("log_tau", -50.0), ("best_accuracy", 3.0), ("updates", -1)],
)
def test_a_tampered_tau_controller_state_is_refused(key, value):
    from torch_uncertainty_signorm.signorm.diversity_target import DiversityTarget

    controller = DiversityTarget(0.5, 0.1, 100)
    state = controller.state_dict() | {"previous": 0.9, key: value}
    with pytest.raises(
        ValueError,
        match=rf"τ controller state has {key}={value!r}, which no run "
        r"saves \(valid: a finite number in \[",
    ):
        controller.load_state_dict(state)
    assert controller.tau == pytest.approx(0.1)


def test_a_config_block_naming_another_class_is_no_settings(export_dir, tmp_path):
    from signorm_lab.export import load_ensemble
    from signorm_lab.export.spec import ensemble_from_spec

    def other_class(config, folder):
        config["model"]["init_args"]["config"] = {
            "class_path": "torch_uncertainty.models.classification.resnet",  # exportable
            "init_args": {"tau": 0.5},
        }

    folder = _edited_export(export_dir, tmp_path / "export", other_class)
    message = (
        r"config.class_path='torch_uncertainty.models.classification.resnet' is not the "
        r"σN-Ens settings class"
    )
    with pytest.raises(ValueError, match=message):
        load_ensemble(folder)
    spec = json.loads((folder / "config.json").read_text())["model"]
    with pytest.raises(ValueError, match=message):  # as the export command builds it
        ensemble_from_spec(spec, ())


# ------------------------------------------------------------------------ second-pass variants
@pytest.mark.parametrize("name", ["ensemble.safetensors", "member_1.safetensors", "config.json"])
def test_an_export_file_with_another_name_is_refused_as_a_link(name, export_dir, tmp_path):
    """A hard link (to another export's weights, or within the folder) is refused like a
    symbolic link leading out: where its other names are cannot be told."""
    from signorm_lab.export import load_ensemble, load_member

    other, folder = tmp_path / "other", tmp_path / "export"
    shutil.copytree(export_dir, other)
    shutil.copytree(export_dir, folder)
    (folder / name).unlink()
    os.link(other / name, folder / name)
    before = _digest(tmp_path)
    loads = [lambda: load_member(folder, 1)]
    if not name.startswith("member_"):
        loads.append(lambda: load_ensemble(folder))
    for load in loads:
        with pytest.raises(
            ValueError,
            match=rf"'.*{name}' is a hard link \(2 names share its "
            rf"data.*copy the file into the folder",
        ) as error:
            load()
        assert "\n" not in str(error.value)
    assert _digest(tmp_path) == before
    (folder / name).unlink()
    shutil.copy(other / name, folder / name)  # a copy loads
    assert load_member(folder, 1).training is False


def test_an_export_left_aside_by_a_kill_between_the_renames_is_named_not_moved(
    export_dir, tmp_path
):
    """SIGKILL after the previous export was renamed aside, before the new one took its place:
    the next export beside it names the folder left aside and leaves it as it is (a folder of
    that name may as well come from an archive: nothing but its creator moves it)."""
    from signorm_lab.export import build_model, export_ensemble, load_ensemble

    aside = tmp_path / ".export.4242-0123456789abcdef.old"
    shutil.copytree(export_dir, aside)
    (aside / "notes.txt").write_text("the user's")
    os.utime(aside, (time.time() - 3600, time.time() - 3600))
    before = _digest(aside)
    spec = json.loads((aside / "config.json").read_text())["model"]
    spec["init_args"] = {k: spec["init_args"][k] for k in ("model", "num_estimators")}
    with pytest.warns(
        UserWarning,
        match=r"export is missing and \.export\.4242-0123456789abcdef"
        r"\.old lies beside it.*left untouched",
    ):
        export_ensemble(build_model(spec).eval(), spec, tmp_path / "export", overwrite=True)
    assert not (tmp_path / "export" / "notes.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [aside.name, "export"]
    assert _digest(aside) == before
    assert load_ensemble(tmp_path / "export").training is False


def _table_folder(tmp_path: Path, case: str) -> Path:
    run = tmp_path / "runs" / "version_0"
    run.mkdir(parents=True)
    (run / "results.csv").write_text("test/cls/Acc\n0.9\n")
    if case == "FIFO results.csv":
        (run / "results.csv").unlink()
        os.mkfifo(run / "results.csv")
    elif case == "alias bomb config.yaml":
        (run / "config.yaml").write_text(_alias_bomb())
    elif case == "5,000-digit settings.json":
        (run / "settings.json").write_text('{"tau": ' + "9" * 5000 + "}")
    elif case == "settings.json nested 100,000 deep":
        (run / "settings.json").write_text("[" * 100_000 + "]" * 100_000)
    return tmp_path / "runs"


TABLE_FOLDERS = {
    "FIFO results.csv": r"results='.*results.csv' is a named pipe \(FIFO\)",
    "alias bomb config.yaml": r"config='.*config.yaml' expands to more than 100000 YAML nodes",
    "5,000-digit settings.json": r"settings.json is not valid JSON \(Exceeds the limit .*\); "
    r"expected the object of settings",
    "settings.json nested 100,000 deep": r"settings.json is not valid JSON \(maximum recursion",
}


@pytest.mark.parametrize("command", ["signorm-results-table", "signorm-regression"])
@pytest.mark.parametrize("case", list(TABLE_FOLDERS))
def test_a_results_folder_is_refused_on_one_line(case, command, tmp_path):
    import re

    runs = _table_folder(tmp_path, case)
    (tmp_path / "reference.csv").write_text("method,Acc\nours,90.0\n")
    args = (
        ["--run", f"ours={runs}", "--out", str(tmp_path / "out")]
        if command == "signorm-results-table"
        else [str(runs), "--reference", str(tmp_path / "reference.csv")]
    )
    before = _digest(tmp_path)
    status, last, seconds, done = _run([str(BIN / command), *args], tmp_path, timeout=60)
    assert status == 2 and re.search(TABLE_FOLDERS[case], last), done.stderr[-2000:]
    assert last.startswith(f"{command}: error: ") and "usage:" not in done.stderr
    assert "Traceback" not in done.stderr and seconds < 30
    assert _digest(tmp_path) == before and not (tmp_path / "out").exists()


@pytest.mark.parametrize("where", ["--config", "base:"])
def test_a_recipe_that_is_a_pipe_is_named_as_such(where, tmp_path):
    """The export command's recipe, or a base file it names, replaced by a named pipe: named as
    one (not "does not exist"), on one line, without reading it."""
    from signorm_lab.cli.export import main

    os.mkfifo(tmp_path / "pipe.yaml")
    recipe = tmp_path / "pipe.yaml"
    if where == "base:":
        recipe = tmp_path / "recipe.yaml"
        recipe.write_text(yaml.safe_dump({"base": "pipe.yaml", **_recipe()}))
    with pytest.raises(
        ValueError,
        match=r"pipe.yaml.*is not a regular file \(a named pipe, a "
        r"device, a folder\)",
    ) as error:
        main(
            ["--config", str(recipe), "--ckpt_path", "run.ckpt", "--output", str(tmp_path / "out")]
        )
    assert "\n" not in str(error.value) and not (tmp_path / "out").exists()
