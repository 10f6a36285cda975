"""The tutorial and the notebook run with the method installed alone (its declared dependencies,
nothing of the lab), and do what they say: member-major logits, the scale logits' learning
rate, training that learns, the ownership records."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from fixtures.method_alone import method_alone_site, run_alone

TUTORIALS = Path(__file__).resolve().parents[1] / "tutorials"
NOTEBOOK = TUTORIALS / "signorm_with_torch_uncertainty.ipynb"
LR, SCALE_LR_MULTIPLIER = 0.05, 100

#: Run after the code under test: what the assertions read from its namespace ``ns``, into
#: ``report`` (printed last as JSON).
REPORT = """
import importlib.util
scales = {id(p) for p in ns["model"].scale_logits()}
report = {
    "lab": "signorm_lab" in sys.modules or importlib.util.find_spec("signorm_lab") is not None,
    "logits": list(ns["logits"].shape),
    "rates": sorted(
        (group["lr"], all(id(p) in scales for p in group["params"]))
        for group in ns["trainer"].optimizers[0].param_groups
    ),
    "accuracy": ns["results"]["test/cls/Acc"],
}
"""
PRINT = "print(json.dumps(report))"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return method_alone_site(tmp_path_factory.mktemp("method_alone"))


def _report(done) -> dict:
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _check(report: dict) -> None:
    assert not report["lab"]
    assert report["logits"] == [4 * 2, 10]  # (M·B, C) for B = 2 images
    # Shared weights at the optimizer's rate; the σNorm scale logits alone at 100 times it.
    assert report["rates"] == [[LR, False], [pytest.approx(SCALE_LR_MULTIPLIER * LR), True]]
    assert report["accuracy"] > 0.5  # 10 classes: chance is 0.1


def _ownership_rows(folder: Path) -> list[dict]:
    with (folder / "ownership.csv").open() as file:
        return list(csv.DictReader(file))


def test_the_tutorial_runs_with_the_method_alone(site, tmp_path):
    script = TUTORIALS / "tutorial_signorm_resnet.py"
    code = f"import json, runpy, sys\nns = runpy.run_path({str(script)!r})\n{REPORT}\n{PRINT}"
    done = run_alone(site, code, tmp_path, env={"SIGNORM_TUTORIAL_OUTPUT": str(tmp_path)})
    _check(_report(done))
    assert (tmp_path / "ownership.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    scopes = {row["scope"] for row in _ownership_rows(tmp_path) if row["epoch"] == "0"}
    assert scopes == {"all", "regularized"}


def test_the_notebook_is_saved_without_outputs():
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = [cell for cell in cells if cell["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert sum(cell["cell_type"] == "markdown" for cell in cells) >= len(code)


def test_the_notebook_cells_run_in_order_with_the_method_alone(site, tmp_path):
    code = f"""
import json, sys
cells = json.loads(open({str(NOTEBOOK)!r}, encoding="utf-8").read())["cells"]
ns = {{"__name__": "__main__"}}
for number, cell in enumerate(cells):
    if cell["cell_type"] == "code":
        exec(compile("".join(cell["source"]), f"cell {{number}}", "exec"), ns)
{REPORT}
report["member_probs"] = list(ns["prediction"].member_probs.shape)
report["output"] = str(ns["output"])
{PRINT}
"""
    report = _report(run_alone(site, code, tmp_path))
    _check(report)
    assert report["member_probs"] == [4, 128, 10]  # (M, N, C) over the 128 test images
    assert {row["scope"] for row in _ownership_rows(Path(report["output"]))} == {
        "all",
        "regularized",
    }
