"""The callbacks package imports a callback's module when the callback is first used."""

import subprocess
import sys

import torch_uncertainty_signorm.callbacks as callbacks


def test_importing_the_resume_callback_leaves_the_metrics_libraries_unimported():
    """TorchUncertainty's metrics bring scikit-learn and seaborn; a run that only resumes needs
    neither (Lightning itself still imports matplotlib)."""
    code = ("import sys; from torch_uncertainty_signorm.callbacks import ExactResumeCheckpoint; "
            "print(sorted(m for m in ('sklearn', 'seaborn', 'torch_uncertainty.metrics') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_every_listed_callback_is_a_lightning_callback_of_its_module():
    from lightning.pytorch import Callback

    for name in callbacks.__all__:
        value = getattr(callbacks, name)
        assert issubclass(value, Callback) and value.__name__ == name
    assert set(callbacks.__all__) <= set(dir(callbacks))
