"""The label-budget and calibration-fraction sweeps (spec 000 §5.3, §5.4).

* :mod:`.study`: the contract (``load``, ``plan``, ``run_replicate``, ``summarise``);
* :mod:`.config`: settings, the run's input and a replicate, shared with the report;
* :mod:`.report`: summaries, the joint max-t test, figures and ``report.md``.
"""
