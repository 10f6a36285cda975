"""Tooling that reproduces the paper around the method: tables, regression, sweeps, studies.

Imports the method's core, which never imports this subpackage. One command per module
(``python -m torch_uncertainty_signorm.paper.<module> --help``):

* :mod:`.published`: the paper's tables as data (CSV + JSON sidecars);
* :mod:`.results_table`: TorchUncertainty ``results.csv`` files → mean ± std rows appended to
  a published table (Markdown and LaTeX);
* :mod:`.regression`: compare a results table with a published or reference row under
  per-metric tolerances, exit 1 when out of tolerance;
* :mod:`.compare`: σN-Ens against the baselines on scikit-learn's digits (CPU);
* :mod:`.sweeps`: τ, M and λ sweeps (digits on CPU, or any recipe);
* :mod:`.figures`: the paper's sweep tables and figures from the runs' ``results.csv`` files;
* :mod:`.digits_study`: the CPU study on digits behind ``docs/digits_study``;
* :mod:`.simulation`: the regulariser's equilibrium on simulated importances.

Shared by the commands: :mod:`.runs` (finding runs and their settings) and :mod:`.tables`
(the plain-text and Markdown table formatter).
"""
