"""Results through fsspec: :mod:`.store` (run folders, atomic commits with ``_SUCCESS`` last, resume, staging),
:mod:`.manifest` (what ran, on what, with which versions; never credentials) and :mod:`.history_reader` (the run
history read on Spark). Who owns an output folder is :mod:`judgecal_dist.io.ownership`.
"""
