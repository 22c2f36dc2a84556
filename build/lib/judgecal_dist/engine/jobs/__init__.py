"""Statistics jobs over a verdict table: one numpy kernel per statistic, an in-memory and a Spark runner.

:mod:`.counts` holds the kernels, :mod:`.local` runs them over tables read with pyarrow, :mod:`.spark` inside one
``mapInArrow`` per job (and holds the session and the views), :mod:`.stats` chooses between them by size.
:mod:`.ensemble` holds the repeated-sample jobs, :mod:`.panel` the dense item x judge panel a study ships to its
replicates, :mod:`.dawid_skene` and :mod:`.ds_spark` Dawid-Skene over a whole table.
"""
