"""Deprecated name of :mod:`torch_uncertainty_signorm.reproduction`, kept for one release.

``torch_uncertainty_signorm.paper.<name>`` for ``published``, ``results_table``, ``regression``,
``runs`` and ``tables`` is the module ``torch_uncertainty_signorm.reproduction.<name>`` itself,
and ``python -m torch_uncertainty_signorm.paper.results_table|regression`` still runs the
command (now ``signorm-results-table`` and ``signorm-regression``). The studies, sweeps, figures
and the digits comparison are no longer installed: they are the ``studies`` package of the source
checkout (``python -m studies.<module>``).
"""

from __future__ import annotations

import warnings

#: The modules of this package that moved to :mod:`torch_uncertainty_signorm.reproduction`.
MOVED = ("published", "regression", "results_table", "runs", "tables")

warnings.warn(
    "torch_uncertainty_signorm.paper is deprecated: use torch_uncertainty_signorm.reproduction "
    "(commands: signorm-results-table, signorm-regression)",
    DeprecationWarning, stacklevel=2,
)


def __getattr__(name: str):
    if name in MOVED:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
