"""A GPU recipe on a machine without a GPU, and the stand-in CIFAR files' integrity check.

``torch-uncertainty``, in a subprocess as a user runs it, stops a GPU recipe with one line naming
the CPU overrides; the stand-ins ``signorm-standin-data DIR`` writes pass torchvision's md5 check
only unchanged. TorchUncertainty's own recipe run on the stand-ins, and labelled as such, is the
journey ``tests/journeys/test_journey_compare.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from signorm_lab.datamodules.stand_in_data import (
    MANIFEST,
    accept_stand_in_files,
    write_stand_in,
)

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


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
        "--routine.init_args.model.init_args.model.class_path=signorm_lab."
        "models.backbones.wideresnet28 --routine.init_args.model.init_args.model.init_args."
        "widen_factor=1"
    )
    assert width in line and "experiments/README.md, 'On a laptop'" in line
    assert ("--trainer.limit_train_batches=5" in line) is not bool(extra)  # fast_dev_run: 1 step
    assert not list(tmp_path.rglob("*"))  # nothing built, nothing written


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

    from signorm_lab.cli.hardware import LAPTOP_OVERRIDES

    section = (ROOT / "experiments" / "README.md").read_text().split("## On a laptop")[1]
    laptop = re.search(r'^LAPTOP="(.+)"$', section, re.M).group(1).split()
    assert laptop == ["--trainer.accelerator=cpu", "--trainer.precision=32", *LAPTOP_OVERRIDES]
