"""The project's own study tooling: sweeps, figures, the digits comparison and the studies.

Not installed with the package: run from the root of a source checkout, one command per module
(``python -m studies.<module> --help``):

* :mod:`.compare`: σN-Ens against the baselines on scikit-learn's digits (CPU);
* :mod:`.sweeps`: τ, M and λ sweeps (digits on CPU, or any recipe);
* :mod:`.figures`: the paper's sweep tables and figures from the runs' ``results.csv`` files;
* :mod:`.digits_study` (read by :mod:`.digits_analysis`): the CPU study behind
  ``studies/results/digits_study``;
* :mod:`.tweets_study` and :mod:`.tweets_controlled`: the studies behind
  ``studies/results/tweets_study``;
* :mod:`.simulation`: the regularizer's equilibrium on simulated importances;
* :mod:`.stats`: the intervals and tests behind every "better" in those studies.

They read runs and write tables through the installed
:mod:`signorm_lab.reproduction` (``runs``, ``results_table``, ``tables``).
"""
