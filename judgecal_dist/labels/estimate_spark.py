"""``label estimate`` on Spark: the one kernel (:func:`~judgecal_dist.labels.estimate_kernel.partition_moments`)
in the tasks of :func:`judgecal_dist.engine.jobs.labels_estimate.estimate_sums`, the partial sums added per target,
the checks of ``judgecal score`` from what the scan tasks tallied."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import pandas as pd
import pyarrow as pa

from judgecal_dist.config import EngineConfig
from judgecal_dist.labels.estimate_kernel import COUNT, PAIR, SUMS_SCHEMA, partition_moments
from judgecal_dist.methods.labels.moments import LabelMoments
from judgecal_dist.scoring.artifact import Calibration
from judgecal_dist.scoring.items import TableChecks
from judgecal_dist.scoring.tables import spark_runner

__all__ = ["moments_of_sums", "spark_moments"]


def spark_moments(
    model: Calibration,
    data_url: str,
    engine: EngineConfig,
    sample: int,
    by: Sequence[str],
    queue: pa.Table | None,
) -> tuple[dict[str, LabelMoments], dict[str, int]]:
    """Each target's sums and the label counts over every item of ``data_url``, in one Spark job."""
    runner = spark_runner("labels_estimate")
    weighted = queue is not None
    kernel = functools.partial(partition_moments, model=model, by=list(by), weighted=weighted)
    raw = [c for c in by if c != PAIR] + (["model_a", "model_b"] if PAIR in by else [])
    sums, tally = runner.estimate_sums(
        engine, data_url, model.judge_ids, sample=sample, columns=raw, queue=queue, kernel=kernel, schema=SUMS_SCHEMA
    )
    TableChecks(model, data_url, sample, "error", 0.5).tally(tally.value)
    return moments_of_sums(sums, weighted=weighted)


def moments_of_sums(sums: pd.DataFrame, *, weighted: bool) -> tuple[dict[str, LabelMoments], dict[str, int]]:
    """The rows of :data:`~judgecal_dist.labels.estimate_kernel.SUMS_SCHEMA` (summed per target) as each target's
    :class:`LabelMoments` and the counts (rows ``count:<name>``)."""
    names = LabelMoments.sum_names()
    moments: dict[str, LabelMoments] = {}
    counts: dict[str, int] = {}
    for row in sums.itertuples(index=False):
        target = str(row.target)
        if target.startswith(COUNT):
            counts[target.removeprefix(COUNT)] = int(round(row.n))
        else:
            moments[target] = LabelMoments(**{n: float(getattr(row, n)) for n in names}, weighted=weighted)
    return moments, counts
