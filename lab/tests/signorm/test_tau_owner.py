"""An export records the τ a run ended with (the method's tests/signorm/test_tau_owner.py: the
penalty owns τ, a checkpoint records it)."""

from __future__ import annotations

import json

from fixtures.backbones import tiny_signorm_spec
from signorm_lab import export


def test_an_export_records_the_tau_the_run_ended_with(tmp_path):
    spec = tiny_signorm_spec(2, style="cifar", tau=0.5)
    model = export.build_model(spec)
    model.set_tau(0.2)
    folder = export.export_ensemble(model.eval(), spec, tmp_path / "out")
    assert json.loads((folder / "config.json").read_text())["model"]["init_args"]["tau"] == 0.2
    assert export.load_ensemble(folder).tau == 0.2
