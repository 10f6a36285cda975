"""σNorm-Ensembles for TorchUncertainty: implicit ensembles with temperature-controlled diversity.

The public names, listed in ``__init__.pyi``, are imported on first use (PEP 562, through
SPEC 1's ``lazy_loader``), so that importing one part of the method does not import every
other's libraries first.
"""

import lazy_loader

from .utils.moved_modules import MovedModules, moved_names, names_moved_from

#: The release that removes the old paths of :data:`MOVED_MODULES` and :data:`MOVED_NAMES`.
MOVED_REMOVED_IN = "0.3.0"
#: Folders and modules that moved to the lab (the ``signorm-lab`` distribution) in 0.2.0:
#: importable at their old path, with a ``FutureWarning`` naming the new one, until
#: :data:`MOVED_REMOVED_IN`. Old class paths in recipes, checkpoints and exports are read as
#: their new ones by the lab.
MOVED_MODULES = {
    f"{__name__}.{old}": f"signorm_lab.{old}"
    for old in (
        "cli",
        "export",
        "reproduction",
        "datamodules",
        "safety",
        "baselines",
        "models",
        "callbacks.exact_resume",
        "callbacks.ood_shift_metrics",
        "callbacks.parameter_logging",
        "callbacks.prediction_writer",
        "callbacks.run_record",
        "evaluation.eval_sets",
        "evaluation.ood",
        "evaluation.parameter_counts",
        "evaluation.printing",
        "evaluation.results_csv",
        "evaluation.shift",
    )
}
#: Names of the method's folders whose objects moved to the lab in 0.2.0 (old dotted path →
#: new), reachable at the old one with a ``FutureWarning`` until :data:`MOVED_REMOVED_IN`.
MOVED_NAMES = {
    f"{__name__}.{old}": new
    for old, new in {
        "parameter_counts": "signorm_lab.evaluation.parameter_counts.parameter_counts",
        **{
            f"callbacks.{name}": f"signorm_lab.callbacks.{module}.{name}"
            for module, name in (
                ("exact_resume", "ExactResumeCheckpoint"),
                ("ood_shift_metrics", "OODShiftEvaluation"),
                ("parameter_logging", "ParameterCountCallback"),
                ("prediction_writer", "TestPredictionWriter"),
                ("run_record", "RunRecordCallback"),
            )
        },
        **{
            f"evaluation.{name}": f"signorm_lab.evaluation.{module}.{name}"
            for module, names in {
                "eval_sets": "OOD_GROUPS OOD_METRICS SEVERITIES SHIFT_METRICS EvalSet "
                "ood_metric_name shift_metric_name",
                "ood": "NearFarOODMetrics",
                "printing": "SigmaNormEvaluationLoop results_tables use_results_tables",
                "results_csv": "append_to_last_row",
                "shift": "SeverityShiftMetrics",
            }.items()
            for name in names.split()
        },
    }.items()
}
#: Module paths of 0.1.0 moved since (inside the method, or to the lab), importable at the old
#: path with a ``FutureWarning`` until :data:`MOVED_REMOVED_IN` (0.2.0 is their first release).
MOVED_MODULES |= {
    f"{__name__}.{old}": (
        (new if new.startswith("signorm_lab.") else f"{__name__}.{new}")
        if isinstance(new, str)
        else new
    )
    for old, new in {
        "diversity": "evaluation.diversity",
        "prediction": "evaluation.prediction",
        "lr_schedulers": "optim_recipes",
        "backbones": "signorm_lab.models.backbones",
        "offline_assets": "signorm_lab.models.packaged",
        "transforms": "signorm_lab.datamodules.transforms",
        # the stand-in files, and the command that writes them and labels their runs
        "stand_in_data": ("signorm_lab.datamodules.stand_in_data", "signorm_lab.cli.stand_in"),
    }.items()
}
MovedModules(MOVED_MODULES, removed_in=MOVED_REMOVED_IN).install()


__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
__getattr__ = moved_names(
    __name__, names_moved_from(__name__, MOVED_NAMES), MOVED_REMOVED_IN, __getattr__
)

#: The package's version, read by the build from this line (pyproject.toml's ``dynamic``).
__version__ = "0.2.0"
