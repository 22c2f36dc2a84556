"""The inclusion study (spec 000, "calibrate, don't curate") and its arena-scale variant ``inclusion_scale``.

* :mod:`.study`: the contract (``load``, ``plan``, ``run_replicate``, ``summarise``) of the study ``inclusion``;
* :mod:`.config`: its settings and replicate, shared by the modules below;
* :mod:`.search`: searched panels (same-pipeline subset search with the spec's inner protocol);
* :mod:`.model`: conformal sets, the fitted model artifact and the recorded choices;
* :mod:`.diagnostics`: scope diagnostics on the calibration half of the first split;
* :mod:`.report`: ``report.md`` and figures;
* :mod:`.scale` and :mod:`.scale_report`: the study ``inclusion_scale`` (default pipelines at arena scale).
"""
