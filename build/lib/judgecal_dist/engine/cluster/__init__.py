"""Running on a cluster: :mod:`.ray` (replicate fan-out with retries and progress), :mod:`.submit` (Ray Jobs API
submission), :mod:`.flow_tasks` (flow training as a GPU-aware Ray task) and :mod:`.allocator` (glibc heap settings
for allocation-heavy loops).
"""
