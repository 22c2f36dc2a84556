"""The continuous-score calibration study (spec 001): HB linear vs Neural-ODE flow vs marginal OT by budget.

* :mod:`.study`: the contract (``load``, ``plan``, ``run_replicate``, ``summarise``);
* :mod:`.config`: settings and the run's input, shared with the report;
* :mod:`.data`: paired continuous scores from the RewardBench 2 k=8 data;
* :mod:`.report`: summary, crossover, canary, figures and ``report.md``.
"""
