"""Ray runtime: replicate fan-out with declared resources, retries of lost workers only, progress with ETA.

The driver puts the shared input into the object store once, submits chunks of replicates as tasks, takes
results in finish order and commits every replicate as soon as its chunk returns, so a killed run loses at most
the chunks in flight. Tasks never print; the driver logs one line per finished chunk (done/total, rate, ETA).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import pandas as pd
from threadpoolctl import threadpool_limits

from judgecal_dist.errors import RunError
from judgecal_dist.extras import require_extra
from judgecal_dist.progress import Progress

__all__ = ["init_ray", "fan_out", "run_serial", "Progress", "ReplicateFailed"]

log = logging.getLogger(__name__)


class Seeded(Protocol):
    """A replicate: anything with the ``seed`` its table is committed under."""

    seed: int


R = TypeVar("R", bound=Seeded)
RunReplicate = Callable[[Any, R], pd.DataFrame]
Commit = Callable[[int, pd.DataFrame], None]


class ReplicateFailed(RunError):
    """A replicate raised; the message names its seed and parameters (application errors are never retried).

    Attributes
    ----------
    seed : int or None
        The failing replicate's seed (None when a lost task held several replicates).
    replicate : object or None
        The replicate itself (its dataclass holds every setting ``run_replicate`` saw), for a rerun by hand.
    """

    def __init__(self, message: str, *, seed: int | None = None, replicate: Any = None) -> None:
        super().__init__(message)
        self.seed, self.replicate = seed, replicate

    def __reduce__(self) -> tuple[Any, ...]:
        # Ray pickles task errors; keep the keyword-only attributes across the trip.
        return (_rebuild_failed, (str(self), self.seed, self.replicate))


def _rebuild_failed(message: str, seed: int | None, replicate: Any) -> ReplicateFailed:
    return ReplicateFailed(message, seed=seed, replicate=replicate)


def init_ray(address: str | None = None, *, num_cpus: int | None = None) -> None:
    """Connect to ``address`` (a cluster, ``auto``) or start a local Ray instance; a no-op when already connected.

    Local instances get no dashboard and keep worker logs off the console (the driver reports progress).
    """
    require_extra("ray", "replicates fanned out on Ray (judgecal run --serial runs them in this process)")
    import ray

    if ray.is_initialized():
        return
    kwargs: dict[str, Any] = {"configure_logging": False, "log_to_driver": False}
    if address:
        ray.init(address=address, **kwargs)
        log.info("connected to Ray at %s", address)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, **kwargs)
        log.info("started local Ray with %s CPUs", int(ray.cluster_resources().get("CPU", 0)))


#: Retries of a task whose worker died (node lost, OOM-killed, preempted); our own exceptions are never retried.
TASK_MAX_RETRIES = 3


def _replicate_chunk(run_replicate: RunReplicate, data: Any, replicates: Sequence[Any]) -> list[tuple[int, Any]]:
    with single_threaded_blas():
        return [_run_one(run_replicate, data, rep) for rep in replicates]


@functools.cache
def _chunk_task() -> Any:
    """The Ray task of :func:`_replicate_chunk`, made on first use (ray is the ray extra, imported only here)."""
    import ray

    # Lost workers are retried (max_retries); exceptions raised by our code fail at once (retry_exceptions=False).
    return ray.remote(num_cpus=1, max_retries=TASK_MAX_RETRIES, retry_exceptions=False)(_replicate_chunk)


def single_threaded_blas() -> threadpool_limits:
    """One BLAS thread per replicate task: replicates are the unit of parallelism, and small optimisations
    (scipy's L-BFGS-B on a few parameters) run up to ~80x slower when OpenBLAS splits their calls across threads."""
    return threadpool_limits(limits=1, user_api="blas")


def _run_one(run_replicate: RunReplicate, data: Any, rep: Any) -> tuple[int, Any]:
    try:
        return rep.seed, run_replicate(data, rep)
    except Exception as err:  # noqa: BLE001 - wrapped with the replicate's identity, re-raised
        raise ReplicateFailed(
            f"replicate seed={rep.seed} ({rep}) failed: {type(err).__name__}: {err}", seed=rep.seed, replicate=rep
        ) from err


def _chunks(items: Sequence[R], size: int) -> list[Sequence[R]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def default_chunk_size(n: int, n_workers: int) -> int:
    """About 8 chunks per worker: enough to balance load and show progress, few enough to amortise task overhead."""
    return max(1, -(-n // max(1, 8 * n_workers)))


def fan_out(
    run_replicate: RunReplicate,
    data: Any,
    replicates: Sequence[R],
    commit: Commit,
    *,
    chunk_size: int | None = None,
    num_cpus: float = 1,
    num_gpus: float = 0,
    max_in_flight: int | None = None,
) -> int:
    """Run ``run_replicate(data, r)`` for every replicate as Ray tasks; ``commit(seed, table)`` each as it finishes.

    Parameters
    ----------
    run_replicate : callable
        Pure, seeded function of (data, replicate) returning a table; must be importable by workers.
    data : any
        Shared input, put in the object store once and read by every task.
    replicates : sequence
        Objects with a ``seed`` attribute.
    commit : callable
        Called on the driver, in finish order, once per replicate.
    chunk_size : int, optional
        Replicates per task (default: about 8 tasks per CPU).
    num_cpus, num_gpus : float
        Resources each task asks for (``num_gpus=1`` places a task on a GPU worker).
    max_in_flight : int, optional
        Bound on submitted-but-unfinished tasks (default: 4 per CPU) so a huge plan does not flood the scheduler.

    Returns
    -------
    int
        Number of replicates committed.

    Raises
    ------
    ReplicateFailed
        When a replicate raised; replicates committed before stay committed, so a rerun resumes.
    """
    if not replicates:
        return 0
    import ray

    n_workers = max(1, int(ray.cluster_resources().get("CPU", 1) // max(num_cpus, 1e-9)))
    size = chunk_size or default_chunk_size(len(replicates), n_workers)
    chunks = _chunks(list(replicates), size)
    limit = max_in_flight or 4 * n_workers
    data_ref = ray.put(data)  # shipped once, read zero-copy by every task on this node
    task = _chunk_task().options(num_cpus=num_cpus, num_gpus=num_gpus)
    progress = Progress(len(replicates))
    pending: list[Any] = []
    seeds_of: dict[Any, list[int]] = {}
    queue = list(chunks)
    committed = 0
    while queue or pending:
        while queue and len(pending) < limit:
            chunk = queue.pop(0)
            ref = task.remote(run_replicate, data_ref, chunk)
            seeds_of[ref] = [r.seed for r in chunk]
            pending.append(ref)
        [ready], pending = ray.wait(pending, num_returns=1)
        try:
            results = ray.get(ready)
        except ray.exceptions.RayError as err:
            for ref in pending:
                ray.cancel(ref)
            raise _failure(err, seeds_of[ready]) from err
        for seed, table in results:
            commit(seed, table)
            committed += 1
        progress.advance(len(results))
    return committed


def _failure(err: Exception, seeds: list[int]) -> ReplicateFailed:
    """Our own exception with its replicate, or a system failure (a worker lost more than max_retries times)."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, ReplicateFailed):
        return ReplicateFailed(str(cause).splitlines()[0], seed=cause.seed, replicate=cause.replicate)
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return ReplicateFailed(
        f"replicates seeds={seeds} lost: {type(err).__name__} after {TASK_MAX_RETRIES} retries ({first}); "
        "rerun the same run id to resume"
    )


def run_serial(run_replicate: RunReplicate, data: Any, replicates: Sequence[R], commit: Commit) -> int:
    """The same contract as :func:`fan_out` in this process (debugging, benchmarks, tiny plans)."""
    progress = Progress(len(replicates))
    step = max(1, len(replicates) // 20)
    with single_threaded_blas():
        for i, rep in enumerate(replicates, 1):
            seed, table = _run_one(run_replicate, data, rep)
            commit(seed, table)
            if i % step == 0 or i == len(replicates):
                progress.advance(i - progress.done)
    return len(replicates)


def cpu_count() -> int:
    """CPUs this process may use (affinity-aware)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
