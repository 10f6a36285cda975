"""The callbacks package imports a callback's module when the callback is first used (the lab's run
callbacks: lab/tests/callbacks/test_callbacks_package.py)."""

import torch_uncertainty_signorm.callbacks as callbacks
from fixtures.imports import modules_imported_by


def test_every_listed_callback_is_a_lightning_callback_of_its_module():
    from lightning.pytorch import Callback

    for name in callbacks.__all__:
        value = getattr(callbacks, name)
        assert issubclass(value, Callback) and value.__name__ == name
    assert set(callbacks.__all__) <= set(dir(callbacks))


def test_the_routines_callbacks_import_first_without_a_cycle():
    """The routine imports its callbacks; they must not import the routines package back (in
    one new process: importing either one would bring the routines package in)."""
    imported = modules_imported_by(
        "from torch_uncertainty_signorm.callbacks import IdenticalMembersWarning, "
        "DiversityTargetCallback",
        ("torch_uncertainty_signorm.routines",),
    )
    assert imported == []
