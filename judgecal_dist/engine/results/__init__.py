"""Results through fsspec: :mod:`.store` (run folders, atomic commits with ``_SUCCESS`` last, resume, staging),
:mod:`.manifest` (what ran, on what, with which versions; never credentials), :mod:`.ownership` (folders a command
owns by a marker file) and :mod:`.history_reader` (the run history read on Spark).
"""
