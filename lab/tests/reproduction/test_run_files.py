"""A run's files are whole, and the checks read only what its tests wrote: rows added or edited
by hand, a stand-in run stripped of its marker, a config.yaml holding no settings are refused in
one line; the results table writes its three files or none, so that a full disk never blocks
its next run."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
import yaml

from fixtures.results_files import tu_metrics
from signorm_lab.datamodules.stand_in_data import STAND_IN_COLUMN
from signorm_lab.evaluation.results_csv import add_test_row
from signorm_lab.reproduction import regression, results_table

ROUTINE = {"class_path": "x.SigmaNormClassificationRoutine", "init_args": {"tau": 0.1}}


def _tested_run(folder: Path, tests: int = 1, config: object = None, **extra: float) -> Path:
    """A run folder as the command leaves it: ``tests`` rows, each added by a test (with its
    check), and its config.yaml (``config``, else a routine and a data root)."""
    folder.mkdir(parents=True)
    for _ in range(tests):
        metrics = tu_metrics(0.97, 0.1, 0.04, **extra)
        written = folder / ".results.csv.1-0000000000000000.partial"
        written.write_text(
            ",".join(metrics) + "\n" + ",".join(f"{v:.4f}" for v in metrics.values())
        )
        add_test_row(folder / "results.csv", written, {})
    if config is None:
        config = {"seed_everything": 0, "model": ROUTINE, "data": {"init_args": {"root": "data"}}}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return folder


def _check(tmp_path: Path, *options: str) -> list[str]:
    reference = tmp_path / "ref.csv"
    reference.write_text("method,Acc\nref,97.0\n")
    return [str(tmp_path / "runs"), "--reference", str(reference), *options]


def _refused(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        regression.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("signorm-regression: error: ") and err.count("\n") == 1, err
    return err


def test_runs_tested_twice_pass_and_a_row_added_by_hand_is_refused(tmp_path, capsys):
    run = _tested_run(tmp_path / "runs" / "version_0", tests=2)
    assert regression.main(_check(tmp_path)) == 0
    assert "holds 2 result rows (one per test logged there)" in capsys.readouterr().out
    lines = (run / "results.csv").read_text().splitlines()
    (run / "results.csv").write_text("\n".join([*lines, lines[-1].replace("0.97", "0.99")]) + "\n")
    err = _refused(capsys, _check(tmp_path))
    assert f"{run / 'results.csv'}: row 3 was not written by a test" in err


def test_a_stand_in_run_stripped_of_its_marker_and_data_root_is_refused(tmp_path, capsys):
    """No STAND_IN_DATA.txt, no data root where its config.yaml says: the row still says it."""
    _tested_run(tmp_path / "runs" / "version_0", **{STAND_IN_COLUMN: 1.0})
    err = _refused(capsys, _check(tmp_path))
    assert "used stand-in data" in err and STAND_IN_COLUMN in err
    with pytest.raises(SystemExit):
        results_table.main(["--run", f"ours={tmp_path / 'runs'}", "--out", str(tmp_path / "o")])
    assert "used stand-in data" in capsys.readouterr().err


@pytest.mark.parametrize(
    "config",
    [{}, {"seed_everything": 0}, {"trainer": {"logger": False}, "ckpt_path": "x.ckpt"}],
    ids=["empty", "seed alone", "logging alone"],
)
def test_a_config_holding_no_settings_is_refused_unless_allowed(config, tmp_path, capsys):
    run = _tested_run(tmp_path / "runs" / "version_0", config=config)
    err = _refused(capsys, _check(tmp_path))
    assert f"({run}: its config.yaml or settings.json holds no setting but the seed)" in err
    assert "--allow-unknown-settings" in err
    assert regression.main(_check(tmp_path, "--allow-unknown-settings")) == 0
    assert "warning: the settings of 1 run(s) could not be read" in capsys.readouterr().out


def test_an_empty_settings_json_beside_an_empty_config_is_no_settings(tmp_path, capsys):
    run = _tested_run(tmp_path / "runs" / "version_0", config={})
    (run / "settings.json").write_text("{}")
    assert "holds no setting but the seed" in _refused(capsys, _check(tmp_path))


@pytest.mark.parametrize("failing", ["rows.csv", "table.md", "table.tex"])
def test_a_full_disk_leaves_no_table_file_and_the_next_run_writes_them(
    failing, tmp_path, capsys, monkeypatch
):
    _tested_run(tmp_path / "runs" / "version_0")
    write_text = Path.write_text

    def full_disk(path: Path, *args, **kwargs):
        if path.name.startswith(f".{failing}."):
            raise OSError(errno.ENOSPC, "No space left on device")
        return write_text(path, *args, **kwargs)

    argv = ["--run", f"ours={tmp_path / 'runs'}", "--out", str(tmp_path / "out")]
    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(SystemExit):
        results_table.main(argv)
    *_, err = capsys.readouterr().err.splitlines()  # what the row averages, then why
    assert err.startswith("signorm-results-table: error: --out ")
    assert err.endswith(
        "No space left on device; nothing was written (free space or choose "
        "another folder, then run again)."
    )
    assert list((tmp_path / "out").iterdir()) == []  # no file, no temporary file
    monkeypatch.undo()
    results_table.main(argv)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "rows.csv",
        "table.md",
        "table.tex",
    ]


def _byte_in_header(run: Path) -> Path:
    path = run / "results.csv"
    path.write_bytes(path.read_bytes().replace(b"Acc", b"Acc\xff", 1))
    return path


def _linked(name: str):
    def link(run: Path) -> Path:
        other = _tested_run(run.parent.parent / "other" / "version_0")
        (run / name).unlink()
        (run / name).symlink_to(other / name)
        return run / name

    return link


def _cut(run: Path) -> Path:
    path = run / "results.csv"
    path.write_bytes(path.read_bytes()[:-20])  # a copy cut off inside the last row
    return path


def _folder(run: Path) -> Path:
    (run / "config.yaml").unlink()
    (run / "config.yaml").mkdir()
    return run / "config.yaml"


@pytest.mark.parametrize(
    "spoil",
    [_byte_in_header, _linked("results.csv"), _linked("config.yaml"), _cut, _folder],
    ids=["byte 0xff in a name", "results.csv linked", "config.yaml linked", "cut", "folder"],
)
def test_a_spoilt_run_file_is_one_line_naming_it(spoil, tmp_path, capsys):
    path = spoil(_tested_run(tmp_path / "runs" / "version_0"))
    assert str(path) in _refused(capsys, _check(tmp_path))
    with pytest.raises(SystemExit):
        results_table.main(["--run", f"ours={tmp_path / 'runs'}", "--out", str(tmp_path / "o")])
    (err,) = capsys.readouterr().err.splitlines()
    assert err.startswith("signorm-results-table: error: ") and str(path) in err


def test_a_reference_with_a_byte_that_is_no_utf_8_is_refused(tmp_path, capsys):
    _tested_run(tmp_path / "runs" / "version_0")
    argv = _check(tmp_path)
    Path(argv[2]).write_bytes(b"method,Acc\nr\xffef,97.0\n")
    assert "ref.csv is not UTF-8 text (byte 0xff at offset 12)" in _refused(capsys, argv)
