"""Flow training as a Ray task: GPU request only on GPU clusters; the CPU path on local Ray equals in-process."""

from __future__ import annotations

import numpy as np
import pytest

from judgecal_dist.engine.cluster.flow_tasks import FlowJob, fit_predict_flows, flow_task_options


def test_gpu_is_requested_only_when_the_cluster_has_one():
    assert flow_task_options({"CPU": 16.0, "GPU": 1.0}) == {"num_cpus": 1, "num_gpus": 1}
    assert flow_task_options({"CPU": 2.0}) == {"num_cpus": 1}


@pytest.mark.ray
def test_ray_task_on_cpu_equals_in_process(ray_local):
    assert flow_task_options() == {"num_cpus": 1}  # the local test cluster has no GPU
    rng = np.random.default_rng(0)
    j = rng.uniform(1, 5, (2, 30))
    job = FlowJob(
        j=j,
        y=np.clip(j + 0.2, 1, 5),
        rubric=np.zeros((2, 30), dtype=np.int64),
        test_j=np.linspace(1, 5, 7)[None, :].repeat(2, 0),
        test_rubric=np.zeros((2, 7), dtype=np.int64),
        seeds=(0, 1),
        n_rubrics=1,
        settings={"epochs": 5},
        n_passes=4,
    )
    remote, local = fit_predict_flows(job, use_ray=True), fit_predict_flows(job, use_ray=False)
    assert remote.device == local.device == "cpu"
    np.testing.assert_allclose(remote.mean, local.mean, atol=1e-5)
    np.testing.assert_allclose(remote.sd, local.sd, atol=1e-5)
    assert remote.mean.shape == (2, 7) and np.all(remote.sd > 0)
