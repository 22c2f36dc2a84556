"""Many driver-side optimisers in lockstep, whose objective evaluations are batched into shared data passes.

Each job is an ordinary function ``job(evaluate) -> result`` (for example a :func:`scipy.optimize.minimize` call
whose objective calls ``evaluate(request)``) and runs in its own thread. The coordinator waits until every live
job is blocked on a request, answers all of them with one ``run_pass(requests)`` call (one scan of the data for
every replicate's optimiser at once), and repeats until every job has returned. Each optimiser therefore runs
exactly the algorithm it runs in memory, iterate for iterate; only the sums inside its objective are computed
elsewhere, in a different order (differences of the order of float64 round-off).

Threads only wait and run scipy's small driver-side steps; the heavy work is the pass, run by the calling thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["run_lockstep"]

log = logging.getLogger(__name__)


class _PassFailed(Exception):
    """Raised inside a job when the pass answering its request failed (the driver re-raises the cause)."""


def run_lockstep(
    jobs: list[Callable[[Callable[[Any], Any]], Any]],
    run_pass: Callable[[Mapping[int, Any]], Mapping[int, Any]],
    *,
    label: str = "lockstep",
) -> tuple[list[Any], int]:
    """Run ``jobs`` to completion, answering their requests in shared passes.

    Parameters
    ----------
    jobs : list of callables
        ``job(evaluate)``; ``evaluate(request)`` blocks until the pass containing ``request`` is done and returns
        the answer that ``run_pass`` gave for it.
    run_pass : callable
        ``run_pass({job_index: request}) -> {job_index: answer}`` for all requests pending at once.
    label : str
        Name used in the progress log lines.

    Returns
    -------
    results : list
        Each job's return value, in job order.
    n_passes : int
        Number of ``run_pass`` calls.

    Raises
    ------
    Exception
        The first exception raised by a job or by ``run_pass``.
    """
    state = _Lockstep(jobs)
    threads = [threading.Thread(target=state.worker, args=(i,), daemon=True) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    n_passes = 0
    while (batch := state.next_batch()) is not None:
        t0 = time.perf_counter()
        try:
            out = dict(run_pass(batch))
        except BaseException as err:
            state.errors.append(err)
            out = {i: _PassFailed() for i in batch}
        n_passes += 1
        log.info("%s pass %d: %d requests in %.2fs", label, n_passes, len(batch), time.perf_counter() - t0)
        state.answer(out)
    for thread in threads:
        thread.join()
    if state.errors:
        raise state.errors[0]
    return state.results, n_passes


class _Lockstep:
    """The jobs' shared state: their posted requests, the answers, results and errors, and how many still run."""

    def __init__(self, jobs: list[Callable[[Callable[[Any], Any]], Any]]) -> None:
        self.jobs = jobs
        self.posted = threading.Condition()  # only the coordinator waits on it: a job posting wakes nobody else
        self.ready = [threading.Event() for _ in jobs]  # one per job, so an answer wakes only its job
        self.pending: dict[int, Any] = {}
        self.answers: dict[int, Any] = {}
        self.results: list[Any] = [None] * len(jobs)
        self.errors: list[BaseException] = []
        self.alive = len(jobs)

    def evaluator(self, i: int) -> Callable[[Any], Any]:
        """Job ``i``'s way to ask: post the request, wait for its answer (a failed pass ends the job)."""

        def evaluate(request: Any) -> Any:
            with self.posted:
                self.pending[i] = request
                self.posted.notify()
            self.ready[i].wait()
            self.ready[i].clear()
            answer = self.answers.pop(i)
            if isinstance(answer, _PassFailed):
                raise answer
            return answer

        return evaluate

    def worker(self, i: int) -> None:
        try:
            self.results[i] = self.jobs[i](self.evaluator(i))
        except _PassFailed:
            pass
        except BaseException as err:  # re-raised by the driver
            self.errors.append(err)
        finally:
            with self.posted:
                self.alive -= 1
                self.posted.notify()

    def next_batch(self) -> dict[int, Any] | None:
        """The requests of every live job, once each waits on one; None when no job is left."""
        with self.posted:
            self.posted.wait_for(lambda: len(self.pending) == self.alive)  # every live job waits on a request
            if self.alive == 0:
                return None
            batch = dict(self.pending)
            self.pending.clear()
        return batch

    def answer(self, out: Mapping[int, Any]) -> None:
        self.answers.update(out)
        for i in out:
            self.ready[i].set()
