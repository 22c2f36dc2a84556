r"""``judgecal.fcps/v1``: the selected FCPS candidate (a judge-path prefix and one family) as data.

An FCPS model reads the verdicts of the first ``k`` judges of an ordered judge ``path`` as category codes of the
document's alphabet (pairwise: ``B`` 0, ``A`` 1, ``tie`` 2, ``err`` 3 for a missing or unparseable verdict) and
maps their joint pattern to P(A) with one family: the joint output table (smoothed cell means with a fallback for
unseen patterns, :class:`~judgecal_dist.methods.fcps.joint_table.JointTableCalibrator`) or a scalar stacker of
:mod:`~judgecal_dist.methods.fcps.scalar_families` (coefficients and isotonic breakpoints).

:func:`from_document` rebuilds the estimator class with the fitted numbers, so scoring runs the code the study
evaluated (:meth:`FCPSModel.predict` equals the estimator's own ``predict``). ``judgecal score`` reads each item's
verdicts of the prefix judges at the model's ``sample`` with the vote codec and applies :meth:`FCPSModel.score_packed`
to them, in this process or in the Spark tasks (:mod:`judgecal_dist.scoring.tables`); both give the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
from sklearn.linear_model import LogisticRegression

from judgecal_dist.engine.votes.codec import binary_codes, block_columns, codes_of, unpack
from judgecal_dist.errors import InputError
from judgecal_dist.io.rubric_codes import ERR, rubric_codes
from judgecal_dist.io.schema import MISSING_CODE, VERDICT_CODES, VOTE_A
from judgecal_dist.methods.fcps.joint_table import (
    SCHEMA_CATEGORIES,
    HybridResidualShrinkage,
    JointTableCalibrator,
    pattern_keys,
)
from judgecal_dist.methods.fcps.scalar_families import (
    SCORE_SCALAR,
    VERDICT_SCALAR,
    LogisticStack,
    MeanIsotonic,
    OneCoinIsotonic,
    RidgeIsotonic,
    isotonic_from_breakpoints,
)
from judgecal_dist.methods.fcps.select import NLL_EPS
from judgecal_dist.models.documents import (
    FCPSDoc,
    HybridDoc,
    LogisticStackDoc,
    MeanIsoDoc,
    OneCoinIsoDoc,
    TableFamilyDoc,
)

__all__ = [
    "FORMAT",
    "KIND",
    "PAIRWISE",
    "RUBRIC",
    "ENCODINGS",
    "FCPSModel",
    "to_document",
    "from_document",
    "fcps_from_estimator",
]

FORMAT = "judgecal.fcps/v1"
KIND = "fcps"
#: The pairwise verdict encoding of the FCPS estimators (engine codes B 0, A 1, tie 2; err 3 = no verdict).
PAIRWISE: dict[str, Any] = {"alphabet": ["B", "A", "tie", "err"], "missing": "err", "scalar": VERDICT_SCALAR.tolist()}
#: The 1-5 rubric encoding (codes 0..4 = scores 1..5, err 5 = no parseable score; s = (score - 1)/4, err 1/2).
RUBRIC: dict[str, Any] = {
    "alphabet": ["1", "2", "3", "4", "5", "err"],
    "missing": "err",
    "scalar": SCORE_SCALAR.tolist(),
}
#: Verdict schema of the estimators -> its encoding in a document.
ENCODINGS: dict[str, dict[str, Any]] = {"pairwise": PAIRWISE, "scalar": RUBRIC}
_LABELS = np.array(["B", "A", "tie"], dtype=object)  # engine code -> label string


@dataclass(frozen=True)
class FCPSModel:
    """A fitted FCPS candidate, ready to score category codes or a verdict table.

    Attributes
    ----------
    path : list of str
        The ordered judge path; the model reads its first ``k`` judges (``judge_ids``).
    k : int
    family_id : str
        ``table`` or a scalar family id (not ``family``: score dispatches continuous correctors on that name).
    estimator : estimator
        The rebuilt fitted estimator (``predict(codes)`` of ``(n, k)`` category codes).
    encoding : dict
        ``alphabet``, ``missing`` and ``scalar`` of the document.
    sample : int
        The verdict sample the model was fitted on (and that ``score`` reads).
    ignored_judges : list of str
        Judges the fit saw but the model does not read (``score`` skips their verdicts without an error).
    """

    path: list[str]
    k: int
    family_id: str
    estimator: Any
    encoding: dict[str, Any]
    sample: int = 0
    ignored_judges: list[str] = field(default_factory=list)
    source: str = ""
    digest: str = ""
    document: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    kind = KIND

    @property
    def judge_ids(self) -> list[str]:
        return list(self.path[: self.k])

    @property
    def name(self) -> str:
        return str(self.document.get("name") or f"{self.family_id} on {self.k} judge(s)")

    @property
    def rubric(self) -> bool:
        """Whether the model reads 1-5 rubric scores (``verdicts.score``) rather than A/B/tie verdicts."""
        return list(self.encoding["alphabet"]) == RUBRIC["alphabet"]

    def predict(self, codes: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """P(A) of each row of category codes ``(n, k)`` (the alphabet's positions, prefix order)."""
        return np.asarray(self.estimator.predict(np.asarray(codes, dtype=np.int64)), dtype=np.float64)

    def codes_of(self, votes: npt.NDArray[np.integer]) -> npt.NDArray[np.int64]:
        """The alphabet's codes of the vote codec's verdict codes (``MISSING_CODE`` -> ``missing``).

        Raises
        ------
        InputError
            The alphabet lacks a verdict category of the table (a model of another verdict schema).
        """
        alphabet = list(self.encoding["alphabet"])
        lacking = [c for c in VERDICT_CODES if c not in alphabet]
        if lacking:
            raise InputError(
                f"{self.source or 'model'}: encoding.alphabet: {alphabet} lacks {lacking}: this model reads another "
                "verdict schema than the table's A/B/tie verdicts"
            )
        lut = np.empty(max(VERDICT_CODES.values()) + 2, dtype=np.int64)  # index = engine code + 1
        lut[MISSING_CODE + 1] = alphabet.index(self.encoding["missing"])
        for name, code in VERDICT_CODES.items():
            lut[code + 1] = alphabet.index(name)
        return lut[np.asarray(votes, dtype=np.int64) + 1]

    def score_codes(
        self, keys: pa.Table | pa.RecordBatch, votes: npt.NDArray[np.integer], labels: npt.NDArray[np.integer]
    ) -> pa.RecordBatch:
        """Scored rows of items (``keys``: ``dataset, item_id, group_id``), their verdict codes ``(n, k)`` from the
        vote codec (ties kept) and label codes: an item without a verdict of a prefix judge gets null ``p``."""
        codes = self.codes_of(votes)
        n_votes = (np.asarray(votes) >= 0).sum(axis=1).astype(np.int64)
        p = self.predict(codes) if len(codes) else np.empty(0)
        none = n_votes == 0
        verdict = np.full(len(p), None, dtype=object)
        verdict[(p > 0.5) & ~none], verdict[(p < 0.5) & ~none] = "A", "B"
        alphabet = np.asarray(self.encoding["alphabet"], dtype=object)
        pattern = [",".join(row) for row in alphabet[codes].tolist()] if len(codes) else []
        label = np.full(len(labels), None, dtype=object)
        known = np.asarray(labels) >= 0
        label[known] = _LABELS[np.asarray(labels)[known]]
        columns: dict[str, Any] = {}
        for name in ("dataset", "item_id", "group_id"):
            column = keys.column(name)
            columns[name] = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        columns |= {
            "label": pa.array(label.tolist(), pa.string()),
            "n_votes": pa.array(n_votes, pa.int64()),
            "pattern": pa.array(pattern, pa.string()),
            "p": pa.array(p, pa.float64(), mask=none),
            "verdict": pa.array(verdict.tolist(), pa.string()),
        }
        if isinstance(self.estimator, JointTableCalibrator):  # where the table fell back (an unseen pattern)
            seen = self.estimator.cell_counts(codes) if len(codes) else np.empty(0)
            columns["cell_n"] = pa.array(seen, pa.float64())
        return pa.RecordBatch.from_pydict(columns)

    # -- score's table interface (judgecal_dist.models.interface.TableModel) -----------------------------------
    @property
    def reads(self) -> str:
        """What score reads for this model (:mod:`judgecal_dist.scoring.tables`): each item's 1-5 rubric scores
        (``rubric_scores``, scored by :meth:`score_rubric`) or its packed A/B/tie verdict codes (``item_votes``,
        scored by :meth:`score_codes`), at :attr:`sample`."""
        return "rubric_scores" if self.rubric else "item_votes"

    @property
    def label_column(self) -> str:
        """The labels column the summary scores against."""
        return "label_score" if self.rubric else "label"

    def rows_schema(self) -> pa.Schema:
        """The schema of :meth:`score_codes`' rows."""
        keys = pa.table({c: pa.array([], pa.string()) for c in ("dataset", "item_id", "group_id")})
        return self.score_codes(keys, np.empty((0, self.k), dtype=np.int8), np.empty(0, dtype=np.int8)).schema

    def score_packed(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Scored rows of a batch of packed item votes (the vote codec's ``dataset, item_id, group_id, label, v0,
        ...``): the batch function both of score's runners apply."""
        votes = unpack([batch.column(c) for c in block_columns(self.k)], self.k, binary=False)
        labels = np.asarray(batch.column("label").to_numpy(zero_copy_only=False), dtype=np.int8)
        return self.score_codes(batch, votes, labels)

    def score_rubric(self, verdicts: pd.DataFrame, labels: pd.DataFrame) -> pa.Table:
        keys = ["dataset", "item_id"]
        items = verdicts.drop_duplicates(keys)[[*keys, "group_id"]].sort_values(keys, kind="stable")
        codes = rubric_codes(verdicts, items, keys, self.judge_ids)
        n_votes = (codes != ERR).sum(axis=1).astype(np.int64)
        p = self.predict(codes) if len(codes) else np.empty(0)
        none = n_votes == 0
        alphabet = np.asarray(self.encoding["alphabet"], dtype=object)
        label = items.merge(labels.dropna(subset=["label_score"]), on=keys, how="left")["label_score"]
        off = np.flatnonzero(label.notna().to_numpy() & ~label.between(1.0, 5.0).to_numpy())
        if len(off):  # the target the summary scores is (score - 1)/4, as the regime map reads it
            raise InputError(
                f"labels: label_score: {len(off)} score(s) outside the 1-5 rubric, e.g. item "
                f"{items['item_id'].iloc[off[0]]!r} = {label.iloc[off[0]]:g}; the rubric model reads a 1-5 score"
            )
        columns: dict[str, Any] = {name: pa.array(items[name].astype(str).tolist(), pa.string()) for name in items}
        columns |= {
            "label_score": pa.array(label.to_numpy(dtype=np.float64), pa.float64(), mask=label.isna().to_numpy()),
            "n_votes": pa.array(n_votes, pa.int64()),
            "pattern": pa.array([",".join(row) for row in alphabet[codes].tolist()], pa.string()),
            "p": pa.array(p, pa.float64(), mask=none),
            "score": pa.array(1.0 + 4.0 * p, pa.float64(), mask=none),  # back on the rubric's 1-5 scale
        }
        if isinstance(self.estimator, JointTableCalibrator):
            columns["cell_n"] = pa.array(self.estimator.cell_counts(codes) if len(codes) else [], pa.float64())
        return pa.table(columns)

    def summaries(self, table: pa.Table) -> dict[str, pd.DataFrame]:
        """Per dataset: items, scored and labelled (A/B) items, accuracy (p = 1/2 counts 1/2), Brier score, NLL
        (p clipped at 1e-3, as the regime map scores it) and, for the table, the share of scored items whose
        pattern the calibration never saw."""
        if self.rubric:
            return {"datasets": _rubric_summary(table)}
        frame = table.select([c for c in ("dataset", "label", "p", "cell_n") if c in table.column_names]).to_pandas()
        label = binary_codes(codes_of(frame["label"]))  # A 1, B 0; tie and null labels are not counted
        y = pd.Series(np.where(label == MISSING_CODE, np.nan, (label == VOTE_A).astype(np.float64)), index=frame.index)
        p = frame["p"]
        use = y.notna() & p.notna()
        clipped = p.clip(NLL_EPS, 1.0 - NLL_EPS)
        metrics = {
            "accuracy": np.where(use, np.where(p == 0.5, 0.5, ((p > 0.5) == (y == 1.0)).astype(float)), np.nan),
            "brier": np.where(use, (p - y) ** 2, np.nan),
            "nll": np.where(use, -(y * np.log(clipped) + (1 - y) * np.log1p(-clipped)), np.nan),
        }
        return {"datasets": _per_dataset(frame, use, metrics, mean_of="p")}


def _per_dataset(frame: pd.DataFrame, use: pd.Series, metrics: dict[str, Any], mean_of: str) -> pd.DataFrame:
    """Per dataset: items, scored (``p`` not null) and labelled items (``use``), the mean of each per-item metric
    (NaN off ``use``), the mean of column ``mean_of`` and, for a table (``cell_n``), the unseen-pattern share."""
    frame = frame.assign(scored=frame["p"].notna(), labelled=use, **metrics)
    aggs = {"n_items": ("scored", "size"), "n_scored": ("scored", "sum"), "n_labelled": ("labelled", "sum")}
    aggs |= {name: (name, "mean") for name in metrics} | {f"mean_{mean_of}": (mean_of, "mean")}
    if "cell_n" in frame:
        frame["unseen"] = np.where(frame["scored"], frame["cell_n"] == 0, np.nan)
        aggs["unseen_rate"] = ("unseen", "mean")
    return frame.groupby("dataset", sort=True).agg(**aggs).reset_index()


def _rubric_summary(table: pa.Table) -> pd.DataFrame:
    """Per dataset of a rubric table: items, scored and labelled items, MSE of p against (label_score - 1)/4 (the
    regime map's target), MAE in rubric points, mean predicted score and the unseen-pattern share (tables)."""
    names = [c for c in ("dataset", "label_score", "p", "score", "cell_n") if c in table.column_names]
    frame = table.select(names).to_pandas()
    use = frame["label_score"].notna() & frame["p"].notna()
    target = (frame["label_score"] - 1.0) / 4.0
    metrics = {
        "mse": np.where(use, (frame["p"] - target) ** 2, np.nan),
        "mae_points": np.where(use, (frame["score"] - frame["label_score"]).abs(), np.nan),
    }
    return _per_dataset(frame, use, metrics, mean_of="score")


# -- estimators <-> document ---------------------------------------------------------------------------------------
def _family_of(est: Any) -> tuple[str, dict[str, Any]]:
    """The family id and document fields of a fitted estimator."""
    if isinstance(est, JointTableCalibrator):
        levels = []
        for m, (keys, n, s) in enumerate(est.levels_, start=1):
            digits = (np.asarray(keys, dtype=np.int64)[:, None] // est.n_categories ** np.arange(m)) % est.n_categories
            levels.append({"patterns": digits.tolist(), "n": [float(v) for v in n], "s": [float(v) for v in s]})
        fields: dict[str, Any] = {"alpha": float(est.alpha), "fallback": est.fallback, "marginal": float(est.marginal_)}
        return "table", fields | {"levels": levels}
    if isinstance(est, HybridResidualShrinkage):
        base, fields = _family_of(est.base_)
        size = est.n_categories
        keys = np.asarray(est.residual_keys_, dtype=np.int64)
        digits = (keys[:, None] // size ** np.arange(est.n_features_in_)) % size
        cells = {
            "patterns": digits.tolist(),
            "n": [float(v) for v in est.residual_n_],
            "residual": [float(v) for v in est.residual_sum_],
        }
        return "hybrid", {"tau": float(est.tau_), "base": {"name": base} | fields, "cells": cells}
    if isinstance(est, LogisticStack):
        name = "logistic_pair" if est.pairwise else "logistic"
        fields = {"C": float(est.C), "constant": est.constant_, "coef": [], "intercept": 0.0}
        if est.constant_ is None:
            fields |= {"coef": [float(v) for v in est.model_.coef_[0]], "intercept": float(est.model_.intercept_[0])}
        else:  # a constant fit has no coefficients; keep their count so the document's shape stays checkable
            k = est.n_features_in_
            fields["coef"] = [0.0] * (k + k * (k - 1) // 2 if est.pairwise else k)
        return name, fields
    iso = {"x": [float(v) for v in est.isotonic_.X_thresholds_], "y": [float(v) for v in est.isotonic_.y_thresholds_]}
    if isinstance(est, MeanIsotonic):
        return "mean_iso", {"isotonic": iso}
    if isinstance(est, OneCoinIsotonic):
        return "one_coin_iso", {"weights": [float(v) for v in est.weights_], "isotonic": iso}
    if isinstance(est, RidgeIsotonic):
        name = "ridge_pair_iso" if est.pairwise else "ridge_iso"
        fields = {"coef": [float(v) for v in est.coef_], "intercept": float(est.intercept_), "lam": float(est.lam)}
        return name, fields | {"isotonic": iso}
    raise TypeError(f"to_document: not an exportable FCPS family estimator: {type(est).__name__}")


def to_document(
    estimator: Any,
    *,
    path: Sequence[str],
    k: int,
    path_rule: str = "",
    ignored_judges: Sequence[str] = (),
    sample: int = 0,
    encoding: dict[str, Any] | None = None,
    name: str = "",
    fitted_on: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``judgecal.fcps/v1`` document of a fitted family estimator reading the first ``k`` judges of ``path``."""
    family, fields = _family_of(estimator)
    if encoding is None:  # the estimator's own verdict schema (a table knows its alphabet's size only)
        sizes = {SCHEMA_CATEGORIES[name]: name for name in ENCODINGS}
        schema = getattr(getattr(estimator, "base_", estimator), "schema", None)
        schema = schema or sizes.get(getattr(estimator, "n_categories", 0), "pairwise")
        encoding = ENCODINGS[schema]
    return {
        "format": FORMAT,
        "name": name or f"{family} on {k} judge(s)" + (f" of the {path_rule} path" if path_rule else ""),
        "path": [str(j) for j in path],
        "path_rule": path_rule,
        "k": int(k),
        "ignored_judges": [str(j) for j in ignored_judges],
        "sample": int(sample),
        "encoding": dict(encoding),
        "family": {"name": family} | fields,
        "fitted_on": dict(fitted_on or {}),
    }


def _rebuild(doc: FCPSDoc, source: str) -> Any:
    fam, k = doc.family, doc.k
    size = len(doc.encoding.alphabet)
    if isinstance(fam, TableFamilyDoc):
        table = JointTableCalibrator(alpha=fam.alpha, fallback=fam.fallback, n_categories=size)
        table.marginal_ = float(fam.marginal)
        levels: list[Any] = []
        for m, level in enumerate(fam.levels, start=1):
            keys = pattern_keys(np.asarray(level.patterns, dtype=np.int64).reshape(-1, m), size)
            order = np.argsort(keys, kind="stable")
            n, s = np.asarray(level.n, dtype=np.float64), np.asarray(level.s, dtype=np.float64)
            levels.append((keys[order], n[order], s[order]))
        table.levels_ = levels
        table.n_features_in_ = k
        return table
    schema = next((name for name, enc in ENCODINGS.items() if doc.encoding.scalar == enc["scalar"]), None)
    if schema is None:
        known = " or ".join(str(enc["scalar"]) for enc in ENCODINGS.values())
        raise InputError(
            f"{source}: encoding.scalar: the scalar families of this version read the pairwise or the 1-5 rubric "
            f"encoding ({known}), got {doc.encoding.scalar}"
        )
    if isinstance(fam, HybridDoc):
        hybrid = HybridResidualShrinkage(base=_scalar(fam.base, k, schema), tau=fam.tau, n_categories=size)
        hybrid.base_, hybrid.tau_ = hybrid.base, float(fam.tau)
        keys = pattern_keys(np.asarray(fam.cells.patterns, dtype=np.int64).reshape(-1, k), size)
        order = np.argsort(keys, kind="stable")
        hybrid.residual_keys_ = keys[order]
        cell_n: Any = np.asarray(fam.cells.n, dtype=np.float64)
        cell_residual: Any = np.asarray(fam.cells.residual, dtype=np.float64)
        hybrid.residual_n_, hybrid.residual_sum_ = cell_n[order], cell_residual[order]
        hybrid.n_features_in_ = k
        return hybrid
    return _scalar(fam, k, schema)


def _scalar(fam: Any, k: int, schema: str) -> Any:
    """The fitted scalar family of a validated family document."""
    if isinstance(fam, LogisticStackDoc):
        stack = LogisticStack(C=fam.C, pairwise=fam.name == "logistic_pair", schema=schema)
        stack.constant_ = fam.constant
        if fam.constant is None:
            model = LogisticRegression(C=fam.C)
            model.coef_ = np.asarray([fam.coef], dtype=np.float64)
            model.intercept_ = np.asarray([fam.intercept], dtype=np.float64)
            model.classes_ = np.array([0.0, 1.0])
            model.n_features_in_ = len(fam.coef)
            stack.model_ = model
        stack.n_features_in_ = k
        return stack
    est: Any
    if isinstance(fam, MeanIsoDoc):
        est = MeanIsotonic(schema=schema)
        est.fitted_ = True
    elif isinstance(fam, OneCoinIsoDoc):
        est = OneCoinIsotonic(schema=schema)
        est.weights_ = np.asarray(fam.weights, dtype=np.float64)
    else:
        est = RidgeIsotonic(lam=fam.lam, pairwise=fam.name == "ridge_pair_iso", schema=schema)
        est.coef_ = np.asarray(fam.coef, dtype=np.float64)
        est.intercept_ = float(fam.intercept)
    est.n_features_in_ = k
    est.isotonic_ = isotonic_from_breakpoints(fam.isotonic.x, fam.isotonic.y)
    return est


def from_document(doc: FCPSDoc, raw: dict[str, Any], *, source: str = "", digest: str = "") -> FCPSModel:
    """Rebuild the fitted family estimator of a validated document.

    Raises
    ------
    InputError
        A scalar family over an encoding other than the pairwise one (the families of this version read it).
    """
    return FCPSModel(
        path=list(doc.path),
        k=doc.k,
        family_id=doc.family.name,
        estimator=_rebuild(doc, source or "model"),
        encoding=doc.encoding.model_dump(),
        sample=doc.sample,
        ignored_judges=list(doc.ignored_judges),
        source=source,
        digest=digest,
        document=raw,
    )


def fcps_from_estimator(estimator: Any, **kwargs: Any) -> FCPSModel:
    """An :class:`FCPSModel` of a fitted family estimator (its ``document`` filled, validated as a reader would);
    keyword arguments as :func:`to_document`."""
    doc = to_document(estimator, **kwargs)
    return from_document(FCPSDoc.model_validate(doc), doc)


if TYPE_CHECKING:  # mypy checks that the kind implements score's table interface
    from judgecal_dist.models.interface import TableModel

    _IMPLEMENTS: type[TableModel] = FCPSModel
