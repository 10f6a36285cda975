"""A GPU recipe on a machine without a GPU, and CIFAR recipes smoke-tested on stand-in data.

Both through the installed commands in subprocesses, as a user runs them: ``torch-uncertainty``
stops a GPU recipe with one line naming the CPU overrides, and ``signorm-standin-data DIR`` writes
torchvision-format stand-ins on which TorchUncertainty's own recipe runs, labelled as such.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_tu_format_recipes import _tu_recipe

from torch_uncertainty_signorm.datamodules.stand_in_data import (
    MANIFEST,
    RUN_LABEL,
    SMOKE_TEST_OVERRIDES,
    accept_stand_in_files,
    write_stand_in,
)

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TU_PACKED = "experiments/classification/cifar10/configs/resnet18/packed.yaml"
SIGNORM_ROW = ROOT / "experiments/torch_uncertainty/classification/cifar10/configs/resnet18"


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",
        "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
    }


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300, check=False
    )


@pytest.mark.parametrize("extra", [[], ["--trainer.fast_dev_run=true"]], ids=["full", "fast"])
def test_gpu_recipe_without_a_gpu_ends_in_one_line_with_the_cpu_overrides(extra, tmp_path):
    result = _run(
        [
            str(BIN / "torch-uncertainty"),
            "fit",
            "--config",
            str(ROOT / "experiments/wrn_c100_signorm.yaml"),
            *extra,
        ],
        tmp_path,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "MisconfigurationException" not in result.stderr
    (line,) = result.stderr.strip().splitlines()  # nothing else: no warning, no traceback
    assert line.startswith(
        "torch-uncertainty: no GPU found: this recipe sets "
        "trainer.accelerator=gpu, precision=16-mixed; to run it on this "
        "machine's CPU add --trainer.accelerator=cpu --trainer.precision=32 "
    )
    width = (
        "--routine.init_args.model.init_args.model.class_path=torch_uncertainty_signorm."
        "models.backbones.wideresnet28 --routine.init_args.model.init_args.model.init_args."
        "widen_factor=1"
    )
    assert width in line and "experiments/README.md, 'On a laptop'" in line
    assert ("--trainer.limit_train_batches=5" in line) is not bool(extra)  # fast_dev_run: 1 step
    assert not list(tmp_path.rglob("*"))  # nothing built, nothing written


def test_stand_in_route_runs_torch_uncertainty_recipe_and_labels_the_run(tmp_path):
    # TorchUncertainty's own recipe, read as every TorchUncertainty-recipe test reads it (skipped,
    # with the reason, only where neither its clone nor ../shared's copy is on the machine).
    recipe = _tu_recipe(TU_PACKED, tmp_path)
    written = _run([str(BIN / "signorm-standin-data"), "standin"], tmp_path)
    assert written.returncode == 0, written.stderr
    assert " ".join(SMOKE_TEST_OVERRIDES) in written.stdout
    before = recipe.read_text()
    result = _run(
        [
            str(BIN / "torch-uncertainty"),
            "fit",
            "--config",
            "packed.yaml",
            "--data",
            "CIFAR10DataModule",
            "--data.init_args.root=standin",
            *SMOKE_TEST_OVERRIDES,
            "--routine.init_args.model.init_args.width_multiplier=0.25",
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "STAND-IN DATA: standin holds 11 files of stand-in data" in result.stderr
    assert "STAND-IN DATA: the results above are on standin" in result.stdout
    (label,) = tmp_path.glob(f"logs/*/*/version_0/{RUN_LABEL}")
    assert "NOT the real data sets" in label.read_text()
    assert recipe.read_text() == before  # the recipe, unmodified


def test_the_md5_check_accepts_only_unchanged_listed_files(tmp_path):
    from torchvision.datasets import utils

    write_stand_in(tmp_path / "standin")
    real = tmp_path / "real" / "cifar-10-batches-py"
    real.mkdir(parents=True)
    (real / "data_batch_1").write_bytes(b"real")
    original = utils.check_md5
    try:
        accept_stand_in_files(tmp_path / "standin")
        batch = tmp_path / "standin" / "cifar-10-batches-py" / "data_batch_1"
        released = "c99cafc152244af753f735de768cd75f"  # torchvision's md5 of data_batch_1
        assert utils.check_integrity(str(batch), released)
        assert not utils.check_integrity(str(real / "data_batch_1"), released)
        batch.write_bytes(batch.read_bytes() + b"x")  # changed: no longer accepted
        assert not utils.check_integrity(str(batch), released)
    finally:
        utils.check_md5 = original
    assert accept_stand_in_files(tmp_path / "real") == {}  # no manifest: nothing accepted
    manifest = json.loads((tmp_path / "standin" / MANIFEST).read_text())
    assert "NOT the real data sets" in manifest["label"] and len(manifest["files"]) == 11
    with pytest.raises(FileExistsError, match="not written by signorm-standin-data"):
        write_stand_in(tmp_path / "real")


def test_the_no_gpu_line_lists_the_laptop_overrides_of_the_readme():
    """experiments/README.md's LAPTOP overrides are the ones the no-GPU line prints."""
    import re

    from torch_uncertainty_signorm.cli.hardware import LAPTOP_OVERRIDES

    section = (ROOT / "experiments" / "README.md").read_text().split("## On a laptop")[1]
    laptop = re.search(r'^LAPTOP="(.+)"$', section, re.M).group(1).split()
    assert laptop == ["--trainer.accelerator=cpu", "--trainer.precision=32", *LAPTOP_OVERRIDES]
