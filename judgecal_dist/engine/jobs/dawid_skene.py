r"""Dawid-Skene over a whole verdict table: in memory when the votes fit, one Spark pass per EM iteration otherwise.

:func:`fit_dawid_skene` is the one entry point (``judgecal fit``, studies, notebooks). Both engines run the EM of
:class:`~judgecal_dist.methods.aggregation.dawid_skene.DawidSkene` (its initialisation, E-step, M-step from
summed counts, stopping rule and label-switch rule; the Spark path calls them per batch of items in
:mod:`judgecal_dist.engine.jobs.ds_spark`), so they give the same iterations and the same parameters up to the order
of floating-point sums. Which engine runs is :func:`judgecal_dist.engine.jobs.stats.choose_engine`'s rule for every
job on a table: ``auto`` counts the verdict rows from the Parquet footers and stays in memory while
they fit the in-memory budget (:func:`judgecal_dist.engine.jobs.stats.local_row_limit`).

The in-memory path reads the table once with the io reader and codes it with the vote codec
(:func:`judgecal_dist.engine.votes.codec.item_votes`); the Spark path builds the same item x judge votes in Spark
tasks and keeps them there, so the driver holds only :math:`(\pi, \Pi)`.

References
----------
.. [1] A. P. Dawid, A. M. Skene. Maximum Likelihood Estimation of Observer Error-Rates Using the EM Algorithm.
   JRSS C 28(1):20-28, 1979. doi:10.2307/2346806.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.local import judge_ids_of
from judgecal_dist.engine.jobs.stats import choose_engine
from judgecal_dist.engine.votes.codec import VERDICT_COLUMNS, ItemVotes, item_votes
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.dataset import read_dataset_table
from judgecal_dist.methods.aggregation.cells import label_cells, vote_cells
from judgecal_dist.methods.aggregation.dawid_skene import UNLABELLED, DawidSkene

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DawidSkeneFit", "VotePatterns", "dawid_skene_model", "fit_dawid_skene", "read_item_votes"]

log = logging.getLogger(__name__)

_LABEL_COLUMNS = ["dataset", "item_id", "label"]


@dataclass(frozen=True)
class DawidSkeneFit:
    """A Dawid-Skene fit over every item of a table, whichever engine ran it.

    Attributes
    ----------
    model : DawidSkene
        The fitted estimator: ``prior_``, ``confusion_`` (``[j, y, v]``, judges in ``judge_ids`` order),
        ``n_iter_``, ``converged_``, ``loss_history_``, ``label_switched_``; ``predict_proba`` scores new votes.
        ``posteriors_`` (the fit items' soft labels) only from the in-memory engine: on Spark they stay in Spark.
    judge_ids : list of str
        The judges, in the columns' order.
    engine : str
        ``"local"`` or ``"spark"``.
    n_items, n_labelled : int
        Items with a verdict at the sample; those clamped to a label (0 without ``semi_supervised``).
    seconds : float
        Wall time of the fit, reading the table included.
    passes : int
        Passes over the item votes: EM iterations plus the initialisation's.
    """

    model: DawidSkene
    judge_ids: list[str]
    engine: str
    n_items: int
    n_labelled: int
    seconds: float
    passes: int

    @property
    def prior(self) -> float:
        """Class prior :math:`\\pi = P(Y = 1)` (``A``)."""
        return float(self.model.prior_)

    @property
    def confusion(self) -> npt.NDArray[np.float64]:
        """Per-judge confusion matrices :math:`\\Pi^{(j)}_{yv}`, shape (n_judges, 2, 2), ``[j, y, v]``."""
        return np.asarray(self.model.confusion_, dtype=np.float64)

    @property
    def n_iter(self) -> int:
        """EM iterations run."""
        return int(self.model.n_iter_)

    @property
    def loglik(self) -> float:
        """Observed-data log-likelihood :math:`\\ell` of the last iteration, summed over the items."""
        return -float(self.model.loss_history_[-1]) * self.n_items


def _judges(source: Any, config: EngineConfig, sample: int, dataset: str | None, judge_ids: Any) -> list[str] | None:
    """The judges of a table fit (both engines): ``judge_ids`` as given, else every judge with a row at ``sample``
    (sorted); None for votes in memory (column positions) and for a session (its views are read in Spark)."""
    if judge_ids is not None:
        return [str(j) for j in judge_ids]
    if not isinstance(source, str):
        return None
    found = judge_ids_of(source, config.storage_options, sample=sample, dataset=dataset)
    if not found:
        raise InputError(f"{source}: verdicts: sample: no verdict rows with sample={sample}")
    return found


def read_item_votes(
    url: str, config: EngineConfig, sample: int, judge_ids: list[str] | None, dataset: str | None
) -> ItemVotes:
    """The table's verdicts and labels read once and coded (the vote codec's dense votes of every item)."""
    verdicts = read_dataset_table(
        url,
        "verdicts",
        VERDICT_COLUMNS,
        storage_options=config.storage_options,
        dictionary_columns=["dataset", "item_id", "group_id", "judge_id", "verdict"],
    )
    table = read_dataset_table(url, "labels", _LABEL_COLUMNS, storage_options=config.storage_options)
    return item_votes(verdicts, table, judge_ids, sample=sample, dataset=dataset)


def _votes_in_memory(
    source: Any,
    labels: npt.ArrayLike | None,
    config: EngineConfig,
    sample: int,
    judge_ids: list[str] | None,
    dataset: str | None,
    latent_items: Collection[str],
) -> tuple[npt.ArrayLike, npt.ArrayLike | None]:
    """Votes and label codes (-1 = none) of an in-memory fit."""
    if isinstance(source, str):
        source = read_item_votes(source, config, sample, judge_ids, dataset)
    if isinstance(source, ItemVotes):
        codes = source.labels
        if latent_items:
            hidden = np.isin(
                source.keys.column("item_id").to_numpy(zero_copy_only=False).astype(str), list(latent_items)
            )
            codes = np.where(hidden, UNLABELLED, codes).astype(codes.dtype)
        return source.votes, codes
    return source, labels


@dataclass(frozen=True)
class VotePatterns:
    """The vote-pattern cells of a panel's items, keyed once, for many fits that differ only in which labels are
    latent (a cross-fitting's folds and its export): each fit recounts the cells by label state
    (:func:`~judgecal_dist.methods.aggregation.cells.label_cells`, linear) and runs EM over them.

    Attributes
    ----------
    votes : ndarray of shape (n_patterns, n_judges)
        The distinct vote patterns.
    pattern : ndarray of shape (n_items,)
        Each item's pattern (items as in the source :class:`ItemVotes`: every item with a verdict row at the
        sample, as a table fit reads them, even one without a verdict from these judges).
    labels : ndarray of shape (n_items,)
        Label codes (-1: none).
    counts : ndarray of shape (n_items,) or None
        Items each row stands for, when the rows were counted elsewhere (a Spark job's cells); None: one each.
    """

    votes: npt.NDArray[np.int8]
    pattern: npt.NDArray[np.intp]
    labels: npt.NDArray[np.int64]
    counts: npt.NDArray[np.float64] | None = None

    @classmethod
    def of(
        cls,
        votes: npt.NDArray[np.int8],
        labels: npt.NDArray[np.integer],
        cols: npt.ArrayLike,
        counts: npt.NDArray[np.float64] | None = None,
    ) -> VotePatterns:
        """The patterns of the judges ``cols`` (column positions of ``votes``: an :class:`ItemVotes`' or a cell
        table's, with their label codes and ``counts``)."""
        patterns, _, pattern, _ = vote_cells(votes[:, np.asarray(cols)])
        return cls(patterns, pattern, labels.astype(np.int64), counts)

    def fit(self, model: DawidSkene, latent: npt.NDArray[np.bool_] | None = None) -> DawidSkene:
        """``model`` fitted over the cells, the labels of the items flagged ``latent`` left out (all of them
        unless ``semi_supervised``); ``posteriors_`` holds one row per cell."""
        labels = self.labels if latent is None else np.where(latent, UNLABELLED, self.labels)
        if not model.semi_supervised:
            labels = np.full_like(self.labels, UNLABELLED)
        cell_pattern, cell_labels, _, counts = label_cells(self.pattern, len(self.votes), labels, self.counts)
        return model.fit_cells(self.votes[cell_pattern], cell_labels if model.semi_supervised else None, counts)


def dawid_skene_model(
    *,
    n_iter: int = 100,
    tol: float = 1e-6,
    tol_posterior: float = 1e-6,
    semi_supervised: bool = True,
    smoothing: float = 0.01,
    eps: float = 1e-6,
    fixed_iter: bool = False,
) -> DawidSkene:
    """The estimator of a table fit (:func:`fit_dawid_skene`'s defaults), hyperparameters checked."""
    model = DawidSkene(
        n_iter=n_iter,
        tol=tol,
        tol_posterior=tol_posterior,
        smoothing=smoothing,
        semi_supervised=semi_supervised,
        fixed_iter=fixed_iter,
        eps=eps,
    )
    model.check_params("fit_dawid_skene")
    return model


def fit_dawid_skene(
    source: str | SparkSession | ItemVotes | npt.ArrayLike,
    labels: npt.ArrayLike | None = None,
    *,
    n_iter: int = 100,
    tol: float = 1e-6,
    tol_posterior: float = 1e-6,
    semi_supervised: bool = True,
    smoothing: float = 0.01,
    eps: float = 1e-6,
    fixed_iter: bool = False,
    engine: str = "auto",
    config: EngineConfig | None = None,
    sample: int = 0,
    judge_ids: Sequence[str] | None = None,
    dataset: str | None = None,
    latent_items: Collection[str] = (),
) -> DawidSkeneFit:
    """Fit binary Dawid-Skene by EM over every item, in memory or on Spark (same iterations, same parameters).

    Parameters
    ----------
    source : str, SparkSession, ItemVotes or array-like
        A dataset root URL (``verdicts`` and ``labels``), a session with the views ``verdicts`` and ``labels``
        (always Spark), the vote codec's :class:`~judgecal_dist.engine.votes.codec.ItemVotes`, or an
        ``(n_items, n_judges)`` vote matrix with codes 1 (A), 0 (B), -1 (missing).
    labels : array-like of shape (n_items,), optional
        With a vote matrix only: 1, 0 or -1 (no label). A table's labels come from its ``labels`` table: items
        labelled A or B are anchored, null and ``tie`` labels are latent.
    n_iter, tol, tol_posterior, smoothing, eps, fixed_iter
        As in :class:`~judgecal_dist.methods.aggregation.dawid_skene.DawidSkene` (``tol``: relative change of the
        log-likelihood; ``n_iter``: the most iterations).
    semi_supervised : bool, default True
        Clamp the labelled items' posteriors to their labels (the labels anchor EM, and the classes never
        switch); False ignores the labels.
    engine : {"auto", "local", "spark"}, default "auto"
        ``auto``: :func:`~judgecal_dist.engine.jobs.stats.choose_engine` (in memory up to
        :func:`~judgecal_dist.engine.jobs.stats.local_row_limit` verdict rows). A vote matrix or ``ItemVotes`` is always in memory.
    config : EngineConfig, optional
        Spark master and settings, the in-memory budget, storage options.
    sample : int, default 0
        The verdict sample of a table; ``tie``, null and unparseable verdicts are missing votes.
    judge_ids : sequence of str, optional
        A table's judges, in column order (other judges' verdicts are left out). Default: every judge with a
        verdict at ``sample``, sorted.
    dataset : str, optional
        Only this dataset's items of a table.
    latent_items : collection of str, optional
        Item ids (of ``dataset``) whose labels are left out: they stay latent, as in a cross-fitting's held-out
        fold. Only with a table or ``ItemVotes``.

    Returns
    -------
    DawidSkeneFit

    Raises
    ------
    InputError
        No verdicts at ``sample``, a verdict outside the alphabet, unreadable tables, malformed votes or labels.
    ConfigError
        An unknown engine, ``spark`` for in-memory votes, ``labels`` beside a table or ``ItemVotes``, a
        hyperparameter out of range.

    Warns
    -----
    sklearn.exceptions.ConvergenceWarning
        No stopping rule met within ``n_iter`` (unless ``fixed_iter``).

    Examples
    --------
    >>> V = np.array([[1, 1, 1], [1, 1, 0], [0, 0, 0], [0, 0, 1], [1, -1, 1], [0, 0, -1]], dtype=np.int8)
    >>> fit = fit_dawid_skene(V, [1, -1, -1, -1, -1, 0])
    >>> fit.engine, fit.model.predict([[1, 1, 1], [0, 0, 0]]).tolist()
    ('local', [1, 0])
    """
    config = config or EngineConfig()
    model = dawid_skene_model(
        n_iter=n_iter,
        tol=tol,
        tol_posterior=tol_posterior,
        semi_supervised=semi_supervised,
        smoothing=smoothing,
        eps=eps,
        fixed_iter=fixed_iter,
    )
    if labels is not None and not isinstance(source, np.ndarray | list | tuple):
        raise ConfigError(
            "fit_dawid_skene: labels: only with a vote matrix; a table's labels come from its labels table and "
            "ItemVotes carry their own; pass labels=None"
        )
    if latent_items and isinstance(source, np.ndarray | list | tuple):
        raise ConfigError("fit_dawid_skene: latent_items: only with a table or ItemVotes; mark them -1 in labels")
    start = time.perf_counter()
    chosen = _choose(source, engine, config)
    judges = _judges(source, config, sample, dataset, judge_ids)
    if chosen == "spark":
        return _fit_spark(
            source, model, config, start, sample=sample, judge_ids=judges, dataset=dataset, latent_items=latent_items
        )
    votes, codes = _votes_in_memory(source, labels, config, sample, judges, dataset, latent_items)
    model.fit(votes, codes if semi_supervised else None)
    n_labelled = int((np.asarray(codes) != UNLABELLED).sum()) if semi_supervised and codes is not None else 0
    judges = judges or [str(j) for j in range(model.n_features_in_)]  # a bare matrix: column positions
    seconds = time.perf_counter() - start
    log.debug("dawid-skene in memory: %d iterations, %.1fs", model.n_iter_, seconds)  # one per fit candidate
    return DawidSkeneFit(model, judges, "local", len(model.posteriors_), n_labelled, seconds, model.n_iter_ + 1)


def _choose(source: Any, engine: str, config: EngineConfig) -> str:
    # A session is recognised by its class name, so votes in memory never import Spark (classic or Connect).
    if isinstance(source, str) or type(source).__name__ == "SparkSession":
        return choose_engine(source, engine, config)
    if engine not in ("auto", "local"):
        raise ConfigError(
            f"fit_dawid_skene: engine: {engine!r} needs a dataset URL or a SparkSession; votes in "
            "memory run with engine='local' or 'auto'"
        )
    return "local"


def _fit_spark(source: Any, model: DawidSkene, config: EngineConfig, start: float, **table: Any) -> DawidSkeneFit:
    from judgecal_dist.engine.jobs.ds_spark import dawid_skene_spark

    result = dawid_skene_spark(source, model, engine=config, **table)
    result.unpersist()
    params = model.get_params()
    fitted = DawidSkene.from_parameters(result.prior_, result.confusion_, **params)
    fitted.n_iter_, fitted.converged_ = result.n_iter_, result.converged_
    fitted.loss_history_, fitted.label_switched_ = result.loss_history_, result.label_switched_
    seconds = time.perf_counter() - start
    log.info("dawid-skene on spark: %d iterations, %d passes, %.1fs", result.n_iter_, result.passes, seconds)
    return DawidSkeneFit(fitted, result.judge_ids, "spark", result.n_items, result.n_labelled, seconds, result.passes)
