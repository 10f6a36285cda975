"""A run's version read from its folder's name: ASCII digits only (``str.isdigit`` also takes
'²' and '٣', which ``int`` then refuses or reads as another number)."""

from pathlib import Path

import pytest
from jsonargparse import Namespace

from signorm_lab.cli.interruption import _same_version
from signorm_lab.cli.run_folders import continue_logged_run


@pytest.mark.parametrize(("name", "version"), [("version_3", 3), ("version_²", None)])
def test_a_resumed_run_continues_only_a_version_numbered_in_ascii_digits(tmp_path, name, version):
    checkpoint = tmp_path / "logs" / "run" / name / "checkpoints" / "interrupted.ckpt"
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_bytes(b"")
    logger = Namespace(save_dir=str(tmp_path / "logs"), name="run", version=None)
    config = Namespace(
        ckpt_path=str(checkpoint),
        trainer=Namespace(logger=Namespace(class_path="CSVLogger", init_args=logger)),
    )
    assert continue_logged_run(config, resumes_interruption=True) is (version is not None)
    assert logger.version == version
    pin = [] if version is None else [f"--trainer.logger.init_args.version={version}"]
    assert _same_version([], Path(checkpoint)) == pin
