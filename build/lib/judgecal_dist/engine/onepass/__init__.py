"""One-pass replicate evaluation: every replicate of a study shares each scan of the labelled items.

:mod:`~judgecal_dist.engine.onepass.replicates` drives the passes (counts, patterns and ranges, lockstep fits,
metrics) of the pipeline in :mod:`judgecal_dist.methods.pipeline`; :mod:`~.kernels` holds the per-batch
kernels every pass maps over the items, :mod:`~.patterns` the exact vote-pattern cells of small panels,
:mod:`~.fits` the calibrators' own optimisers fed with summed data, and :mod:`~.lockstep` runs many such
optimisers so that one pass answers all their pending requests, and :mod:`~.sources` serves the labelled items
the passes read (the dense panel in memory, or a persisted Spark table).

Import the submodules directly (``from judgecal_dist.engine.onepass.replicates import evaluate_replicates``):
this package imports nothing itself, so its modules import one another without a cycle.
"""
