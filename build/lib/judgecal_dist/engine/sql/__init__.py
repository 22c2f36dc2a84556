"""SQL over the catalog: :mod:`.server` (``judgecal serve``: Thrift JDBC and Spark Connect in one driver),
:mod:`.guard` (the read-only check on Spark's parsed plan), :mod:`.guard_service` (that check answered for
Connect clients), :mod:`.catalog` (datasets and results as databases) and :mod:`.client` (where ``judgecal sql``
runs: a running server, else a local session).
"""
