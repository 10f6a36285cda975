"""signorm-compare as a user runs it: every method trained through the command, one table.

The README's two main jobs, as printed, at a reduced budget (the digits one at two seeds:
intervals, cost ratios, the learned check, runs fitted but not tested completed by testing
them, a rerun that reuses the runs), and a TorchUncertainty recipe, unmodified, beside the
σN-Ens row on stand-in CIFAR files (rows present, marked stand-in).
"""

from __future__ import annotations

import csv
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from signorm_lab.datamodules.stand_in_data import RUN_LABEL, SMOKE_TEST_OVERRIDES
from test_tu_format_recipes import _tu_recipe

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
#: Two seeds of σN-Ens and Single at a smoke budget (6 steps, one validation batch).
SMOKE = [
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=6",
    "--trainer.limit_val_batches=1",
    "--trainer.log_every_n_steps=1",
]


def readme_job(comment: str) -> list[str]:
    """The arguments of ``signorm-compare`` in the README's job under ``# <comment>``."""
    lines = (ROOT / "README.md").read_text().splitlines()
    (index,) = [i for i, line in enumerate(lines) if line.startswith(f"# {comment}:")]
    command = shlex.split(lines[index + 1].rpartition("&& ")[2])
    assert command[0] == "signorm-compare", command
    return command[1:]


def _compare(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONWARNINGS": "ignore::DeprecationWarning",
        "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
    }
    return subprocess.run(
        [str(BIN / "signorm-compare"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.mark.slow
def test_the_digits_main_job_at_two_seeds_prints_one_table_with_intervals_and_costs(tmp_path):
    """First a call at seed 0 whose runs fit but do not test (the state a stop during the
    post-fit test leaves): the main job then tests each of those fits' best checkpoint in its own
    folder instead of training it again, trains seed 1, and prints the table."""
    job = readme_job("main job")
    assert "--methods" in job and "single" in job  # the model σN-Ens wraps
    job = [arg.replace("experiments/", f"{ROOT}/experiments/") for arg in job] + ["--out", "runs"]
    assert job[job.index("--seeds") : job.index("--seeds") + 2] == ["--seeds", "0"]
    del job[job.index("--seeds") : job.index("--seeds") + 2]  # given once below: twice is refused
    first = _compare([*job, "--seeds", "0", "--", *SMOKE, "--eval_after_fit=false"], tmp_path)
    assert first.returncode != 0, first.stdout[-2000:]  # no run tested: no table
    folders = sorted((tmp_path / "runs").glob("*/seed_0/version_*"))
    assert [f.name for f in folders] == ["version_0", "version_0"], folders
    checkpoints = {p: p.stat().st_mtime_ns for f in folders for p in f.glob("checkpoints/*.ckpt")}
    assert checkpoints and not any((f / "results.csv").exists() for f in folders)

    args = [*job, "--seeds", "0", "1", "--", *SMOKE]
    done = _compare(args, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert out.count("testing the fit's best checkpoint") == 2, out[-3000:]
    assert sorted((tmp_path / "runs").glob("*/seed_0/version_*")) == folders  # no new version
    assert {p: p.stat().st_mtime_ns for p in checkpoints} == checkpoints  # not trained again
    assert "[compare 4/4] Single, seed 1" in out  # interleaved: both methods at seed 0 first
    assert out.index("[compare 2/4] Single, seed 0") < out.index("[compare 3/4] σN-Ens, seed 1")
    # The paired differences carry a t interval over the two seeds, each with its verdict.
    rows = [line for line in out.splitlines() if line.startswith("Single  ") and "[" in line]
    assert {row.split()[1] for row in rows} >= {"Acc", "NLL", "ECE", "Brier", "OOD"}
    assert all(any(v in row for v in ("BETTER", "WORSE", "no difference shown")) for row in rows)
    (cost,) = [
        line.split() for line in out.splitlines() if line.startswith("Single ") and "×" in line
    ]
    assert all(cell.endswith("×") for cell in cost[-3:])  # σN-Ens's multiples of Single's
    assert out.startswith("signorm-compare: 2 methods (σN-Ens, Single) × 2 seeds = 4 runs")
    assert "Did every run learn?" in out
    with (tmp_path / "runs" / "comparison_runs.csv").open() as file:
        runs = list(csv.DictReader(file))
    assert [(r["method"], r["seed"]) for r in runs] == [
        ("signorm", "0"),
        ("signorm", "1"),
        ("single", "0"),
        ("single", "1"),
    ]
    assert all(int(r["optimizer_steps"]) == 6 for r in runs)
    assert float(runs[0]["fit_seconds"]) > 0 and float(runs[2]["params_total"]) > 0
    # Each run in the same logs tree, with TorchUncertainty's results.csv and its config.
    for method in ("signorm", "single"):
        for seed in (0, 1):
            run = tmp_path / "runs" / method / f"seed_{seed}" / "version_0"
            assert (run / "results.csv").is_file() and (run / "config.yaml").is_file()
            assert (run / "test_predictions.safetensors").is_file()  # the reliability diagrams'
    svg = (tmp_path / "runs" / "comparison.svg").read_text()
    assert svg.count("ECE=") == 2 and (tmp_path / "runs" / "comparison.png").is_file()
    # Run again: nothing is trained, the same table comes back.
    again = _compare(args, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("finished earlier") == 4
    assert (tmp_path / "runs" / "comparison.txt").read_text() in again.stdout


@pytest.mark.slow
def test_the_tweets_main_job_prints_signorm_beside_the_minilm_it_wraps(tmp_path):
    job = readme_job("second main job")
    args = [arg.replace("experiments/", f"{ROOT}/experiments/") for arg in job]
    args += [
        "--out",
        "runs",
        "--",
        "--trainer.max_steps=3",
        "--trainer.limit_val_batches=1",
        "--data.init_args.val_size=8",
        "--data.init_args.test_size=24",
        "--data.init_args.ood_size=24",
        "--trainer.enable_progress_bar=false",
    ]
    done = _compare(args, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split() for line in done.stdout.splitlines()]
    assert ["Single", "NLL"] in [row[:2] for row in rows]  # the paired difference, with its sign
    assert any(row[:2] == ["Single", "0"] and row[2] in ("yes", "NO") for row in rows)
    # Three steps leave the members one model: the summary says so, and where they separated.
    assert "members are still one model at every seed" in done.stdout
    assert "480 steps with clipping" in done.stdout
    for method in ("signorm", "single"):
        assert list((tmp_path / "runs" / method / "seed_0").glob("version_0/results.csv"))


@pytest.mark.slow
def test_an_unmodified_torchuncertainty_recipe_is_a_row_beside_signorm_on_stand_in_data(tmp_path):
    packed = _tu_recipe("experiments/classification/cifar10/configs/resnet18/packed.yaml", tmp_path)
    written = subprocess.run(
        [str(BIN / "signorm-standin-data"), "standin"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
    )
    assert " ".join(SMOKE_TEST_OVERRIDES) in written.stdout  # what to add to a recipe
    signorm = ROOT / "experiments/torch_uncertainty/classification/cifar10/configs/resnet18"
    overrides = [*SMOKE_TEST_OVERRIDES, "--data.init_args.root=standin"]
    (tmp_path / "cifar.yaml").write_text(
        "reference: signorm\nseeds: [0]\nmethods:\n"
        f"  signorm:\n    recipe: {signorm / 'signorm.yaml'}\n    label: σN-Ens\n"
        "    args: [--data, CIFAR10DataModule,\n"
        "           --routine.init_args.model.init_args.model.init_args.width_multiplier=0.25]\n"
        f"  packed:\n    recipe: {packed}\n    label: Packed (TorchUncertainty's recipe)\n"
        "    args: [--data, CIFAR10DataModule, --routine.init_args.save_to_csv=true,\n"
        "           --data.init_args.eval_ood=true,\n"
        "           --routine.init_args.model.init_args.width_multiplier=0.25]\n"
    )
    before = packed.read_text()
    done = _compare(["--config", "cifar.yaml", "--out", "runs", "--", *overrides], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "STAND-IN DATA (random pixels) in the runs of σN-Ens, Packed" in done.stdout
    # Each run says so on its console and in its folder (the runs' output passes through).
    assert "STAND-IN DATA: standin holds 11 files of stand-in data" in done.stderr
    assert "STAND-IN DATA: the results above are on standin" in done.stdout
    (label,) = (tmp_path / "runs" / "packed" / "seed_0").glob(f"version_*/{RUN_LABEL}")
    assert "NOT the real data sets" in label.read_text()
    assert any(
        line.startswith("Packed (TorchUncertainty's recipe)") and "OOD AUROC" in line
        for line in done.stdout.splitlines()
    ), done.stdout[-3000:]
    (run,) = (tmp_path / "runs" / "packed" / "seed_0").glob("version_*")
    with (run / "results.csv").open() as file:
        assert "ood/AUROC" in next(csv.reader(file))  # the same metrics as the σN-Ens row
    assert packed.read_text() == before
