"""Engines: the only place Spark lives, in rooms by concern.

* :mod:`.jobs`: the sufficient-statistics jobs, written once as numpy kernels (:mod:`.jobs.counts`) with an
  in-memory runner (:mod:`.jobs.local`) and a Spark runner (:mod:`.jobs.spark`), chosen by size (:mod:`.jobs.stats`);
  the repeated-sample jobs (:mod:`.jobs.ensemble`), dense panels (:mod:`.jobs.panel`) and Dawid-Skene over whole
  tables (:mod:`.jobs.dawid_skene`, :mod:`.jobs.ds_spark`).
* :mod:`.onepass`: one-pass replicate evaluation over the labelled items.
* :mod:`.votes`: the one vote codec and its Spark tasks.
* :mod:`.results`: the results store (atomic commit, resume, staging) and run manifests.
* :mod:`.sql`: ``judgecal serve`` (server, statement guard and its service, catalog) and the ``judgecal sql`` client.
* :mod:`.cluster`: Ray fan-out, job submission, flow tasks and the allocator setting.

Nothing is imported here, so that importing one engine never starts (or requires) another.
"""
