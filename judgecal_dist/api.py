"""The notebook API: a calibrated panel of judges as one scikit-learn estimator on long vote tables.

:class:`CalibratedAggregator` takes a long frame of verdicts, ours (``item_id``, ``judge_id``, ``verdict`` in
A/B/tie) or crowd-kit's (``task``, ``worker``, ``label`` in 0/1 or A/B), and labels as a Series indexed by item; it
fits an aggregator (Step 1), a calibrator on the aggregator's log-odds (Steps 2-3) and split-conformal thresholds
(Step 4) exactly as :mod:`judgecal_dist.methods.pipeline` does for the studies, and returns DataFrames indexed by
item that keep the judges' names. :meth:`CalibratedAggregator.save` writes the JSON model ``judgecal score
--model`` applies (:mod:`judgecal_dist.models`); :meth:`CalibratedAggregator.load` reads any binary-pipeline model
a study, ``judgecal fit`` or ``save`` exported. The estimators themselves compose on a dense vote matrix:
``make_pipeline(OneCoin(), BetaCalibration())``. See ``docs/api.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self

import numpy as np
import numpy.typing as npt
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.errors import InputError
from judgecal_dist.io.adapters.long import category, long_columns
from judgecal_dist.io.schema import MISSING_CODE, VOTE_A, VOTE_B
from judgecal_dist.methods.calibration.conformal import SplitConformal
from judgecal_dist.methods.pipeline import AGGREGATORS, CALIBRATORS, Settings, aggregate, calibrator
from judgecal_dist.splits import assign_blocks, group_keys

__all__ = ["CalibratedAggregator", "vote_matrix"]

#: Verdict / label categories (:func:`~judgecal_dist.io.adapters.long.category` reads 1/0 as A/B) and their vote
#: codes (A = class 1, B = class 0, tie = no vote).
_CODES: dict[str | None, int] = {"A": VOTE_A, "B": VOTE_B, "tie": MISSING_CODE}
#: Seed offset of the conformal slice, as the inclusion study's exported model uses it.
CONFORMAL_SEED_OFFSET = 1_000_003


def _code(value: Any) -> int | None:
    return _CODES.get(category(value))


def _codes(values: pd.Series, column: str, where: str) -> npt.NDArray[np.int8]:
    mapping = {v: _code(v) for v in pd.unique(values)}
    unknown = [v for v, c in mapping.items() if c is None]
    if unknown:
        raise InputError(
            f"{where}: {column}: values must be A/B/tie or 0/1 (1 = A, the positive class), got {unknown[:3]!r}; "
            "map other labels to 0/1 first"
        )
    return values.map(mapping).to_numpy(np.int8)


def vote_matrix(
    votes: pd.DataFrame, judges: Sequence[str] | None = None, *, where: str = "votes"
) -> tuple[pd.Index, list[str], npt.NDArray[np.int8]]:
    """Items, judges and the dense int8 vote matrix of a long frame (ours or crowd-kit's).

    ``judges`` fixes the columns (a fitted model's panel); a judge it does not list is ignored, a listed judge with
    no vote is a column of missing votes. Two verdicts of one judge on one item are an error.

    Raises
    ------
    InputError
        Not a DataFrame with either column layout, unknown verdict values, or a repeated (item, judge) pair.
    """
    if not isinstance(votes, pd.DataFrame):
        raise InputError(f"{where}: expected a long DataFrame (item_id, judge_id, verdict), got {type(votes).__name__}")
    ours = long_columns([str(c) for c in votes.columns], "verdicts", source=where)
    theirs = {name: column for column, name in ours.items()}
    if not {"item_id", "judge_id", "verdict"} <= set(theirs):
        raise InputError(
            f"{where}: columns {list(votes.columns)[:6]}: need item_id, judge_id, verdict (or crowd-kit's task, "
            "worker, label)"
        )
    item, judge, verdict = theirs["item_id"], theirs["judge_id"], theirs["verdict"]
    frame = pd.DataFrame(
        {
            "item": votes[item].astype(str),
            "judge": votes[judge].astype(str),
            "code": _codes(votes[verdict], verdict, where),
        }
    )
    repeated = frame.duplicated(["item", "judge"])
    if repeated.any():
        first = frame[repeated].iloc[0]
        raise InputError(
            f"{where}: {item}, {judge}: {int(repeated.sum())} repeated verdicts (e.g. item {first['item']!r}, judge "
            f"{first['judge']!r}); keep one sample per judge and item"
        )
    items = pd.Index(pd.unique(frame["item"]), name="item_id")
    panel = sorted(pd.unique(frame["judge"])) if judges is None else list(judges)
    rows = items.get_indexer(frame["item"])
    cols = pd.Index(panel).get_indexer(frame["judge"])
    known = cols >= 0
    V = np.full((len(items), len(panel)), MISSING_CODE, dtype=np.int8)
    V[rows[known], cols[known]] = frame["code"].to_numpy()[known]
    return items, panel, V


def _labels(y: Any, items: pd.Index, where: str) -> pd.Series:
    if not isinstance(y, pd.Series):
        raise InputError(f"{where}: y: expected a Series of labels indexed by item id, got {type(y).__name__}")
    y = y.copy()
    y.index = y.index.astype(str)
    codes = pd.Series(_codes(y, "y", where), index=y.index)
    if (codes == MISSING_CODE).any():
        raise InputError(f"{where}: y: a label is A/B or 0/1, never a tie")
    return codes.reindex(items).dropna().astype(np.int8)


def _name(step: Any, known: Sequence[str], kind: str) -> str:
    if isinstance(step, str) and step in known:
        return step
    raise InputError(f"CalibratedAggregator: {kind}: {step!r} is not one of {list(known)}")


class CalibratedAggregator(BaseEstimator):
    """A panel's verdicts -> aggregator -> calibrator -> conformal sets, on long frames indexed by item.

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

    Attributes
    ----------
    judge_ids_ : list of str
        The panel, in the order of the model's weights.
    aggregator_, calibrator_ : estimator
        The fitted Step-1 aggregator and calibrator (None for ``none``).
    conformal_ : list of SplitConformal
    model_ : judgecal_dist.models.BinaryPipeline
        The fitted pipeline as the model format holds it (what :meth:`save` writes and ``judgecal score`` applies).
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
    ) -> None:
        self.aggregator = aggregator
        self.calibrator = calibrator
        self.conformal_alphas = conformal_alphas
        self.conformal_fraction = conformal_fraction
        self.calibrator_input = calibrator_input
        self.eps = eps
        self.seed = seed

    def fit(self, X: pd.DataFrame, y: pd.Series) -> Self:
        """Fit on the labelled items of ``X`` (items without a label in ``y`` are not used).

        Raises
        ------
        InputError
            A frame or labels that :func:`vote_matrix` refuses, unknown step names, or fewer than two labelled items
            of each class.
        """
        from judgecal_dist.models import pipeline_from_estimators

        where = "CalibratedAggregator.fit"
        agg_name = _name(self.aggregator, AGGREGATORS, "aggregator")
        cal_name = _name(self.calibrator, CALIBRATORS, "calibrator")
        settings = Settings(eps=self.eps, calibrator_input=self.calibrator_input)
        items, judges, V = vote_matrix(X, where=f"{where}: X")
        labels = _labels(y, items, where)
        if labels.size < 4 or labels.nunique() < 2:
            raise InputError(f"{where}: y: {labels.size} labelled items of X, need >= 4 with both classes")
        rows = items.get_indexer(labels.index)
        v_lab, y_lab = V[rows], labels.to_numpy(np.int8)
        fit = np.ones(len(rows), dtype=bool)
        if self.conformal_alphas:
            blocks = assign_blocks(
                group_keys(labels.index),
                self.seed + CONFORMAL_SEED_OFFSET,
                [1.0 - self.conformal_fraction, self.conformal_fraction],
            )
            fit = blocks == 0
        slice_ = v_lab[~fit] if (~fit).any() else v_lab[:1]  # no conformal slice: its scores are unused
        s_fit, s_slice, agg = aggregate(agg_name, settings, v_lab[fit], y_lab[fit], slice_)
        cal = calibrator(cal_name, settings)
        if cal is not None:
            cal.fit(s_fit, y_lab[fit])
        self.judge_ids_, self.aggregator_, self.calibrator_ = judges, agg, cal
        conformal: list[SplitConformal] = []
        if self.conformal_alphas:
            p_slice = self._calibrated(s_slice, settings)
            conformal = [SplitConformal(alpha=a).fit(p_slice, y_lab[~fit]) for a in self.conformal_alphas]
        self.conformal_ = conformal
        self.model_ = pipeline_from_estimators(
            judge_ids=judges,
            aggregator_name=agg_name,
            aggregator=agg,
            calibrator_name=cal_name,
            calibrator=cal,
            settings=settings,
            conformal=conformal,
            fitted_on={"item_ids": sorted(labels.index), "dataset": "api", "items": int(fit.sum())},
        )
        return self

    def _calibrated(self, s: npt.NDArray[np.float64], settings: Settings) -> npt.NDArray[np.float64]:
        from judgecal_dist.methods.pipeline import apply_calibrator

        return apply_calibrator(self.calibrator_, s, settings)

    def predict(self, X: pd.DataFrame) -> pd.DataFrame:
        """One row per item of ``X``: ``p`` (calibrated P(A)), ``verdict`` (A iff p > 1/2, else B), ``score``
        (the aggregator's P(A)), ``n_votes`` and one ``set_<alpha>`` column per conformal level (a list of the
        verdicts the set holds)."""
        check_is_fitted(self, "model_")
        items, _, V = vote_matrix(X, self.judge_ids_, where="CalibratedAggregator.predict: X")
        out = self.model_.score(V)
        frame = pd.DataFrame(
            {
                "p": out["p"],
                "verdict": np.where(out["p"] > 0.5, "A", "B"),
                "score": out["score"],
                "n_votes": out["n_votes"],
            },
            index=items,
        )
        for alpha, sets in zip(self.model_.alphas, out["sets"], strict=True):
            frame[f"set_{alpha:g}"] = [[v for v, keep in zip(("B", "A"), row, strict=True) if keep] for row in sets]
        return frame

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        """Calibrated ``[P(B), P(A)]`` per item, columns ``B`` and ``A``, indexed by item."""
        p = self.predict(X)["p"]
        return pd.DataFrame({"B": 1.0 - p, "A": p}, index=p.index)

    @property
    def weights_(self) -> pd.Series:
        """The aggregator's per-judge weights by judge name (log-odds weights; absent for majority and DS)."""
        check_is_fitted(self, "model_")
        weights = getattr(self.aggregator_, "weights_", getattr(self.aggregator_, "coef_", None))
        if weights is None:
            raise AttributeError(f"{self.aggregator!r} has no per-judge weights")
        return pd.Series(np.asarray(weights, dtype=np.float64), index=pd.Index(self.judge_ids_, name="judge_id"))

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
        est.conformal_, est.model_ = list(model.conformal), model
        return est
