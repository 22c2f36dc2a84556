r"""Dawid-Skene over every item of a verdict table through Spark, one pass per EM iteration.

The estimator is :class:`judgecal_dist.methods.aggregation.dawid_skene.DawidSkene` (binary two-coin model, vote-fraction
initialisation, smoothing :math:`\eta`, clipping :math:`\varepsilon`, known labels clamped), run with the item
posteriors kept *implicit*: they are a function of the votes and the parameters, so the driver holds only
:math:`(\pi, \Pi)` and the item x judge votes stay in Spark, persisted once as one packed row per item
(:func:`judgecal_dist.engine.votes.spark.item_votes_spark`, two bits per judge; each pass unpacks its batches
with the codec's :func:`~judgecal_dist.engine.votes.codec.unpack`, which costs less than a second Python round
trip of every item and its keys to build a dense column). Iteration :math:`t` is one pass:

* inside each partition (``mapInArrow``), the E-step of ``DawidSkene`` turns the parameters
  :math:`\theta_t` into :math:`T^{(t)}` and the item log-likelihoods; the previous posteriors :math:`T^{(t-1)}`
  (from :math:`\theta_{t-1}`, or the vote fractions) are recomputed the same way for the stopping rule
  :math:`\max_i |T^{(t)}_{i1} - T^{(t-1)}_{i1}|`;
* each partition emits the M-step sums :math:`\sum_i T_{iy} 1[V_{ij} = v]` per (judge, verdict) and the scalars
  :math:`\sum_i T_{i1}`, :math:`\ell`, the maximum change, which one ``groupBy().agg()`` adds up;
* the driver forms :math:`\theta_{t+1}` (the M-step) from those :math:`2J + 1` rows.

An initial pass gives the sums of the vote-fraction initialisation, so ``n`` iterations cost ``n + 1`` passes, and
the sequence of parameters, log-likelihoods and stopping decisions is the in-memory estimator's, up to the order
of floating-point sums (about 1e-15 relative per pass).

References
----------
.. [1] A. P. Dawid, A. M. Skene. Maximum Likelihood Estimation of Observer Error-Rates Using the EM Algorithm.
   JRSS C 28(1):20-28, 1979. doi:10.2307/2346806.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.local import judge_ids_of
from judgecal_dist.engine.jobs.spark import get_session, read_table, spark_url
from judgecal_dist.engine.results.store import RunStore
from judgecal_dist.engine.votes.codec import block_columns, unpack
from judgecal_dist.engine.votes.spark import item_votes_spark
from judgecal_dist.errors import InputError
from judgecal_dist.methods.aggregation.cells import vote_indicators
from judgecal_dist.methods.aggregation.dawid_skene import UNLABELLED, DawidSkene

__all__ = ["DSResult", "dawid_skene_spark", "packed_votes"]

log = logging.getLogger(__name__)

_PASS_DDL = "slot int, t0 double, t1 double, ll double, delta double, n long, n_known long"
Params = tuple[float, npt.NDArray[np.float64]]


@dataclass
class DSResult:
    """A Dawid-Skene fit over all items (the fitted attributes of :class:`DawidSkene`, plus bookkeeping).

    Attributes
    ----------
    judge_ids : list of str
    confusion_ : ndarray of shape (n_judges, 2, 2)
        :math:`\\Pi^{(j)}_{yv}` from the final M-step, ``[j, y, v]``.
    prior_ : float
    n_iter_ : int
    converged_ : bool
    loss_history_ : list of float
        :math:`-\\ell_t / n` per iteration.
    label_switched_ : bool
    n_items, n_labelled : int
    passes : int
        Spark passes over the persisted votes (iterations + 1).
    seconds_per_pass : list of float
    """

    judge_ids: list[str]
    confusion_: npt.NDArray[np.float64]
    prior_: float
    n_iter_: int
    converged_: bool
    loss_history_: list[float]
    label_switched_: bool
    n_items: int
    n_labelled: int
    passes: int
    seconds_per_pass: list[float]
    _votes: DataFrame | None = field(default=None, repr=False)
    _kernel: dict[str, Any] = field(default_factory=dict, repr=False)
    _last: Params | None = field(default=None, repr=False)

    def write_posteriors(self, url: str, *, storage_options: dict[str, Any] | None = None) -> str:
        """Write ``dataset, item_id, label, posterior`` (:math:`T_{i1}` after the last E-step, as the estimator's
        ``posteriors_[:, 1]``) as Parquet at ``url`` (a temporary folder first, then a move, then ``_SUCCESS``).

        One more pass over the persisted votes; no item row reaches the driver.

        Raises
        ------
        InputError
            ``url`` already holds committed posteriors, or the votes were released by :meth:`unpersist`.
        """
        if self._votes is None:
            raise InputError("DSResult: the persisted votes were released (unpersist); fit again to write posteriors")
        store = RunStore(url, storage_options=storage_options)
        if store.succeeded:
            raise InputError(f"{url}: holds committed posteriors; choose another URL")
        kernel = functools.partial(_posterior_partition, params=self._last, swap=self.label_switched_, **self._kernel)
        rows = self._votes.mapInArrow(kernel, "dataset string, item_id string, label byte, posterior double")
        tmp = f"{store.path}/_tmp/posteriors-{uuid.uuid4().hex}"
        rows.write.parquet(spark_url(store.url + tmp[len(store.path) :]))
        if store.exists("posteriors"):
            store.fs.rm(f"{store.path}/posteriors", recursive=True)
        store.fs.mv(tmp, f"{store.path}/posteriors", recursive=True)
        store.commit_success()
        return store.url_of("posteriors")

    def unpersist(self) -> None:
        """Release the persisted item votes."""
        if self._votes is not None:
            self._votes.unpersist()
            self._votes = None


def _batch(batch: pa.RecordBatch, n_judges: int, semi: bool) -> tuple[Any, ...]:
    """Indicators ``Ht`` of a batch's votes, and its label codes when semi-supervised."""
    votes = unpack([batch.column(c) for c in block_columns(n_judges)], n_judges)
    labels = batch.column("label").to_numpy(zero_copy_only=False).astype(np.int64) if semi else None
    return vote_indicators(votes), labels


def _posteriors(
    model: DawidSkene, Ht: npt.NDArray[np.float64], labels: Any, params: Params | None
) -> tuple[npt.NDArray[np.float64], float]:
    """``(T, loglik)`` of a batch: the E-step under ``params``, or EM's start (and no likelihood) when None."""
    if params is None:
        return model.initial_posteriors(Ht, labels), 0.0
    return model.e_step(Ht, params[0], params[1], labels)


def _pass_partition(
    batches: Iterator[pa.RecordBatch],
    *,
    model: DawidSkene,
    current: Params | None,
    previous: Params | None,
    n_judges: int,
    semi: bool,
) -> Iterator[pa.RecordBatch]:
    """M-step sums of :math:`T^{(t)}` = E-step(current) and the scalars of the pass, for one partition."""
    counts = np.zeros((2 * n_judges, 2))
    t1 = ll = delta = 0.0
    n = n_known = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        Ht, labels = _batch(batch, n_judges, semi)
        T, ll_batch = _posteriors(model, Ht, labels, current)
        if current is not None:
            T_prev, _ = _posteriors(model, Ht, labels, previous)
            delta = max(delta, float(np.max(np.abs(T[:, 1] - T_prev[:, 1]))))
        counts += Ht @ T  # rows v*J + j, columns y: the M-step counts of DawidSkene.m_step_from_counts
        t1, ll, n = t1 + float(T[:, 1].sum()), ll + ll_batch, n + batch.num_rows
        n_known += 0 if labels is None else int((labels != UNLABELLED).sum())
    slots = np.arange(-1, 2 * n_judges, dtype=np.int32)
    zeros = np.zeros(2 * n_judges)
    yield pa.RecordBatch.from_pydict(
        {
            "slot": slots,
            "t0": np.r_[0.0, counts[:, 0]],
            "t1": np.r_[t1, counts[:, 1]],
            "ll": np.r_[ll, zeros],
            "delta": np.r_[delta, zeros],
            "n": np.r_[n, zeros].astype(np.int64),
            "n_known": np.r_[n_known, zeros].astype(np.int64),
        }
    )


def _posterior_partition(
    batches: Iterator[pa.RecordBatch],
    *,
    model: DawidSkene,
    params: Params | None,
    swap: bool,
    n_judges: int,
    semi: bool,
) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        Ht, labels = _batch(batch, n_judges, semi)
        T, _ = _posteriors(model, Ht, labels, params)
        posterior = T[:, 0] if swap else T[:, 1]
        yield pa.RecordBatch.from_arrays(
            [batch.column("dataset"), batch.column("item_id"), batch.column("label"), pa.array(posterior)],
            names=["dataset", "item_id", "label", "posterior"],
        )


@dataclass(frozen=True)
class _PassStats:
    counts: npt.NDArray[np.float64]  # (2J, 2)
    t1: float
    ll: float
    delta: float
    n: int
    n_known: int


def _run_pass(votes: DataFrame, **kernel: Any) -> _PassStats:
    # Only the columns the E-step reads leave the cache: the item keys (strings) stay in the JVM.
    per_slot: pd.DataFrame = (
        votes.select("label", *block_columns(kernel["n_judges"]))
        .mapInArrow(functools.partial(_pass_partition, **kernel), _PASS_DDL)
        .groupBy("slot")
        .agg(*[F.sum(c).alias(c) for c in ("t0", "t1", "ll", "n", "n_known")], F.max("delta").alias("delta"))
        .toPandas()
    )  # 2J + 1 rows
    sums = per_slot.set_index("slot").sort_index()
    scalars = sums.loc[-1]
    return _PassStats(
        counts=sums.loc[0:, ["t0", "t1"]].to_numpy(),
        t1=float(scalars["t1"]),
        ll=float(scalars["ll"]),
        delta=float(scalars["delta"]),
        n=int(scalars["n"]),
        n_known=int(scalars["n_known"]),
    )


def packed_votes(
    source: str | SparkSession,
    config: EngineConfig,
    sample: int,
    judge_ids: list[str] | None,
    dataset: str | None,
    latent_items: Collection[str],
    binary: bool = True,
) -> tuple[DataFrame, list[str], Any]:
    """The packed votes of every item at ``sample`` (the vote codec's; ties and tie labels kept unless
    ``binary``), the judge ids, and the codec's tally."""
    if isinstance(source, SparkSession):
        spark, verdicts, labels = source, source.table("verdicts"), source.table("labels")
        if judge_ids is None:
            at_sample = verdicts.where(F.col("sample") == sample)
            judge_ids = sorted(r.judge_id for r in at_sample.select("judge_id").distinct().collect())
    else:
        spark = get_session(config.spark_master, conf=dict(config.spark_conf))
        verdicts, labels = source, read_table(spark, source, "labels")
        if judge_ids is None:
            judge_ids = judge_ids_of(source, config.storage_options, sample=sample, dataset=dataset)
    if not judge_ids:
        raise InputError(f"{source}: verdicts: sample: no verdict rows with sample={sample}")
    if latent_items:  # their labels left out (a cross-fitting's held-out fold); a broadcast anti-join
        hidden = spark.createDataFrame(pd.DataFrame({"item_id": sorted(map(str, latent_items))}))
        labels = labels.join(F.broadcast(hidden), on="item_id", how="left_anti")
    items, tally = item_votes_spark(
        spark,
        verdicts,
        labels,
        judge_ids,
        sample=sample,
        dataset=dataset,
        binary=binary,
        storage_options=config.storage_options,
    )
    # A cached plan keeps the shuffle's partition count (AQE may not coalesce it), and every pass starts one
    # Python task per partition: one partition per core is enough (batches bound the memory of a task).
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    return items.coalesce(parallelism), judge_ids, tally


def dawid_skene_spark(
    source: str | SparkSession,
    model: DawidSkene,
    *,
    engine: EngineConfig | None = None,
    sample: int = 0,
    judge_ids: list[str] | None = None,
    dataset: str | None = None,
    latent_items: Collection[str] = (),
) -> DSResult:
    """Fit Dawid-Skene by EM over every item of a verdict table, one Spark pass per iteration.

    Items are those with a verdict at ``sample``; judges are every judge with a verdict there (sorted ids);
    ``tie``, null and unparseable verdicts are missing. With ``semi_supervised`` the items with label A or B are
    clamped to it (the others, null or ``tie`` labels included, are latent).

    Parameters
    ----------
    source : str or SparkSession
        Dataset root URL, or a session with the views ``verdicts`` and ``labels``.
    model : DawidSkene
        The (unfitted) estimator whose hyperparameters the EM uses: ``n_iter``, ``tol``, ``tol_posterior``,
        ``smoothing``, ``eps``, ``fixed_iter`` and ``semi_supervised`` (clamp the labelled items; False ignores the
        labels). :func:`judgecal_dist.engine.jobs.dawid_skene.fit_dawid_skene` builds it for both engines.
    engine : EngineConfig, optional
        Spark master and settings.
    sample : int, default 0
    judge_ids, dataset, latent_items
        As in :func:`judgecal_dist.engine.jobs.dawid_skene.fit_dawid_skene`.

    Returns
    -------
    DSResult
        Parameters, iteration count, convergence, loss history; :meth:`DSResult.write_posteriors` writes the
        item posteriors without collecting them. The votes stay persisted until :meth:`DSResult.unpersist`.

    Raises
    ------
    InputError
        No verdicts at ``sample``, unreadable tables, a category outside the alphabet.
    ConfigError
        A hyperparameter out of range (checked by ``DawidSkene``).

    Warns
    -----
    sklearn.exceptions.ConvergenceWarning
        No stopping rule met within ``n_iter`` (unless ``fixed_iter``).
    """
    config = engine or EngineConfig()
    where = "dawid_skene_spark"
    model.check_params(where)
    n_iter, semi_supervised, fixed_iter = model.n_iter, model.semi_supervised, model.fixed_iter
    votes, judge_ids, tally = packed_votes(source, config, sample, judge_ids, dataset, latent_items)
    votes = votes.persist(StorageLevel.MEMORY_AND_DISK)
    J = len(judge_ids)
    kernel = {"model": model, "n_judges": J, "semi": semi_supervised}
    timings: list[float] = []

    def run(current: Params | None, previous: Params | None) -> _PassStats:
        start = time.perf_counter()
        stats = _run_pass(votes, current=current, previous=previous, **kernel)
        timings.append(time.perf_counter() - start)
        return stats

    def m_step(stats: _PassStats) -> Params:
        return model.m_step_from_counts(stats.counts, stats.t1, stats.n)

    stats = run(None, None)  # the initialisation's M-step sums (also materialises the persisted votes)
    log.info("dawid-skene: %d items coded and persisted, initial pass (%.2fs)", stats.n, timings[-1])
    _refuse_first_pass(votes, stats, tally.value, source, sample)
    voted = stats.counts.reshape(2, J, 2).sum(axis=(0, 2)) > 0  # judges with a verdict
    em = _EM(model, run, m_step, timings)
    params, previous, stats, losses, converged, it = em.iterate(m_step(stats), stats, int(n_iter), fixed_iter)
    if not converged and not fixed_iter:
        model.warn_not_converged(where)
    prior, confusion = params
    switched = stats.n_known == 0 and model.needs_label_swap(confusion, voted)
    if switched:
        prior, confusion = 1.0 - prior, confusion[:, ::-1, :].copy()
    return DSResult(
        judge_ids=judge_ids,
        confusion_=confusion,
        prior_=float(prior),
        n_iter_=it,
        converged_=converged,
        loss_history_=losses,
        label_switched_=switched,
        n_items=stats.n,
        n_labelled=stats.n_known,
        passes=len(timings),
        seconds_per_pass=timings,
        _votes=votes,
        _kernel=kernel,
        _last=previous,
    )


def _refuse_first_pass(votes: DataFrame, stats: _PassStats, tally: Any, source: Any, sample: int) -> None:
    """Refuse (and drop the persisted votes) when the first pass met verdicts outside the alphabet or no item."""
    if tally.bad_rows:
        votes.unpersist()
        raise InputError(
            f"{source}: verdicts: verdict: {tally.bad_rows} rows with a category outside the alphabet "
            f"(e.g. {sorted(tally.bad_examples)})"
        )
    if stats.n == 0:
        votes.unpersist()
        raise InputError(f"{source}: verdicts: no items with sample={sample}")


@dataclass
class _EM:
    """The EM iterations of :func:`dawid_skene_spark`: one pass (E-step sums) and one M-step per iteration."""

    model: Any
    run: Callable[[Params | None, Params | None], _PassStats]
    m_step: Callable[[_PassStats], Params]
    timings: list[float]

    def iterate(
        self, params: Params, stats: _PassStats, n_iter: int, fixed_iter: bool
    ) -> tuple[Params, Params | None, _PassStats, list[float], bool, int]:
        """Iterate from the initial ``params``: the last parameters, those of the last pass, its sums, the losses,
        whether the stopping rule was met, and the iterations run."""
        previous: Params | None = None
        ll_prev = None
        losses: list[float] = []
        converged, it = False, 0
        for it in range(1, n_iter + 1):
            stats = self.run(params, previous)
            previous = params
            losses.append(-stats.ll / stats.n)
            converged = self.model.meets_stopping_rule(stats.delta, stats.ll, ll_prev)
            params = self.m_step(stats)
            log.info(
                "dawid-skene: iteration %d loss %.10g change %.3g (%.2fs)",
                it,
                losses[-1],
                stats.delta,
                self.timings[-1],
            )
            if converged and not fixed_iter:
                break
            ll_prev = stats.ll
        return params, previous, stats, losses, converged, it
