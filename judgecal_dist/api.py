"""The notebook API: a calibrated panel of judges as one scikit-learn classifier.

:class:`CalibratedAggregator` reads votes in two shapes:

* a **wide** frame, one row per item (the index holds the item ids) and one column per judge, values ``A``/``B``/
  ``tie``/``0``/``1``/null: the ``X`` of scikit-learn, with ``y`` one label per row (A/B or 0/1, null =
  unlabelled), so ``cross_val_score``, ``GridSearchCV``, ``Pipeline`` and ``clone`` work;
* a **long** frame of verdicts, ours (``item_id``, ``judge_id``, ``verdict``; ``dataset``, ``group_id`` and
  ``sample`` when present, as the ``verdicts`` table is read) or crowd-kit's (``task``, ``worker``, ``label``), with
  ``y`` a Series of labels indexed by item id.

Both go through the project's one vote codec (:mod:`judgecal_dist.engine.votes.codec`) and missing evidence means
what it means to ``judgecal score``, because the rows come from the same kernel
(:func:`judgecal_dist.scoring.kernel.score_batch`): a null verdict or a tie is a missing vote; a judge the model
does not know is named in a warning and left out; a table holding fewer than ``min_judge_coverage`` of the model's
judges is refused (:mod:`judgecal_dist.scoring.checks`, the CLI's rule); an item without a vote from a model judge
gets no verdict (null ``p``, never the class prior); ``in_calibration`` marks the items the model was fitted on
(:func:`judgecal_dist.scoring.kernel.in_calibration`, whatever door fitted it).

The fit is the studies' (:mod:`judgecal_dist.methods.pipeline`): an aggregator (Step 1), a calibrator on its
log-odds (Steps 2-3) and split-conformal thresholds (Step 4). :meth:`CalibratedAggregator.save` writes the JSON
model ``judgecal score --model`` applies (:mod:`judgecal_dist.models`); :meth:`CalibratedAggregator.load` reads
any binary-pipeline model a study, ``judgecal fit`` or ``save`` exported.

:class:`~judgecal_dist.methods.labels.estimators.PredictionPoweredMean` (PPI++, the inverse-probability form for
actively drawn labels) and the target builders of ``judgecal label estimate`` take the panel's ``p`` as the proxy
on arrays. See ``docs/api.md``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from typing import Any, Self

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.engine.votes.codec import CodedRows, binary_codes, category_codes, encode
from judgecal_dist.errors import InputError
from judgecal_dist.io.adapters.long import category, long_columns
from judgecal_dist.io.schema import MISSING_CODE, VOTE_A
from judgecal_dist.methods.calibration.conformal import SplitConformal
from judgecal_dist.methods.labels.estimators import PredictionPoweredMean, estimates_frame
from judgecal_dist.methods.labels.targets import build_targets, target_moments
from judgecal_dist.methods.pipeline import AGGREGATORS, CALIBRATORS, Settings, aggregate, calibrator
from judgecal_dist.scoring.checks import MIN_JUDGE_COVERAGE, check_coverage, check_judges
from judgecal_dist.splits import assign_blocks, group_keys

__all__ = [
    "CalibratedAggregator",
    "PredictionPoweredMean",
    "build_targets",
    "estimates_frame",
    "target_moments",
    "vote_matrix",
]

#: The columns of a long vote table, in our names (crowd-kit's task/worker/label are mapped by ``long_columns``).
_LONG = ("item_id", "judge_id", "verdict")
#: Seed offset of the conformal slice, as the inclusion study's exported model uses it.
CONFORMAL_SEED_OFFSET = 1_000_003
#: Classes of a model that saw no labels here (a loaded one): its verdicts.
_VERDICT_CLASSES = np.array(["A", "B"], dtype=object)


def _long_names(frame: pd.DataFrame) -> dict[str, str] | None:
    """Our name -> the frame's column, when the frame is a long vote table (ours or crowd-kit's); else None."""
    ours = long_columns([str(c) for c in frame.columns], "verdicts", source="X")
    names = {name: column for column, name in zip(frame.columns, ours.values(), strict=True)}
    return names if set(_LONG) <= set(names) else None


def _categories(values: pd.Series) -> pa.Array:
    """Verdict categories of user values by ingest's rule (:func:`~judgecal_dist.io.adapters.long.category`: A/B/tie
    as they are, 1/0 as A/B, null as None, anything else as its text for the codec to refuse), once per distinct
    value."""
    cached = functools.lru_cache(maxsize=None, typed=True)(category)  # typed: 1 and True are different values
    return pa.array([category(v) if isinstance(v, float) else cached(v) for v in values], pa.string())


def _rows_table(votes: pd.DataFrame, sample: int, where: str) -> pa.Table:
    """The verdict rows (``dataset, item_id, group_id, judge_id, verdict``) at ``sample`` of a long or wide frame,
    as the vote codec reads them (:func:`~judgecal_dist.engine.votes.codec.encode`).

    A long frame without ``dataset`` has null datasets (the item ids alone name its items), without ``group_id``
    each item is its own group, without ``sample`` every row is of the sample asked for.
    """
    if not isinstance(votes, pd.DataFrame):
        raise InputError(
            f"{where}: expected a DataFrame (wide: one row per item, one column per judge; or long: item_id, "
            f"judge_id, verdict), got {type(votes).__name__}"
        )
    names = _long_names(votes)
    if names is not None:
        item, judge, verdict = (names[c] for c in _LONG)
        keys = [names[c] for c in ("dataset", "item_id", "judge_id", "sample") if c in names]
        rows = votes if "sample" not in names else votes[votes[names["sample"]] == sample]
        repeated = rows.duplicated(keys)
        if repeated.any():
            first = rows[repeated].iloc[0]
            raise InputError(
                f"{where}: {item}, {judge}: {int(repeated.sum())} repeated verdicts (e.g. item {first[item]!r}, "
                f"judge {first[judge]!r}); keep one sample per judge and item"
            )
        ids = rows[item].astype(str)
        judges, values = rows[judge].astype(str), rows[verdict]
        dataset = rows[names["dataset"]].astype(str) if "dataset" in names else None
        group = rows[names["group_id"]].astype(str) if "group_id" in names else ids
    else:  # wide: every cell is a verdict row (a null cell is a missing vote of a judge the table holds)
        if not votes.index.is_unique:
            raise InputError(
                f"{where}: index: item ids repeat (e.g. {votes.index[votes.index.duplicated()][:3].tolist()})"
            )
        ids = pd.Series(np.repeat(votes.index.astype(str).to_numpy(), votes.shape[1]))
        judges = pd.Series(np.tile(votes.columns.astype(str).to_numpy(), votes.shape[0]))
        values = pd.Series(votes.to_numpy(dtype=object).ravel(), dtype=object)
        dataset, group = None, ids
    n = len(ids)
    return pa.table(
        {
            "dataset": pa.nulls(n, pa.string()) if dataset is None else pa.array(dataset, pa.string()),
            "item_id": pa.array(ids, pa.string()),
            "group_id": pa.array(group, pa.string()),
            "judge_id": pa.array(judges, pa.string()),
            "verdict": _categories(values),
        }
    )


def _encode(votes: pd.DataFrame, judges: Sequence[str] | None, sample: int, where: str) -> CodedRows:
    rows = encode(_rows_table(votes, sample, where), judges)
    rows.reject_unknown(where=where)
    return rows


def vote_matrix(
    votes: pd.DataFrame, judges: Sequence[str] | None = None, *, sample: int = 0, where: str = "votes"
) -> tuple[pd.Index, list[str], npt.NDArray[np.int8]]:
    """Items, judges and the dense int8 vote matrix (1 = A, 0 = B, -1 = missing) of a long or wide frame.

    ``judges`` fixes the columns (a fitted model's panel); a judge it does not list is left out, a listed judge
    with no vote is a column of missing votes. Null verdicts and ties are missing votes.

    Raises
    ------
    InputError
        Not a DataFrame, a verdict outside A/B/tie/0/1, or a repeated (item, judge) pair.
    """
    rows = _encode(votes, judges, sample, where)
    panel = rows.judges_seen if judges is None else list(judges)
    items = pd.Index(rows.keys["item_id"].to_pylist(), name="item_id")
    return items, panel, rows.dense(len(panel))


def _label_codes(values: Any, where: str) -> npt.NDArray[np.int8]:
    """Binary label codes of user labels (``MISSING_CODE`` = unlabelled); a tie or an unknown value is refused."""
    codes = category_codes(_categories(pd.Series(np.asarray(values, dtype=object), dtype=object)))
    bad = (codes < MISSING_CODE) | (binary_codes(codes) != codes)
    if bad.any():
        shown = pd.Series(np.asarray(values, dtype=object)[bad]).unique()[:3].tolist()
        raise InputError(f"{where}: y: a label is A/B or 0/1 (1 = A) or null, got {shown}")
    return codes


def _item_labels(X: pd.DataFrame, y: Any, items: pa.Array, where: str) -> tuple[npt.NDArray[np.int8], npt.NDArray[Any]]:
    """Binary label code of each coded item (``MISSING_CODE`` = unlabelled) and the classes ``y`` names, sorted.

    With a long ``X``, ``y`` is a Series indexed by item id; with a wide one, one label per row of ``X``.
    """
    if _long_names(X) is not None:
        if not isinstance(y, pd.Series):
            raise InputError(
                f"{where}: y: with a long X, a Series of labels indexed by item id, got {type(y).__name__}"
            )
        labels = y.set_axis(y.index.astype(str))
    else:
        values = y.to_numpy(dtype=object) if isinstance(y, pd.Series) else np.asarray(y, dtype=object)
        if values.shape != (len(X),):
            raise InputError(f"{where}: y: one label per row of X ({len(X)}), got shape {values.shape}")
        labels = pd.Series(values, index=X.index.astype(str), dtype=object)
    codes = pd.Series(_label_codes(labels, where), index=labels.index)
    named = pd.unique(labels[codes >= 0].to_numpy(dtype=object))
    if len({type(v) for v in named}) > 1 or len(set(_label_codes(named, where).tolist())) != len(named):
        raise InputError(f"{where}: y: {named.tolist()[:4]} mix codings (e.g. 1 and 'A'); use A/B or 0/1")
    classes = np.unique(np.asarray(named.tolist()))  # sorted, as scikit-learn orders classes_
    return codes.reindex(items.to_pylist()).fillna(MISSING_CODE).to_numpy(np.int8), classes


def _name(step: Any, known: Sequence[str], kind: str) -> str:
    if isinstance(step, str) and step in known:
        return step
    raise InputError(f"CalibratedAggregator: {kind}: {step!r} is not one of {list(known)}")


class CalibratedAggregator(ClassifierMixin, BaseEstimator):
    """A panel's verdicts -> aggregator -> calibrator -> conformal sets, as a scikit-learn classifier.

    Parameters
    ----------
    aggregator : str, default "one_coin"
        One of :data:`~judgecal_dist.methods.pipeline.AGGREGATORS` (majority, accuracy_weighted, log_odds,
        one_coin, dawid_skene, stacking).
    calibrator : str, default "beta"
        One of :data:`~judgecal_dist.methods.pipeline.CALIBRATORS` (none, platt, temperature, beta, isotonic).
    conformal_alphas : tuple of float, default (0.1,)
        Miscoverage levels of the conformal sets; () fits no sets and uses every labelled item for Steps 1-3.
    conformal_fraction : float, default 0.2
        Share of the labelled items (by item hash) held out for the conformal thresholds.
    calibrator_input : {"logit", "probability"}, default "logit"
        What the calibrator reads: the aggregator's unclipped log-odds, or its P(A) clipped at ``eps``.
    eps : float, default 1e-6
    seed : int, default 0
        Seed of the conformal slice (the inclusion study's exported model uses its config's seed).
    sample : int, default 0
        The verdict sample read from a long frame with a ``sample`` column (``judgecal score --sample``).
    min_judge_coverage : float, default 0.5
        Least share of the model's judges that must have verdicts in a frame it scores (``judgecal score
        --min-judge-coverage``); 0 scores any frame.

    Attributes
    ----------
    classes_ : ndarray
        The labels seen in ``fit`` (sorted, as scikit-learn orders them): ``[0, 1]`` or ``["A", "B"]``;
        ``predict_proba``'s columns follow it. ``["A", "B"]`` for a loaded model.
    judge_ids_ : list of str
        The panel, in the order of the model's weights.
    aggregator_, calibrator_ : estimator
        The fitted Step-1 aggregator and calibrator (None for ``none``).
    conformal_ : list of SplitConformal
    model_ : judgecal_dist.models.BinaryPipeline
        The fitted pipeline as the model format holds it (what :meth:`save` writes and ``judgecal score`` applies).

    Notes
    -----
    ``score`` is scikit-learn's classifier default, accuracy of :meth:`predict` (``ClassifierMixin``); pass
    ``scoring="neg_log_loss"`` to ``cross_val_score`` or ``GridSearchCV`` for the log-loss of :meth:`predict_proba`.
    An item without a vote from any model judge has no probability: :meth:`predict` and :meth:`predict_proba`
    refuse it by name (drop it, or read its null row from :meth:`predict_items`).
    """

    def __init__(
        self,
        aggregator: str = "one_coin",
        calibrator: str = "beta",
        *,
        conformal_alphas: tuple[float, ...] = (0.1,),
        conformal_fraction: float = 0.2,
        calibrator_input: str = "logit",
        eps: float = 1e-6,
        seed: int = 0,
        sample: int = 0,
        min_judge_coverage: float = MIN_JUDGE_COVERAGE,
    ) -> None:
        self.aggregator = aggregator
        self.calibrator = calibrator
        self.conformal_alphas = conformal_alphas
        self.conformal_fraction = conformal_fraction
        self.calibrator_input = calibrator_input
        self.eps = eps
        self.seed = seed
        self.sample = sample
        self.min_judge_coverage = min_judge_coverage

    # -- fit ---------------------------------------------------------------------------------------------------
    def fit(self, X: pd.DataFrame, y: Any) -> Self:
        """Fit on the labelled items of ``X`` (items with a null label, or none in ``y``, are not used).

        Raises
        ------
        InputError
            A frame or labels the codec refuses, unknown step names, or fewer than four labelled items of both
            classes.
        """
        from judgecal_dist.models import pipeline_from_estimators

        where = "CalibratedAggregator.fit"
        agg_name = _name(self.aggregator, AGGREGATORS, "aggregator")
        cal_name = _name(self.calibrator, CALIBRATORS, "calibrator")
        settings = Settings(eps=self.eps, calibrator_input=self.calibrator_input)
        rows = _encode(X, None, self.sample, f"{where}: X")
        judges = rows.judges_seen
        V = rows.dense(len(judges))
        labels, self.classes_ = _item_labels(X, y, rows.keys["item_id"], where)
        labelled = np.flatnonzero(labels >= 0)
        if labelled.size < 4 or len(np.unique(labels[labelled])) < 2:
            raise InputError(f"{where}: y: {labelled.size} labelled items of X, need >= 4 with both classes")
        ids = np.asarray(rows.keys["item_id"].to_pylist(), dtype=object)[labelled]
        v_lab, y_lab = V[labelled], labels[labelled]
        fit = np.ones(len(labelled), dtype=bool)
        if self.conformal_alphas:
            shares = [1.0 - self.conformal_fraction, self.conformal_fraction]
            fit = assign_blocks(group_keys(ids), self.seed + CONFORMAL_SEED_OFFSET, shares) == 0
        slice_ = v_lab[~fit] if (~fit).any() else v_lab[:1]  # no conformal slice: its scores are unused
        s_fit, s_slice, agg = aggregate(agg_name, settings, v_lab[fit], y_lab[fit], slice_)
        cal = calibrator(cal_name, settings)
        if cal is not None:
            cal.fit(s_fit, y_lab[fit])
        self.judge_ids_, self.aggregator_, self.calibrator_ = judges, agg, cal
        conformal: list[SplitConformal] = []
        if self.conformal_alphas:
            from judgecal_dist.methods.pipeline import apply_calibrator

            p_slice = apply_calibrator(cal, s_slice, settings)
            conformal = [SplitConformal(alpha=a).fit(p_slice, y_lab[~fit]) for a in self.conformal_alphas]
        self.conformal_ = conformal
        datasets = rows.keys["dataset"].unique().drop_null().to_pylist()
        self.model_ = pipeline_from_estimators(
            judge_ids=judges,
            aggregator_name=agg_name,
            aggregator=agg,
            calibrator_name=cal_name,
            calibrator=cal,
            settings=settings,
            conformal=conformal,
            # the fingerprint every scorer reads (in_calibration); the dataset only when the frame names one
            fitted_on={
                "item_ids": sorted(ids.tolist()),
                "dataset": datasets[0] if len(datasets) == 1 else None,
                "items": int(fit.sum()),
                "labelled_items": int(labelled.size),
                "conformal_items": int((~fit).sum()),
                "sample": self.sample,
            },
        )
        return self

    # -- scoring -----------------------------------------------------------------------------------------------
    def predict_items(self, X: pd.DataFrame, y: Any = None) -> pd.DataFrame:
        """The rows ``judgecal score`` writes for the items of ``X``, indexed by item id.

        Columns: ``dataset`` (null for a frame without one), ``group_id``, ``label`` (from ``y`` when given),
        ``n_votes``, ``score`` (the aggregator's P(A)), ``p`` (calibrated P(A)), ``verdict`` (A iff p > 1/2),
        ``in_calibration`` and one ``set_alpha_<a>`` per conformal level (the verdicts the set holds, A first).
        An item without a vote from a model judge has null ``score``, ``p``, ``verdict`` and sets.

        Raises
        ------
        InputError
            A frame the codec refuses, or one holding fewer than ``min_judge_coverage`` of the model's judges.
        """
        from judgecal_dist.scoring.kernel import score_batch

        check_is_fitted(self, "model_")
        where = "CalibratedAggregator: X"
        rows = _encode(X, self.judge_ids_, self.sample, where)
        self._check_judges(rows.judges_seen, where)
        keys = {k: rows.keys[k].combine_chunks() for k in ("dataset", "item_id", "group_id")}
        labels = np.full(rows.n_items, MISSING_CODE, dtype=np.int8)
        if y is not None:
            labels = _item_labels(X, y, keys["item_id"], "CalibratedAggregator.predict_items")[0]
        batch = score_batch(self.model_, keys, rows.dense(len(self.judge_ids_)), labels)
        return batch.to_pandas().set_index("item_id")

    def _check_judges(self, seen: list[str], where: str) -> None:
        """The CLI's judge rules (:mod:`judgecal_dist.scoring.checks`): unknown judges named, coverage floor."""
        known = [*self.judge_ids_, *self.model_.ignored_judges]
        unknown = check_judges(seen, known, where=where, unknown="ignore")
        if unknown:
            warnings.warn(
                f"{where}: judge_id: {len(unknown)} judge(s) not in the model (e.g. {unknown[:3]}): their verdicts "
                "are left out",
                UserWarning,
                stacklevel=3,
            )
        check_coverage(
            seen,
            self.judge_ids_,
            where=where,
            floor=self.min_judge_coverage,
            what=f"sample={self.sample}",
            override="min_judge_coverage=0",
        )

    def _p(self, X: pd.DataFrame) -> npt.NDArray[np.float64]:
        rows = self.predict_items(X)
        if _long_names(X) is None:
            rows = rows.reindex(X.index.astype(str))
        unscored = rows.index[rows["p"].isna()]
        if len(unscored):
            raise InputError(
                f"CalibratedAggregator: X: {len(unscored)} item(s) without a vote from any model judge (e.g. "
                f"{unscored[:3].tolist()}) have no probability; drop them, or read their rows from predict_items"
            )
        return rows["p"].to_numpy(np.float64)

    def _positive(self) -> npt.NDArray[np.bool_]:
        """Which entries of ``classes_`` are A (the positive class)."""
        return _label_codes(pd.Series(self.classes_, dtype=object), "classes_") == VOTE_A

    def predict_proba(self, X: pd.DataFrame) -> npt.NDArray[np.float64]:
        """Calibrated class probabilities, shape (n_items, 2), columns in ``classes_`` order.

        Rows follow ``X``'s rows (wide) or its items in first-seen order (long)."""
        check_is_fitted(self, "model_")
        p = self._p(X)
        return np.where(self._positive()[None, :], p[:, None], 1.0 - p[:, None])

    def predict(self, X: pd.DataFrame) -> npt.NDArray[Any]:
        """The class of each item: the A class iff calibrated P(A) > 1/2 (the ``verdict`` rule)."""
        check_is_fitted(self, "model_")
        positive = self._positive()
        return np.where(self._p(X) > 0.5, self.classes_[positive][0], self.classes_[~positive][0])

    @property
    def weights_(self) -> pd.Series:
        """The aggregator's per-judge weights by judge name (log-odds weights; absent for majority and DS)."""
        check_is_fitted(self, "model_")
        weights = getattr(self.aggregator_, "weights_", getattr(self.aggregator_, "coef_", None))
        if weights is None:
            raise AttributeError(f"{self.aggregator!r} has no per-judge weights")
        return pd.Series(np.asarray(weights, dtype=np.float64), index=pd.Index(self.judge_ids_, name="judge_id"))

    # -- model files -------------------------------------------------------------------------------------------
    def save(self, url: str, *, storage_options: dict[str, Any] | None = None, overwrite: bool = False) -> str:
        """Write the model JSON (``judgecal.binary-pipeline/v1``) that ``judgecal score --model`` applies."""
        from judgecal_dist.models import save_model

        check_is_fitted(self, "model_")
        return str(save_model(self.model_, url, storage_options=storage_options, overwrite=overwrite))

    @classmethod
    def load(cls, url: str, *, storage_options: dict[str, Any] | None = None) -> CalibratedAggregator:
        """A fitted estimator from a binary-pipeline model: a run folder, or a ``.json`` URL."""
        from judgecal_dist.models import load_model

        return cls.from_model(load_model(url, storage_options=storage_options))

    @classmethod
    def from_model(cls, model: Any) -> CalibratedAggregator:
        """A fitted estimator wrapping a loaded :class:`~judgecal_dist.models.BinaryPipeline`."""
        if getattr(model, "kind", None) != "binary-pipeline":
            raise InputError(
                f"{getattr(model, 'source', 'model')}: a {getattr(model, 'kind', type(model).__name__)} model; "
                "CalibratedAggregator reads binary-pipeline models"
            )
        est = cls(
            aggregator=model.aggregator_name,
            calibrator=model.calibrator_name,
            conformal_alphas=tuple(model.alphas),
            calibrator_input=model.calibrator_input,
            eps=model.eps,
        )
        est.judge_ids_, est.aggregator_, est.calibrator_ = list(model.judge_ids), model.aggregator, model.calibrator
        est.conformal_, est.model_, est.classes_ = list(model.conformal), model, _VERDICT_CLASSES.copy()
        return est
