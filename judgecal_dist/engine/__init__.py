"""Engines: Spark (:mod:`.spark`), the in-memory path (:mod:`.local`) and their shared kernels (:mod:`.counts`),
size-based dispatch of the sufficient-statistics jobs (:mod:`.stats`), Ray fan-out (:mod:`.ray`) and results
storage (:mod:`.store`).

Nothing is imported here, so that importing one engine never starts (or requires) another.
"""
