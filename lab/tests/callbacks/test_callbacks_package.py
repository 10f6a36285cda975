"""The lab's callbacks package imports a callback's module when the callback is first used."""

import pytest

import signorm_lab.callbacks as callbacks
from fixtures.imports import modules_imported_by


@pytest.mark.slow
def test_importing_the_resume_callback_leaves_the_metrics_libraries_unimported():
    """TorchUncertainty's metrics bring scikit-learn and seaborn; a run that only resumes needs
    neither (Lightning itself still imports matplotlib)."""
    imported = modules_imported_by(
        "from signorm_lab.callbacks import ExactResumeCheckpoint",
        ("sklearn", "seaborn", "torch_uncertainty.metrics"),
    )
    assert imported == []


def test_every_listed_callback_is_a_lightning_callback_of_its_module():
    from lightning.pytorch import Callback

    for name in callbacks.__all__:
        value = getattr(callbacks, name)
        assert issubclass(value, Callback) and value.__name__ == name
    assert set(callbacks.__all__) <= set(dir(callbacks))
