r"""Continuous correctors as models: a judge's score -> the human scale (spec 001), one kind per method.

``judgecal.linear-corrector/v1``  the hierarchical-Bayes linear corrector's posterior summary per rubric
                                  (:class:`~judgecal_dist.methods.continuous.hb_linear.HierarchicalLinear` or the
                                  exact conjugate posterior of
                                  :class:`~judgecal_dist.methods.continuous.linear_conjugate.ConjugateLinear`)
``judgecal.ot-corrector/v1``      the marginal optimal-transport map per rubric
                                  (:class:`~judgecal_dist.methods.continuous.score_transport.MarginalOT`, as arrays)
``judgecal.flow-corrector/v1``    a trained score flow
                                  (:class:`~judgecal_dist.methods.continuous.score_flow.ScoreFlow`): architecture in
                                  the JSON, weights in a ``.safetensors`` file beside it (``.npz`` where the
                                  ``safetensors`` package is absent), named in the document with its SHA-256
``judgecal.flow-per-rubric/v1``   one plain flow per rubric, each fitted on its rubric's anchors alone (one
                                  weights file per flow)

Each model is rebuilt from its document into the very estimator code that was evaluated, so ``predict`` gives
the estimator's floats: the linear map :math:`\hat\alpha_r + \hat\beta_r j`, ``MarginalOT.predict`` with the
fitted knots, the flow's :class:`~judgecal_dist.methods.continuous.score_flow.FlowStack` with the loaded weights.
:meth:`Corrector.correct` is what ``judgecal score`` calls on raw scores: it maps ``input_range`` onto
``score_range`` first (the study's affine rescale of RewardBench 2's 1-10 onto 1-5).

The flow's MC dropout is made per item: each of the ``n_passes`` passes is one sampled network (one set of dropout
masks per drift evaluation, shared by every item of the pass), so an item's MC mean and s.d. depend on its score
and rubric only, never on which other items share its batch; scoring in memory and on Spark therefore agree. The
estimator's own ``predict_mc`` draws masks per item instead (the same expectation, other MC noise);
``n_passes = 0`` is the deterministic map, equal to ``ScoreFlow(n_passes=0).predict``.
"""

from __future__ import annotations

import functools
import hashlib
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from scipy.special import ndtri

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.continuous.score_transport import MarginalOT
from judgecal_dist.models.documents import (
    FlowArchitectureDoc,
    FlowCorrectorDoc,
    FlowPerRubricDoc,
    LinearCorrectorDoc,
    TransportCorrectorDoc,
    WeightsFileDoc,
)

__all__ = [
    "LINEAR_FORMAT",
    "OT_FORMAT",
    "FLOW_FORMAT",
    "FLOW_RUBRIC_FORMAT",
    "FORMATS",
    "Corrector",
    "LinearCorrector",
    "TransportCorrector",
    "FlowCorrector",
    "FlowPerRubricCorrector",
    "linear_from_moments",
    "linear_from_hb",
    "linear_from_conjugate",
    "ot_from_estimators",
    "flow_from_estimator",
    "flows_per_rubric_from_estimators",
    "linear_from_document",
    "ot_from_document",
    "flow_from_document",
    "flows_per_rubric_from_document",
]

LINEAR_FORMAT = "judgecal.linear-corrector/v1"
OT_FORMAT = "judgecal.ot-corrector/v1"
FLOW_FORMAT = "judgecal.flow-corrector/v1"
FLOW_RUBRIC_FORMAT = "judgecal.flow-per-rubric/v1"
FORMATS = (LINEAR_FORMAT, OT_FORMAT, FLOW_FORMAT, FLOW_RUBRIC_FORMAT)
Array = npt.NDArray[np.float64]
#: Distinct (score, rubric) pairs solved per flow call (bounds the (passes x pairs x hidden) activations).
_FLOW_CHUNK = 2048
#: The flow's weight tensors, in the order of :class:`~judgecal_dist.methods.continuous.score_flow.StackedDrift`.
_TENSORS = ("w1", "b1", "w2", "b2", "w3", "b3", "emb")


@dataclass(frozen=True)
class Corrector:
    """What every continuous corrector model shares: whose scores, which rubrics, which scales, provenance.

    Attributes
    ----------
    judge_id : str
        The judge whose scores the model corrects (``score`` reads this judge's verdict rows).
    rubrics : list of str
        The rubrics it was fitted for; a score of another rubric is refused.
    input_range, score_range : (float, float)
        The data's score scale, mapped affinely onto the corrector's scale before correcting.
    document : dict
        The exported document; ``files`` the files beside it (the flow's weights).
    """

    judge_id: str
    rubrics: list[str]
    input_range: tuple[float, float]
    score_range: tuple[float, float]
    source: str = ""
    digest: str = ""
    fitted_dataset: str | None = None
    fitted_items: tuple[str, ...] | None = None
    document: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    files: dict[str, bytes] = field(default_factory=dict, compare=False, repr=False)

    kind = "corrector"
    family = "continuous"

    @property
    def name(self) -> str:
        return str(self.document.get("name") or f"{self.kind} for {self.judge_id}")

    @functools.cached_property
    def fitted_item_set(self) -> pa.Array | None:
        """``fitted_items`` as an Arrow value set (for ``pyarrow.compute.is_in``)."""
        return None if self.fitted_items is None else pa.array(self.fitted_items, pa.string())

    def rubric_codes(self, rubric: npt.ArrayLike | None, size: int) -> npt.NDArray[np.int64]:
        """Index of each item's rubric in ``rubrics``; a missing rubric is the model's only one, if it has one.

        Raises
        ------
        InputError
            A rubric the model was not fitted for, or a missing rubric with a model of several rubrics.
        """
        labels = np.full(size, None, dtype=object) if rubric is None else np.asarray(rubric, dtype=object).ravel()
        missing = np.array([r is None or r != r for r in labels], dtype=bool)  # None or NaN
        if missing.any():
            if len(self.rubrics) != 1:
                raise InputError(
                    f"{self.source or 'model'}: rubric: {int(missing.sum())} score(s) without a rubric for a model of "
                    f"{len(self.rubrics)} rubrics {self.rubrics[:3]}; give every verdict row its rubric"
                )
            labels = np.where(missing, self.rubrics[0], labels)
        lookup = {r: i for i, r in enumerate(self.rubrics)}
        unknown = sorted({str(r) for r in labels.tolist() if r not in lookup})
        if unknown:
            raise InputError(
                f"{self.source or 'model'}: rubric: {len(unknown)} rubric(s) the model was not fitted for "
                f"(e.g. {unknown[:3]}; fitted: {self.rubrics[:5]}); fit a corrector with anchors of those rubrics, "
                "or score a table without them"
            )
        return np.fromiter((lookup[r] for r in labels.tolist()), dtype=np.int64, count=labels.size)

    def to_scale(self, score: npt.ArrayLike) -> Array:
        """Raw scores on ``input_range`` mapped affinely onto ``score_range``."""
        (lo, hi), (a, b) = self.input_range, self.score_range
        s = np.asarray(score, dtype=np.float64)
        if (lo, hi) == (a, b):
            return s
        return a + (b - a) * (s - lo) / (hi - lo)

    def predict(self, j: npt.ArrayLike, rubric: npt.ArrayLike | None = None) -> Array:
        """The corrected score of judge scores ``j`` already on ``score_range`` (the estimator's ``predict``)."""
        return self._predict(np.asarray(j, dtype=np.float64).ravel(), rubric)["corrected"]

    def correct(self, score: npt.ArrayLike, rubric: npt.ArrayLike | None = None) -> dict[str, Array]:
        """``corrected``, ``sd``, ``lower``, ``upper`` (NaN where the kind has none) of raw scores on
        ``input_range`` (what ``judgecal score`` calls)."""
        return self._predict(self.to_scale(np.asarray(score, dtype=np.float64).ravel()), rubric)

    def _predict(self, j: Array, rubric: npt.ArrayLike | None) -> dict[str, Array]:
        raise NotImplementedError


def _nan(n: int) -> Array:
    return np.full(n, np.nan)


@dataclass(frozen=True)
class LinearCorrector(Corrector):
    r""":math:`\hat y = \hat\alpha_r + \hat\beta_r j`, with the s.d. of the posterior predictive,
    :math:`\sqrt{[1, j]\,\Sigma_r [1, j]^\top + E[\sigma_r^2]}`, and the normal interval of ``interval_level``."""

    alpha: Array = field(default_factory=lambda: np.zeros(0))
    beta: Array = field(default_factory=lambda: np.zeros(0))
    cov: Array = field(default_factory=lambda: np.zeros((0, 2, 2)))
    sigma2: Array = field(default_factory=lambda: np.zeros(0))
    interval_level: float = 0.9

    kind = "linear-corrector"

    def _predict(self, j: Array, rubric: npt.ArrayLike | None) -> dict[str, Array]:
        r = self.rubric_codes(rubric, j.size)
        corrected = self.alpha[r] + self.beta[r] * j  # HierarchicalLinear.predict's expression, term for term
        c = self.cov[r]
        sd = np.sqrt(np.maximum(c[:, 0, 0] + 2 * j * c[:, 0, 1] + j * j * c[:, 1, 1] + self.sigma2[r], 0.0))
        z = float(ndtri(0.5 + self.interval_level / 2))
        return {"corrected": corrected, "sd": sd, "lower": corrected - z * sd, "upper": corrected + z * sd}


@dataclass(frozen=True)
class TransportCorrector(Corrector):
    """Each rubric's :class:`MarginalOT` rebuilt from its knots, levels and sorted references."""

    maps: list[MarginalOT] = field(default_factory=list)

    kind = "ot-corrector"

    def _predict(self, j: Array, rubric: npt.ArrayLike | None) -> dict[str, Array]:
        r = self.rubric_codes(rubric, j.size)
        out = np.empty(j.size)
        for code in np.unique(r):
            sel = r == code
            out[sel] = self.maps[int(code)].predict(j[sel])
        return {"corrected": out, "sd": _nan(j.size), "lower": _nan(j.size), "upper": _nan(j.size)}


@dataclass(frozen=True)
class FlowCorrector(Corrector):
    """A trained flow: the drift's weights in a one-member :class:`FlowStack`; MC passes per item (module doc)."""

    stack: Any = None
    n_passes: int = 40
    seed: int = 0

    kind = "flow-corrector"

    def _predict(self, j: Array, rubric: npt.ArrayLike | None) -> dict[str, Array]:
        r = self.rubric_codes(rubric, j.size)
        # An item's result depends on (j, rubric) only, so each distinct pair is solved once.
        pairs, inverse = np.unique(np.stack([j, r.astype(np.float64)]), axis=1, return_inverse=True)
        mean, sd = np.empty(pairs.shape[1]), np.empty(pairs.shape[1])
        for start in range(0, pairs.shape[1], _FLOW_CHUNK):
            part = slice(start, start + _FLOW_CHUNK)
            mean[part], sd[part] = _flow_solve(self, pairs[0, part], pairs[1, part].astype(np.int64))
        mean, sd = mean[inverse.ravel()], sd[inverse.ravel()]
        return {"corrected": mean, "sd": sd, "lower": _nan(j.size), "upper": _nan(j.size)}


@dataclass(frozen=True)
class FlowPerRubricCorrector(Corrector):
    """One single-rubric :class:`FlowCorrector` per rubric: a score goes through its rubric's flow."""

    flows: tuple[FlowCorrector, ...] = ()

    kind = "flow-per-rubric"

    def _predict(self, j: Array, rubric: npt.ArrayLike | None) -> dict[str, Array]:
        r = self.rubric_codes(rubric, j.size)
        out = {key: _nan(j.size) for key in ("corrected", "sd", "lower", "upper")}
        for code in np.unique(r):
            sel = r == code
            for key, values in self.flows[int(code)]._predict(j[sel], None).items():
                out[key][sel] = values
        return out


class _PassMasks:
    """Dropout masks shared by every item of a pass: each draw is (members, passes, 1, H) from the seeded stream,
    repeated over the items, so the masks of a pass never depend on how many items it solves."""

    def __init__(self, stream: Any, n_passes: int) -> None:
        self.stream, self.n_passes = stream, n_passes

    def draw(self, shape: tuple[int, ...]) -> Any:
        m, kn, h = shape
        one = self.stream.draw((m, self.n_passes, 1, h))
        return one.expand(m, self.n_passes, kn // self.n_passes, h).reshape(m, kn, h)

    def for_trajectory(self) -> Any:
        from judgecal_dist.methods.continuous.flow_drift import TrajectoryMasks

        return TrajectoryMasks(self)  # type: ignore[arg-type]  # duck-typed stream: draw(shape)


def _flow_solve(model: FlowCorrector, j: Array, codes: npt.NDArray[np.int64]) -> tuple[Array, Array]:
    import torch

    from judgecal_dist.methods.continuous.flow_drift import DropoutMasks
    from judgecal_dist.methods.continuous.score_flow import solve

    stack = model.stack
    if model.n_passes == 0:
        mean, sd = stack.predict_mc(j, codes, n_passes=0)
        return mean[0], sd[0]
    drift, k, n = stack.drift, model.n_passes, j.size
    with torch.no_grad():
        drift.train()  # dropout on (spec §4.5); there is no other train/eval-dependent layer
        # Pass-major layout (pass 0's items, then pass 1's, ...), as FlowStack.predict_mc lays out its passes.
        x = torch.as_tensor(np.tile(np.asarray(j, dtype=np.float32), k)[None, :])
        rub = torch.as_tensor(np.tile(np.asarray(codes, dtype=np.int64), k)[None, :])
        masks = _PassMasks(DropoutMasks(drift.dropout, model.seed, "cpu", x.dtype), k)
        out = solve(
            drift,
            x,
            rub,
            n_steps=stack.n_steps,
            solver=stack.solver,
            masks=masks,  # type: ignore[arg-type]
            mask_policy=stack.mask_policy,
        )
        out = out.reshape(1, k, n).double()
        return out.mean(1)[0].numpy(), out.std(1, correction=1)[0].numpy()


# -- estimators -> documents --------------------------------------------------------------------------------------
def _common(
    fmt: str,
    judge_id: str,
    input_range: Sequence[float],
    score_range: Sequence[float],
    fitted_on: dict[str, Any] | None,
    name: str,
) -> dict[str, Any]:
    return {
        "format": fmt,
        "name": name,
        "judge_id": str(judge_id),
        "input_range": [float(v) for v in input_range],
        "score_range": [float(v) for v in score_range],
        "fitted_on": dict(fitted_on or {}),
    }


def _linear_doc(
    rubrics: Sequence[str],
    alpha: Array,
    beta: Array,
    sigma: Array,
    cov: Array,
    sigma2: Array,
    n_anchors: Array,
    canary: npt.ArrayLike | None,
) -> list[dict[str, Any]]:
    out = []
    for i, rubric in enumerate(rubrics):
        c = np.asarray(cov[i], dtype=np.float64)
        c = (c + c.T) / 2  # exact symmetry (the sample covariance is symmetric up to rounding)
        out.append(
            {
                "rubric": str(rubric),
                "alpha": float(alpha[i]),
                "beta": float(beta[i]),
                "sigma": float(sigma[i]),
                "cov": c.tolist(),
                "sigma2": float(sigma2[i]),
                "n_anchors": int(n_anchors[i]),
                "canary_prob": None if canary is None else float(np.ravel(canary)[i]),
            }
        )
    return out


def linear_from_moments(
    *,
    rubrics: Sequence[str],
    alpha: npt.ArrayLike,
    beta: npt.ArrayLike,
    sigma: npt.ArrayLike,
    cov: npt.ArrayLike,
    sigma2: npt.ArrayLike,
    n_anchors: npt.ArrayLike,
    canary_prob: npt.ArrayLike | None,
    fit: str,
    judge_id: str,
    input_range: Sequence[float] = (1.0, 5.0),
    score_range: Sequence[float] = (1.0, 5.0),
    interval_level: float = 0.9,
    fitted_on: dict[str, Any] | None = None,
) -> LinearCorrector:
    """The ``judgecal.linear-corrector/v1`` model of per-rubric posterior moments (arrays in ``rubrics`` order;
    ``cov`` of shape (R, 2, 2)): what :func:`linear_from_hb` and :func:`linear_from_conjugate` read off a fit, and
    what a study that kept the moments of its fits exports without refitting."""
    doc = _common(LINEAR_FORMAT, judge_id, input_range, score_range, fitted_on, f"linear_hb for {judge_id}")
    doc |= {
        "fit": fit,
        "rubrics": _linear_doc(
            rubrics,
            np.ravel(alpha),
            np.ravel(beta),
            np.ravel(sigma),
            np.reshape(np.asarray(cov, dtype=np.float64), (-1, 2, 2)),
            np.ravel(sigma2),
            np.ravel(n_anchors),
            canary_prob,
        ),
        "interval_level": float(interval_level),
    }
    return linear_from_document(LinearCorrectorDoc.model_validate(doc), doc)


def linear_from_hb(
    model: Any,
    *,
    judge_id: str,
    input_range: Sequence[float] = (1.0, 5.0),
    interval_level: float = 0.9,
    fitted_on: dict[str, Any] | None = None,
) -> LinearCorrector:
    r"""The summary of a fitted :class:`HierarchicalLinear`: its posterior means (``alpha_``, ``beta_``,
    ``sigma_``), and from its draws the covariance of :math:`(\alpha_r, \beta_r)` and :math:`E[\sigma_r^2]`."""
    cov, sigma2 = model.posterior_moments()
    return linear_from_moments(
        rubrics=model.rubrics_,
        alpha=model.alpha_,
        beta=model.beta_,
        sigma=model.sigma_,
        cov=cov,
        sigma2=sigma2,
        n_anchors=model.n_anchors_,
        canary_prob=model.canary_prob_,
        fit="nuts",
        judge_id=judge_id,
        input_range=input_range,
        score_range=model.score_range,
        interval_level=interval_level,
        fitted_on=fitted_on,
    )


def linear_from_conjugate(
    model: Any,
    *,
    rubrics: Sequence[str],
    n_anchors: Sequence[int],
    judge_id: str,
    input_range: Sequence[float] = (1.0, 5.0),
    score_range: Sequence[float] = (1.0, 5.0),
    interval_level: float = 0.9,
    fitted_on: dict[str, Any] | None = None,
) -> LinearCorrector:
    """The summary of a :class:`ConjugateLinear` fitted on one cell per rubric (stats of shape (R, 6))."""
    mean = np.asarray(model.mean_, dtype=np.float64).reshape(len(rubrics), 2)
    cov, sigma2 = model.posterior_moments()
    return linear_from_moments(
        rubrics=rubrics,
        alpha=mean[:, 0],
        beta=mean[:, 1],
        sigma=model.sigma_mean_,
        cov=cov,
        sigma2=sigma2,
        n_anchors=n_anchors,
        canary_prob=model.canary_prob_,
        fit="conjugate",
        judge_id=judge_id,
        input_range=input_range,
        score_range=score_range,
        interval_level=interval_level,
        fitted_on=fitted_on,
    )


def ot_from_estimators(
    maps: dict[str, MarginalOT],
    *,
    judge_id: str,
    input_range: Sequence[float] = (1.0, 5.0),
    score_range: Sequence[float] = (1.0, 5.0),
    fitted_on: dict[str, Any] | None = None,
) -> TransportCorrector:
    """The document of fitted :class:`MarginalOT` maps, one per rubric (``{rubric: map}``)."""
    doc = _common(OT_FORMAT, judge_id, input_range, score_range, fitted_on, f"ot for {judge_id}")
    doc["rubrics"] = [
        {
            "rubric": str(rubric),
            "knots": np.asarray(m.knots_, dtype=np.float64).tolist(),
            "levels": np.asarray(m.levels_, dtype=np.float64).tolist(),
            "y_sorted": np.asarray(m.y_sorted_, dtype=np.float64).tolist(),
        }
        for rubric, m in maps.items()
    ]
    return ot_from_document(TransportCorrectorDoc.model_validate(doc), doc)


def _weights_bytes(tensors: dict[str, np.ndarray]) -> tuple[bytes, str]:
    """The flow's tensors as safetensors bytes (npz where the package is absent) and the container's name."""
    try:
        from safetensors.numpy import save
    except ImportError:
        buffer = io.BytesIO()
        np.savez(buffer, allow_pickle=False, **tensors)
        return buffer.getvalue(), "npz"
    return save(tensors), "safetensors"


def _flow_entry(model: Any, n_passes: int | None, stem: str) -> tuple[dict[str, Any], str, bytes]:
    """A fitted :class:`ScoreFlow`'s architecture, passes, seed and weights entry, its file name and bytes."""
    drift = model.stack_.drift
    tensors = {k: getattr(drift, k).detach().cpu().numpy().astype(np.float32) for k in _TENSORS}
    blob, container = _weights_bytes(tensors)
    file = f"{stem}.{container}"
    entry = {
        "architecture": {
            "hidden": int(model.hidden),
            "embed_dim": int(model.embed_dim),
            "dropout": float(model.dropout),
            "n_steps": int(model.n_steps),
            "solver": model.solver,
            "mask_policy": model.mask_policy,
        },
        "n_passes": int(model.n_passes if n_passes is None else n_passes),
        "seed": int(model.random_state),
        "weights": {"file": file, "container": container, "sha256": hashlib.sha256(blob).hexdigest()},
        "final_loss": float(model.stack_.loss_history[-1, 0]) if len(model.stack_.loss_history) else None,
    }
    return entry, file, blob


def flow_from_estimator(
    model: Any,
    *,
    judge_id: str,
    input_range: Sequence[float] = (1.0, 5.0),
    n_passes: int | None = None,
    fitted_on: dict[str, Any] | None = None,
    weights_file: str = "flow-weights",
) -> FlowCorrector:
    """The document and weights file of a fitted :class:`ScoreFlow` (``n_passes`` defaults to the estimator's)."""
    entry, file, blob = _flow_entry(model, n_passes, weights_file)
    doc = _common(FLOW_FORMAT, judge_id, input_range, model.score_range, fitted_on, f"flow for {judge_id}")
    doc |= {"rubrics": [str(r) for r in model.rubrics_], **entry}
    return flow_from_document(FlowCorrectorDoc.model_validate(doc), doc, read_file={file: blob}.__getitem__)


def flows_per_rubric_from_estimators(
    flows: Mapping[str, Any],
    *,
    judge_id: str,
    input_range: Sequence[float] = (1.0, 5.0),
    n_passes: int | None = None,
    fitted_on: dict[str, Any] | None = None,
    weights_file: str = "flow-weights",
) -> FlowPerRubricCorrector:
    """The document and weights files (``<weights_file>-<i>``) of one fitted single-rubric :class:`ScoreFlow` per
    rubric (``flows``: rubric -> estimator, all on one ``score_range``)."""
    if not flows:
        raise ValueError("flows_per_rubric_from_estimators: no fitted flow")
    ranges = {tuple(float(v) for v in f.score_range) for f in flows.values()}
    if len(ranges) != 1:
        raise ValueError(f"flows_per_rubric_from_estimators: the flows have different score ranges {sorted(ranges)}")
    entries, files = [], {}
    for i, (rubric, flow) in enumerate(flows.items()):
        entry, file, blob = _flow_entry(flow, n_passes, f"{weights_file}-{i}")
        entries.append({"rubric": str(rubric), **entry})
        files[file] = blob
    name = f"flow per rubric for {judge_id}"
    doc = _common(FLOW_RUBRIC_FORMAT, judge_id, input_range, next(iter(ranges)), fitted_on, name)
    doc |= {"flows": entries}
    return flows_per_rubric_from_document(FlowPerRubricDoc.model_validate(doc), doc, read_file=files.__getitem__)


# -- documents -> models ------------------------------------------------------------------------------------------
def _base(doc: Any, raw: dict[str, Any], source: str, digest: str) -> dict[str, Any]:
    fitted = doc.fitted_on
    items = tuple(fitted.item_ids) if fitted.item_ids is not None and fitted.dataset is not None else None
    return {
        "judge_id": doc.judge_id,
        "input_range": (float(doc.input_range[0]), float(doc.input_range[1])),
        "score_range": (float(doc.score_range[0]), float(doc.score_range[1])),
        "source": source,
        "digest": digest,
        "fitted_dataset": fitted.dataset if items is not None else None,
        "fitted_items": items,
        "document": raw,
    }


def linear_from_document(
    doc: LinearCorrectorDoc, raw: dict[str, Any], *, source: str = "", digest: str = "", **_: Any
) -> LinearCorrector:
    rows = doc.rubrics
    return LinearCorrector(
        rubrics=[r.rubric for r in rows],
        alpha=np.array([r.alpha for r in rows], dtype=np.float64),
        beta=np.array([r.beta for r in rows], dtype=np.float64),
        cov=np.array([r.cov for r in rows], dtype=np.float64),
        sigma2=np.array([r.sigma2 for r in rows], dtype=np.float64),
        interval_level=float(doc.interval_level),
        **_base(doc, raw, source, digest),
    )


def ot_from_document(
    doc: TransportCorrectorDoc, raw: dict[str, Any], *, source: str = "", digest: str = "", **_: Any
) -> TransportCorrector:
    maps = []
    for r in doc.rubrics:
        m = MarginalOT()
        m.knots_, m.levels_ = np.array(r.knots, dtype=np.float64), np.array(r.levels, dtype=np.float64)
        m.y_sorted_ = np.array(r.y_sorted, dtype=np.float64)
        maps.append(m)
    return TransportCorrector(rubrics=[r.rubric for r in doc.rubrics], maps=maps, **_base(doc, raw, source, digest))


def _weights_url(source: str, file: str) -> str:
    folder = source.rsplit("/", 1)[0] if "/" in source else ""
    return f"{folder}/{file}" if folder else file


def _read_weights(
    w: WeightsFileDoc,
    a: FlowArchitectureDoc,
    n_rub: int,
    source: str,
    read_file: Callable[[str], bytes] | None,
) -> tuple[dict[str, Any], bytes]:
    """The weights file ``w`` names (beside the document), checked against its SHA-256 and the shapes of the
    architecture ``a`` with ``n_rub`` rubrics (every flow kind reads its files here)."""
    where = _weights_url(source, w.file) if source else w.file
    if read_file is None:
        raise InputError(f"{where}: a flow model's weights file is read beside its document (load_model reads it)")
    try:
        blob = read_file(w.file)
    except (FileNotFoundError, KeyError) as err:
        raise InputError(
            f"{where}: not found; a flow model's weights file ({w.file}) must sit beside its model.json: copy both "
            "files together, or export the model again"
        ) from err
    digest = hashlib.sha256(blob).hexdigest()
    if digest != w.sha256:
        raise InputError(
            f"{where}: sha256 {digest[:12]}... does not match the document's weights.sha256 {w.sha256[:12]}...: the "
            "weights file was changed or replaced; export the model again from its run"
        )
    try:
        if w.container == "safetensors":
            try:
                from safetensors.numpy import load
            except ImportError as err:
                raise InputError(
                    f"{where}: reading safetensors needs the 'continuous' extra: pip install 'judgecal-dist[continuous]'"
                ) from err
            tensors = load(blob)
        else:
            with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
                tensors = {k: npz[k] for k in npz.files}
    except InputError:
        raise
    except Exception as err:  # a corrupt container whose hash was forged with it
        raise InputError(f"{where}: not a readable {w.container} file ({err}); export the model again") from err
    e = a.embed_dim if n_rub > 1 else 0
    shapes = {
        "w1": (1, 2 + e, a.hidden),
        "b1": (1, a.hidden),
        "w2": (1, a.hidden, a.hidden),
        "b2": (1, a.hidden),
        "w3": (1, a.hidden, 1),
        "b3": (1, 1),
        "emb": (1, max(n_rub, 1), max(e, 1)),
    }
    for key, shape in shapes.items():
        got = tensors.get(key)
        if got is None or tuple(got.shape) != shape:
            found = "absent" if got is None else f"shape {tuple(got.shape)}"
            raise InputError(
                f"{where}: {key}: {found}, expected {shape} for the document's architecture and {n_rub} rubric(s); "
                "the weights and model.json come from different exports: export the model again"
            )
        if got.dtype != np.float32 or not np.all(np.isfinite(got)):
            raise InputError(f"{where}: {key}: expected finite float32 values; export the model again")
    return tensors, blob


def _flow(
    rubrics: list[str],
    a: FlowArchitectureDoc,
    w: WeightsFileDoc,
    n_passes: int,
    seed: int,
    base: dict[str, Any],
    read_file: Callable[[str], bytes] | None,
) -> FlowCorrector:
    """A flow of ``rubrics`` with architecture ``a`` and the checked weights of ``w``."""
    source = base["source"]
    tensors, blob = _read_weights(w, a, len(rubrics), source, read_file)
    try:
        import torch
    except ImportError as err:  # the flows are the kinds that need torch; scoring the others does not
        raise ConfigError(
            f"{source or 'model'}: {base['document'].get('format', FLOW_FORMAT)} needs torch, from the 'continuous' "
            "extra: pip install 'judgecal-dist[continuous]'"
        ) from err

    from judgecal_dist.methods.continuous.score_flow import FlowStack, StackedDrift

    drift = StackedDrift([0], hidden=a.hidden, n_rubrics=len(rubrics), embed_dim=a.embed_dim, dropout=a.dropout)
    with torch.no_grad():
        for key in _TENSORS:
            getattr(drift, key).copy_(torch.from_numpy(np.array(tensors[key])))
    stack = FlowStack(drift, a.n_steps, a.solver, np.zeros((0, 1)), a.mask_policy)
    return FlowCorrector(rubrics=list(rubrics), stack=stack, n_passes=n_passes, seed=seed, files={w.file: blob}, **base)


def flow_from_document(
    doc: FlowCorrectorDoc,
    raw: dict[str, Any],
    *,
    source: str = "",
    digest: str = "",
    read_file: Callable[[str], bytes] | None = None,
    **_: Any,
) -> FlowCorrector:
    base = _base(doc, raw, source, digest)
    return _flow(list(doc.rubrics), doc.architecture, doc.weights, doc.n_passes, doc.seed, base, read_file)


def flows_per_rubric_from_document(
    doc: FlowPerRubricDoc,
    raw: dict[str, Any],
    *,
    source: str = "",
    digest: str = "",
    read_file: Callable[[str], bytes] | None = None,
    **_: Any,
) -> FlowPerRubricCorrector:
    base = _base(doc, raw, source, digest)
    flows = [_flow([f.rubric], f.architecture, f.weights, f.n_passes, f.seed, base, read_file) for f in doc.flows]
    files = {name: blob for flow in flows for name, blob in flow.files.items()}
    return FlowPerRubricCorrector(rubrics=[f.rubric for f in doc.flows], flows=tuple(flows), **base | {"files": files})
