"""An export's members are its ensemble's, by the record each member file carries (or, for an
export without records, by folding its ensemble again), and its format version is one this
release reads."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from fixtures.backbones import tiny_signorm_spec
from signorm_lab.export import build_model, export_ensemble, load_member
from signorm_lab.export.format import RECORD_KEY, member_record
from signorm_lab.export.loading import SUPPORTED_VERSIONS, load_ensemble

SPEC = tiny_signorm_spec(2, style="cifar")
#: A tensor that CPU kernel sets fold one unit in the last place apart (AVX-512 and AVX2 in the
#: stored d303e6e export).
NUDGED = "backbone.layer1.0.bn2.weight"


def _export(folder, seed: int):
    torch.manual_seed(seed)
    model = build_model(SPEC).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.01)
    return export_ensemble(model, SPEC, folder, members=True)


def _rewrite(path: Path, metadata: dict[str, str] | None, nudge: bool = False) -> None:
    """Write the member file ``path`` again with ``metadata`` (``None``: no record, as 0.1.0
    wrote), with the first float of :data:`NUDGED` one unit in the last place up if ``nudge``."""
    state = load_file(path)
    if nudge:
        state[NUDGED][0] = torch.nextafter(state[NUDGED][0], torch.tensor(float("inf")))
    path.unlink()
    save_file(state, path, metadata=metadata)


def _metadata(path: Path) -> dict[str, str]:
    with safe_open(path, framework="pt") as file:
        return file.metadata()


def test_a_member_file_records_its_ensemble_and_loads_by_that_record(tmp_path):
    """One unit in the last place off the fold done here (what other CPU kernels give) still
    loads: the record decides, nothing is folded again."""
    out = _export(tmp_path / "out", 0)
    digest = hashlib.sha256((out / "ensemble.safetensors").read_bytes()).hexdigest()
    assert member_record(out / "member_1.safetensors") == (digest, 1)
    _rewrite(out / "member_1.safetensors", _metadata(out / "member_1.safetensors"), nudge=True)
    stored = load_file(out / "member_1.safetensors")[NUDGED]
    assert torch.equal(load_member(out, 1).state_dict()[NUDGED], stored)


def test_a_member_file_of_another_export_is_refused(tmp_path):
    ours, theirs = _export(tmp_path / "ours", 0), _export(tmp_path / "theirs", 1)
    assert load_member(ours, 1).training is False
    (ours / "member_1.safetensors").unlink()
    shutil.copy(theirs / "member_1.safetensors", ours / "member_1.safetensors")
    with pytest.raises(
        ValueError,
        match=r"member_1.safetensors' is not member 1 of the ensemble in "
        r".*: a member file of another export\?",
    ) as e:
        load_member(ours, 1)
    assert "records an ensemble of SHA-256" in str(e.value) and "\n" not in str(e.value)
    assert load_member(ours, 0).training is False  # its own member still loads


def test_a_member_file_renamed_to_another_index_is_refused(tmp_path):
    out = _export(tmp_path / "out", 0)
    (out / "member_1.safetensors").unlink()
    shutil.copy(out / "member_0.safetensors", out / "member_1.safetensors")
    with pytest.raises(ValueError, match=r"is not member 1 of .* \(it records member 0\): a"):
        load_member(out, 1)


def test_member_files_without_records_are_checked_by_folding_within_a_tolerance(tmp_path):
    """An export of release 0.1.0 (no record): one unit in the last place off the fold done
    here loads, the member file of another export does not."""
    ours, theirs = _export(tmp_path / "ours", 0), _export(tmp_path / "theirs", 1)
    for member in (0, 1):
        _rewrite(ours / f"member_{member}.safetensors", None, nudge=member == 1)
        assert member_record(ours / f"member_{member}.safetensors") is None
    assert load_member(ours, 1).training is False
    (ours / "member_1.safetensors").unlink()
    shutil.copy(theirs / "member_1.safetensors", ours / "member_1.safetensors")
    _rewrite(ours / "member_1.safetensors", None)
    with pytest.raises(ValueError, match=r"is not member 1 of .* \(\S+ differs\): a member"):
        load_member(ours, 1)


VALID_DIGEST = "0" * 64


@pytest.mark.parametrize(
    "record",
    [
        f"1 sha256:{'f' * 63}g",
        f"1 sha256:{VALID_DIGEST.upper().replace('0', 'A')}",
        f"-1 sha256:{VALID_DIGEST}",
        f"{'9' * 5000} sha256:{VALID_DIGEST}",
        f"sha256:{VALID_DIGEST}",
        "1",
    ],
)
def test_a_malformed_record_is_refused_on_one_line_naming_the_file(record, tmp_path):
    out = _export(tmp_path / "out", 0)
    _rewrite(out / "member_1.safetensors", {RECORD_KEY: record})
    with pytest.raises(ValueError, match=r"member_1.safetensors' records signorm_member=") as e:
        load_member(out, 1)
    assert "\n" not in str(e.value) and len(str(e.value)) < 600


def test_an_export_writes_the_same_bytes_twice(tmp_path):
    """One metadata entry per member file: a second export of the same model is byte for byte
    the first (safetensors writes several entries in any order)."""
    first, second = _export(tmp_path / "a", 0), _export(tmp_path / "b", 0)
    for name in sorted(p.name for p in first.iterdir()):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


@pytest.mark.slow  # starts a Python process
def test_a_member_file_exported_under_other_cpu_kernels_loads_here(tmp_path):
    """Exported with ATen's default (unvectorised) CPU kernels, loaded with this machine's (the
    fold's floats may differ by a unit in the last place)."""
    tests = Path(__file__).parent  # the lab's, and the method's fixtures beside the lab
    environment = {
        **os.environ,
        "ATEN_CPU_CAPABILITY": "default",
        "PYTHONPATH": os.pathsep.join(
            [str(tests), str(tests.parents[1] / "tests"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    code = "import sys, test_export_members as t; t._export(sys.argv[1], 0)"
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "out")],
        env=environment,
        check=False,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    inputs = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        rows = load_ensemble(tmp_path / "out")(inputs)
        for member in (0, 1):
            torch.testing.assert_close(
                load_member(tmp_path / "out", member)(inputs), rows[3 * member : 3 * member + 3]
            )


@pytest.mark.parametrize("version", [999, 0, "2", None, True])
def test_an_unknown_format_version_is_refused_naming_the_supported_ones(version, tmp_path):
    out = _export(tmp_path / "out", 0)
    config = json.loads((out / "config.json").read_text())
    config["version"] = version
    (out / "config.json").write_text(json.dumps(config))
    supported = ", ".join(map(str, SUPPORTED_VERSIONS))
    with pytest.raises(
        ValueError,
        match=rf"has version .*; this release reads versions "
        rf"{supported}",
    ):
        load_ensemble(out)
