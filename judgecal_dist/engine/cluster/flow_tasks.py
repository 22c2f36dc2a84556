"""Flow training as a Ray task that asks for a GPU when the cluster has one (ARCHITECTURE: GPU placement).

:func:`fit_predict_flows` trains a stack of Neural-ODE flows (:func:`judgecal_dist.methods.continuous.score_flow.fit_flow_stack`)
and returns MC-dropout predictions on test items. Inside a Ray worker on a cluster whose resources include a GPU,
it submits :func:`_flow_task` with ``num_gpus=1`` (the study's replicate task blocks on it, releasing its CPU);
otherwise it trains in the calling process on CPU, so CI and laptops need no GPU.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import ray

from judgecal_dist.engine.cluster.allocator import retain_freed_memory

__all__ = ["FlowJob", "FlowOutput", "gpu_available", "flow_task_options", "fit_predict_flows", "run_flows"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FlowJob:
    """Inputs of one stacked fit: anchors (M, N) with NaN padding, rubric codes, test items (M, T), settings."""

    j: npt.NDArray[np.float64]
    y: npt.NDArray[np.float64]
    rubric: npt.NDArray[np.int64]
    test_j: npt.NDArray[np.float64]
    test_rubric: npt.NDArray[np.int64]
    seeds: tuple[int, ...]
    n_rubrics: int
    settings: dict[str, Any]
    n_passes: int = 40
    threads: int = 1


@dataclass(frozen=True)
class FlowOutput:
    mean: npt.NDArray[np.float64]
    sd: npt.NDArray[np.float64]
    final_loss: npt.NDArray[np.float64]
    device: str
    seconds: float
    #: Of ``seconds``, the MC-dropout prediction of every test item (per-item latency = this / items).
    predict_seconds: float = float("nan")
    #: Training loss of every member at every epoch run, shape (epochs run, members).
    loss_history: npt.NDArray[np.float64] | None = None


def gpu_available() -> bool:
    """True when Ray is up and its cluster advertises at least one GPU."""
    return ray.is_initialized() and ray.cluster_resources().get("GPU", 0) >= 1


def flow_task_options(resources: dict[str, float] | None = None) -> dict[str, float]:
    """Ray options of the flow task: ``num_gpus=1`` when ``resources`` (default: the cluster's) has a GPU."""
    res = resources if resources is not None else (ray.cluster_resources() if ray.is_initialized() else {})
    return {"num_cpus": 1, "num_gpus": 1} if res.get("GPU", 0) >= 1 else {"num_cpus": 1}


def _run(job: FlowJob) -> FlowOutput:
    import time

    import torch

    from judgecal_dist.methods.continuous.score_flow import fit_flow_stack

    device = "cuda" if torch.cuda.is_available() else "cpu"
    previous = torch.get_num_threads()
    torch.set_num_threads(job.threads)
    try:
        with retain_freed_memory():  # no page fault per step on the training tensors (engine/cluster/allocator.py)
            t0 = time.perf_counter()
            stack = fit_flow_stack(
                job.j, job.y, seeds=job.seeds, rubric=job.rubric, n_rubrics=job.n_rubrics, device=device, **job.settings
            )
            t1 = time.perf_counter()
            mean, sd = stack.predict_mc(job.test_j, job.test_rubric, n_passes=job.n_passes, seed=job.seeds[0])
            if device == "cuda":
                torch.cuda.synchronize()
            t2 = time.perf_counter()
            history = stack.loss_history
            return FlowOutput(mean, sd, history[-1], device, t2 - t0, t2 - t1, loss_history=history)
    finally:
        torch.set_num_threads(previous)


@ray.remote(max_retries=3, retry_exceptions=False)
def _flow_task(job: FlowJob) -> FlowOutput:
    return _run(job)


def fit_predict_flows(job: FlowJob, *, use_ray: bool | None = None) -> FlowOutput:
    """Train and predict ``job``: as a Ray task with ``num_gpus=1`` on GPU clusters (or when ``use_ray``), else here."""
    if use_ray is None:
        use_ray = gpu_available()
    return run_flows([job])[0] if use_ray else _run(job)


def run_flows(jobs: list[FlowJob]) -> list[FlowOutput]:
    """Train and predict every job as concurrent Ray tasks (``num_gpus=1`` each on GPU clusters); results in order.

    Ray must be initialised; each CPU task holds one core and ``job.threads`` torch threads, so 2 cores train
    two stacks at once without OpenMP synchronisation between them.
    """
    options = flow_task_options()
    return ray.get([_flow_task.options(**options).remote(job) for job in jobs])
