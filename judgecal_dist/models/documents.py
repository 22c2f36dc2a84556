"""The documents of the model format family: one typed model (and so one JSON Schema) per kind and version.

Every exported model is one JSON document whose ``format`` names its kind and version
(``judgecal.<kind>/v<N>``); large arrays (a flow's weights) sit beside it in a ``.npz`` or ``.safetensors`` file
that the document names with its SHA-256. Never a pickle. A document is checked in full when it is read
(unknown keys, wrong types, non-finite numbers, out-of-range probabilities, lengths that do not match the panel),
and a refusal names the field by its dotted path (:func:`describe`). ``docs/models.md`` prints each schema
(:func:`schemas`), and a test keeps the two equal.
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from judgecal_dist.io.schema import VOTE_CODING
from judgecal_dist.models.bounds import Axis, Bounded, Coef, Eps, Passes, Price, Prior, Scale, Temperature, Variance
from judgecal_dist.settings import CalibratorInput

#: The one-coin + beta calibration of earlier versions, still read (by :mod:`judgecal_dist.models.legacy`).
LEGACY_FORMAT = "judgecal.calibration/v2"

__all__ = [
    "Document",
    "BinaryPipelineDoc",
    "LinearCorrectorDoc",
    "TransportCorrectorDoc",
    "FlowCorrectorDoc",
    "FlowPerRubricDoc",
    "DavidsonDoc",
    "EscalationDoc",
    "FCPSDoc",
    "KINDS",
    "schemas",
]


Finite = Annotated[float, Field(allow_inf_nan=False)]
Prob = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
OpenProb = Annotated[float, Field(gt=0.0, lt=1.0, allow_inf_nan=False)]
NonNeg = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]
JudgeIds = Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]


class Document(BaseModel):
    """Base of every model document: unknown keys refused, strict about numbers (no strings for floats)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


def _unique(ids: list[str], field: str) -> None:
    # One pass (Counter), not ids.count per id: a 60k-judge document is checked in milliseconds, not a minute.
    repeated = sorted(j for j, n in Counter(ids).items() if n > 1)
    if repeated:
        raise ValueError(f"{field}: {len(repeated)} id(s) listed twice (e.g. {repeated[:3]})")


# -- binary panel pipelines ---------------------------------------------------------------------------------------
class Majority(Document):
    """The vote fraction of A (1/2 for an item without a vote)."""

    name: Literal["majority"]


class AccuracyWeightedDoc(Document):
    """Accuracy-weighted vote fraction: per-judge plug-in accuracies as weights."""

    name: Literal["accuracy_weighted"]
    weights: list[Prob]


class LogOddsDoc(Document):
    """A weighted log-odds vote, :math:`\\sigma(\\mathrm{logit}\\,\\pi + \\sum_j z_{ij} w_j)` (log_odds, one_coin)."""

    name: Literal["log_odds", "one_coin"]
    weights: list[Coef]
    class_prior: Prior
    alpha0: Positive = 1.0
    beta0: Positive = 1.0


class DawidSkeneDoc(Document):
    """Two-coin Dawid-Skene: class prior and per-judge confusion rows ``[[P(B|B), P(A|B)], [P(B|A), P(A|A)]]``."""

    name: Literal["dawid_skene"]
    class_prior: Prior
    confusion: list[
        Annotated[list[Annotated[list[Prob], Field(min_length=2, max_length=2)]], Field(min_length=2, max_length=2)]
    ]
    eps: Eps
    semi_supervised: bool = False
    n_iter: Annotated[int, Field(ge=0)] = 0


class StackingDoc(Document):
    """L2 logistic regression on the +-1 votes: ``coef`` per judge and ``intercept``; ``constant`` when the fit
    saw one class (every item then gets that probability)."""

    name: Literal["stacking"]
    coef: list[Coef]
    intercept: Coef
    constant: Prob | None = None
    C: Positive = 1.0


Aggregator = Annotated[
    Majority | AccuracyWeightedDoc | LogOddsDoc | DawidSkeneDoc | StackingDoc, Field(discriminator="name")
]


class NoCalibrator(Document):
    name: Literal["none"]


class PlattDoc(Document):
    """:math:`\\sigma(\\text{slope}\\cdot\\mathrm{logit}\\,s + \\text{intercept})`."""

    name: Literal["platt"]
    slope: Coef
    intercept: Coef


class TemperatureDoc(Document):
    """:math:`\\sigma(\\mathrm{logit}\\,s / T)`."""

    name: Literal["temperature"]
    temperature: Temperature


class BetaDoc(Document):
    """:math:`\\sigma(a \\ln s - b \\ln(1-s) + c)` with :math:`a, b \\ge 0`."""

    name: Literal["beta"]
    a: Scale
    b: Scale
    c: Coef
    penalty: NonNeg = 0.01
    l1_ratio: Prob = 0.5


class IsotonicDoc(Document):
    """The isotonic step map as its breakpoints: linear between them, constant beyond the ends."""

    name: Literal["isotonic"]
    x: Annotated[list[Axis], Field(min_length=1)]
    y: Annotated[list[Prob], Field(min_length=1)]

    @model_validator(mode="after")
    def _monotone(self) -> IsotonicDoc:
        _check_breakpoints(self.x, self.y)
        return self


def _check_breakpoints(x: list[float], y: list[float]) -> None:
    if len(x) != len(y):
        raise ValueError(f"x, y: breakpoints of different lengths ({len(x)} and {len(y)})")
    if any(b < a for v in (x, y) for a, b in zip(v, v[1:], strict=False)):
        raise ValueError("x, y: breakpoints must be non-decreasing")


Calibrator = Annotated[NoCalibrator | PlattDoc | TemperatureDoc | BetaDoc | IsotonicDoc, Field(discriminator="name")]


class ConformalDoc(Document):
    """A split-conformal threshold on :math:`1 - \\hat p_y` (``null`` = infinite: every set holds both)."""

    alpha: OpenProb
    threshold: Prob | None
    rank: Annotated[int, Field(ge=1)]
    n_calibration: Annotated[int, Field(ge=0)]


#: The dataset name earlier notebook versions recorded for "fitted in a notebook, dataset unknown".
_NOTEBOOK_DATASET = "api"


class FittedOn(Document):
    """What the model was fitted on (provenance; ``item_ids`` lets a scorer flag in-sample items)."""

    # item_ids is the fingerprint of the items the model was fitted on, whatever door fitted it (a study, `judgecal
    # fit`, the notebook); dataset narrows it to one dataset when the fit knew its name, None when it did not (a
    # notebook frame without a dataset column). Every scorer reads the two through calibration_items().
    dataset: str | None = None
    item_ids: list[str] | None = None
    items: Annotated[int, Field(ge=0)] | None = None
    labelled_items: Annotated[int, Field(ge=0)] | None = None
    conformal_items: Annotated[int, Field(ge=0)] | None = None
    orientation: Literal["natural", "randomized"] = "natural"
    sample: Annotated[int, Field(ge=0)] = 0
    study: str | None = None
    run: str | None = None

    def calibration_items(self) -> tuple[str | None, tuple[str, ...] | None]:
        """``(dataset or None, item ids)`` the model was fitted on; ``(None, None)`` when not recorded.

        An item is in-sample when its id is listed and, if a dataset is named here, it belongs to that dataset.
        Documents saved by earlier notebook versions name the dataset ``"api"``, meaning none.
        """
        if self.item_ids is None:
            return None, None
        dataset = None if self.dataset == _NOTEBOOK_DATASET else self.dataset
        return dataset, tuple(self.item_ids)


VoteCodes = dict[str, int | str]


class BinaryPipelineDoc(Document):
    """``judgecal.binary-pipeline/v1``: a panel's verdicts -> aggregator -> calibrator -> conformal sets."""

    format: Literal["judgecal.binary-pipeline/v1"]
    name: str = ""
    panel: str = "all"
    judge_ids: JudgeIds
    ignored_judges: list[str] = []
    aggregator: Aggregator
    calibrator: Calibrator
    calibrator_input: CalibratorInput = "logit"
    eps: Eps
    conformal: list[ConformalDoc]
    vote_codes: VoteCodes = dict(VOTE_CODING)
    fitted_on: FittedOn = FittedOn()

    @model_validator(mode="after")
    def _consistent(self) -> BinaryPipelineDoc:
        _unique(self.judge_ids, "judge_ids")
        n = len(self.judge_ids)
        agg = self.aggregator
        sizes = {
            "weights": len(getattr(agg, "weights", [None] * n)),
            "confusion": len(getattr(agg, "confusion", [None] * n)),
            "coef": len(getattr(agg, "coef", [None] * n)),
        }
        for key, size in sizes.items():
            if size != n:
                raise ValueError(f"aggregator.{key}: {size} entries for {n} judges (one per judge)")
        overlap = sorted(set(self.ignored_judges) & set(self.judge_ids))
        if overlap:
            raise ValueError(f"ignored_judges: {overlap[:3]} are also panel judges")
        if self.vote_codes != VOTE_CODING:
            raise ValueError(f"vote_codes: expected {VOTE_CODING}, got {self.vote_codes}")
        if self.eps >= 0.5:
            raise ValueError("eps: must be < 0.5")
        return self


# -- continuous correctors (a judge's 1-5 score -> the human scale) ------------------------------------------------
Range = Annotated[list[Axis], Field(min_length=2, max_length=2)]
RubricName = Annotated[str, Field(min_length=1)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class CorrectorDoc(Document):
    """What every continuous corrector declares: whose scores it corrects, on which scale, and for which rubrics.

    A score ``s`` of ``judge_id`` in ``input_range`` is mapped affinely onto ``score_range`` (the corrector's
    scale, 1-5) before it is corrected; the corrected score is on ``score_range`` (not clipped)."""

    name: str = ""
    judge_id: Annotated[str, Field(min_length=1)]
    input_range: Range = [1.0, 5.0]
    score_range: Range = [1.0, 5.0]
    fitted_on: FittedOn = FittedOn()

    def _check_ranges(self) -> None:
        for key in ("input_range", "score_range"):
            low, high = getattr(self, key)
            if not low < high:
                raise ValueError(f"{key}: must be [low, high] with low < high, got {[low, high]}")


class RubricLinearDoc(Document):
    """One rubric's posterior summary: means of :math:`\\alpha_r, \\beta_r, \\sigma_r`, the posterior covariance
    of :math:`(\\alpha_r, \\beta_r)` and :math:`E[\\sigma_r^2]` (the predictive variance at ``j`` is
    :math:`[1, j]\\,\\mathrm{cov}\\,[1, j]^\\top + E[\\sigma_r^2]`)."""

    rubric: RubricName
    alpha: Coef
    beta: Coef
    sigma: Scale
    cov: Annotated[list[Annotated[list[Axis], Field(min_length=2, max_length=2)]], Field(min_length=2, max_length=2)]
    sigma2: Variance
    n_anchors: Annotated[int, Field(ge=0)] = 0
    canary_prob: Prob | None = None

    @model_validator(mode="after")
    def _psd(self) -> RubricLinearDoc:
        (a, b), (c, d) = self.cov
        if a < 0 or d < 0 or abs(b - c) > 1e-9 * max(1.0, abs(b)) or a * d - b * c < -1e-9 * max(1.0, a * d):
            raise ValueError(f"rubrics: cov of {self.rubric!r}: not a symmetric positive semi-definite 2x2 matrix")
        return self


class LinearCorrectorDoc(CorrectorDoc):
    """``judgecal.linear-corrector/v1``: the hierarchical-Bayes linear corrector's posterior summary per rubric,
    :math:`\\hat y = \\hat\\alpha_r + \\hat\\beta_r j` with a normal predictive interval of the posterior predictive's
    mean and variance."""

    format: Literal["judgecal.linear-corrector/v1"]
    fit: Literal["nuts", "conjugate"]
    rubrics: Annotated[list[RubricLinearDoc], Field(min_length=1)]
    interval_level: OpenProb = 0.9

    @model_validator(mode="after")
    def _consistent(self) -> LinearCorrectorDoc:
        self._check_ranges()
        _unique([r.rubric for r in self.rubrics], "rubrics")
        return self


class RubricMapDoc(Document):
    """One rubric's inverse-CDF map: knots (distinct anchor judge scores, increasing), their CDF levels
    (non-decreasing in [0, 1]) and the sorted anchor reference scores whose linear quantile the level reads."""

    rubric: RubricName
    knots: Annotated[list[Axis], Field(min_length=1)]
    levels: Annotated[list[Prob], Field(min_length=1)]
    y_sorted: Annotated[list[Axis], Field(min_length=2)]

    @model_validator(mode="after")
    def _monotone(self) -> RubricMapDoc:
        where = f"rubrics: {self.rubric!r}"
        if len(self.knots) != len(self.levels):
            raise ValueError(f"{where}: knots, levels: different lengths ({len(self.knots)} and {len(self.levels)})")
        if any(b <= a for a, b in zip(self.knots, self.knots[1:], strict=False)):
            raise ValueError(f"{where}: knots: must be strictly increasing")
        for key in ("levels", "y_sorted"):
            v = getattr(self, key)
            if any(b < a for a, b in zip(v, v[1:], strict=False)):
                raise ValueError(f"{where}: {key}: must be non-decreasing")
        return self


class TransportCorrectorDoc(CorrectorDoc):
    """``judgecal.ot-corrector/v1``: the marginal optimal-transport (inverse-CDF) map of each rubric,
    :math:`T(j) = Q_y(F_j(j))`."""

    format: Literal["judgecal.ot-corrector/v1"]
    rubrics: Annotated[list[RubricMapDoc], Field(min_length=1)]

    @model_validator(mode="after")
    def _consistent(self) -> TransportCorrectorDoc:
        self._check_ranges()
        _unique([r.rubric for r in self.rubrics], "rubrics")
        return self


class FlowArchitectureDoc(Document):
    """The drift MLP and its solver: ``hidden`` units, rubric embedding of ``embed_dim`` (used with two or more
    rubrics), dropout ``dropout``, ``n_steps`` fixed RK4 steps on [0, 1]."""

    hidden: Annotated[int, Field(ge=1, le=65_536), Bounded(1, 65_536, plausible=(1, 4_096))]
    embed_dim: Annotated[int, Field(ge=1, le=4_096), Bounded(1, 4_096, plausible=(1, 512))]
    dropout: Annotated[float, Field(ge=0.0, lt=1.0), Bounded(0.0, 1.0, plausible=(0.0, 0.9))]
    n_steps: Annotated[int, Field(ge=1, le=10_000), Bounded(1, 10_000, plausible=(1, 1_000))]
    solver: Literal["rk4", "torchdiffeq"] = "rk4"
    mask_policy: Literal["evaluation", "trajectory"] = "evaluation"


class WeightsFileDoc(Document):
    """The weights file beside the document (same folder): its name, container and SHA-256."""

    file: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
    container: Literal["safetensors", "npz"]
    sha256: Sha256


class FlowCorrectorDoc(CorrectorDoc):
    """``judgecal.flow-corrector/v1``: a trained neural-ODE score flow; the weights sit in ``weights.file``.

    The corrected score is the mean of ``n_passes`` MC-dropout solves (each pass one sampled network for every
    item, seeded by ``seed``), with their s.d.; ``n_passes = 0`` is the deterministic map (dropout off)."""

    format: Literal["judgecal.flow-corrector/v1"]
    rubrics: Annotated[list[RubricName], Field(min_length=1)]
    architecture: FlowArchitectureDoc
    n_passes: Passes = 40
    seed: Annotated[int, Field(ge=0)] = 0
    weights: WeightsFileDoc
    final_loss: NonNeg | None = None

    @model_validator(mode="after")
    def _consistent(self) -> FlowCorrectorDoc:
        self._check_ranges()
        _unique(list(self.rubrics), "rubrics")
        if self.n_passes == 1:
            raise ValueError("n_passes: 0 (deterministic map) or >= 2 (MC mean and s.d.), got 1")
        return self


class RubricFlowDoc(Document):
    """One rubric's own flow (no rubric embedding): its architecture, MC passes, seed and weights file."""

    rubric: RubricName
    architecture: FlowArchitectureDoc
    n_passes: Passes = 40
    seed: Annotated[int, Field(ge=0)] = 0
    weights: WeightsFileDoc
    final_loss: NonNeg | None = None


class FlowPerRubricDoc(CorrectorDoc):
    """``judgecal.flow-per-rubric/v1``: one plain neural-ODE flow per rubric, each fitted on that rubric's anchors
    alone; a score is corrected by its rubric's flow (MC passes as in ``judgecal.flow-corrector/v1``). Every flow's
    weights sit in their own file beside the document."""

    format: Literal["judgecal.flow-per-rubric/v1"]
    flows: Annotated[list[RubricFlowDoc], Field(min_length=1)]

    @model_validator(mode="after")
    def _consistent(self) -> FlowPerRubricDoc:
        self._check_ranges()
        _unique([f.rubric for f in self.flows], "flows: rubric")
        _unique([f.weights.file for f in self.flows], "flows: weights.file")
        for i, f in enumerate(self.flows):
            if f.n_passes == 1:
                raise ValueError(f"flows.{i}.n_passes: 0 (deterministic map) or >= 2 (MC mean and s.d.), got 1")
        return self


# -- Davidson for repeated verdicts with ties ---------------------------------------------------------------------
_TIE_PARAMS = {"global": ("beta", "eta0"), "local": ("beta", "gamma"), "local_intercept": ("beta", "eta0", "gamma")}


class DavidsonJudgeDoc(Document):
    """One judge's fitted parameters: ``beta`` (margin scale, >= 0) and the tie link's ``eta0`` and/or ``gamma``."""

    judge_id: Annotated[str, Field(min_length=1)]
    beta: Scale
    eta0: Coef | None = None
    gamma: Coef | None = None
    items: Annotated[int, Field(ge=0)] = 0


class DavidsonDoc(Document):
    """``judgecal.davidson/v2``: per-judge Davidson models on the counts ``(A, tie, B)`` of samples ``0 .. n-1``,
    with the decision rule (``mae``: median of the label distribution; ``accuracy``: its mode).

    ``votes``: ``verdicts`` counts the data's A/B/tie verdicts; ``score-pairs`` derives them, as the itc study
    does, from an rb2-k8 score dataset's pointwise scores (six response pairs per example, each oriented by a coin
    seeded with ``orientation_seed``), so the model scores the dataset it was exported from."""

    format: Literal["judgecal.davidson/v2"]
    name: str = ""
    method: str = "davidson"
    tie: Literal["global", "local", "local_intercept"]
    decision: Literal["mae", "accuracy"]
    alpha: Positive = 1.0
    kappa: Positive = 1.0
    n: Annotated[int, Field(ge=1, le=100_000)]
    pool_orders: bool = False
    votes: Literal["verdicts", "score-pairs"] = "verdicts"
    orientation_seed: Annotated[int, Field(ge=0)] = 0
    judges: Annotated[list[DavidsonJudgeDoc], Field(min_length=1)]
    fitted_on: FittedOn = FittedOn()

    @model_validator(mode="after")
    def _consistent(self) -> DavidsonDoc:
        _unique([j.judge_id for j in self.judges], "judges")
        if self.pool_orders and self.votes == "score-pairs":
            raise ValueError("pool_orders: pairs derived from pointwise scores show no response first; set it false")
        wanted = _TIE_PARAMS[self.tie]
        for i, judge in enumerate(self.judges):
            for param in ("eta0", "gamma"):
                given = getattr(judge, param) is not None
                if given != (param in wanted):
                    need = "needs" if param in wanted else "takes no"
                    raise ValueError(f"judges.{i}.{param}: tie={self.tie!r} {need} {param} (parameters {list(wanted)})")
        return self


# -- the ensemble study's escalation policy -----------------------------------------------------------------------
class EscalationCollectionDoc(Document):
    """One collection's threshold on the cheap tier's dispersion, with what it gave on the study's data."""

    dataset: Annotated[str, Field(min_length=1)]
    prompt_variant: Annotated[str, Field(min_length=1)]
    theta: Variance
    accuracy: Prob | None = None
    p_escalate: Prob | None = None
    cost: NonNeg | None = None


class EscalationDoc(Document):
    """``judgecal.escalation/v2``: hard variance routing from ``cheap_tier`` to ``full_tier`` per collection, with
    the tiers' prices ($ per million input and output tokens)."""

    format: Literal["judgecal.escalation/v2"]
    name: str = ""
    policy: Literal["hard_variance"] = "hard_variance"
    rule: Literal["auto", "most_accurate", "cheapest"] = "auto"
    cheap_tier: Annotated[str, Field(min_length=1)]
    full_tier: Annotated[str, Field(min_length=1)]
    prices: dict[str, Annotated[list[Price], Field(min_length=2, max_length=2)]]
    score_range: Annotated[list[Axis], Field(min_length=2, max_length=2)] = [1.0, 10.0]
    collections: Annotated[list[EscalationCollectionDoc], Field(min_length=1)]
    fitted_on: FittedOn = FittedOn()

    @model_validator(mode="after")
    def _consistent(self) -> EscalationDoc:
        if self.cheap_tier == self.full_tier:
            raise ValueError(f"full_tier: must differ from cheap_tier ({self.cheap_tier!r})")
        for tier in (self.cheap_tier, self.full_tier):
            if tier not in self.prices:
                raise ValueError(f"prices: no [input, output] price for tier {tier!r}")
        low, high = self.score_range
        if not low < high:
            raise ValueError(f"score_range: must be [low, high] with low < high, got {[low, high]}")
        _unique([f"{c.dataset}/{c.prompt_variant}" for c in self.collections], "collections")
        return self


# -- FCPS: a calibrated map of the joint verdicts of a judge-path prefix ---------------------------------------------
Code = Annotated[int, Field(ge=0, le=255)]


class EncodingDoc(Document):
    """The verdict alphabet: category ``i`` of a column is ``alphabet[i]``; a judge without a (parseable) verdict
    reads as ``missing``; ``scalar[i]`` is category ``i``'s value in the scalar families (pairwise verdicts: A 1,
    B 0, tie and err 1/2; a 1-5 rubric: (score - 1)/4, err 1/2)."""

    alphabet: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=2, max_length=256)]
    missing: Annotated[str, Field(min_length=1)]
    scalar: list[Axis]

    @model_validator(mode="after")
    def _consistent(self) -> EncodingDoc:
        _unique(list(self.alphabet), "encoding.alphabet")
        if self.missing not in self.alphabet:
            raise ValueError(f"encoding.missing: {self.missing!r} is not in the alphabet {self.alphabet}")
        if len(self.scalar) != len(self.alphabet):
            raise ValueError(
                f"encoding.scalar: {len(self.scalar)} values for {len(self.alphabet)} categories (one per category)"
            )
        return self


class CellLevelDoc(Document):
    """The calibration cells of one prefix level ``m``: each occupied pattern of the first ``m`` columns (category
    codes), its row count ``n`` (> 0) and label sum ``s`` (0 <= s <= n)."""

    patterns: list[list[Code]]
    n: list[Positive]
    s: list[NonNeg]


class BreakpointsDoc(Document):
    """An isotonic map as its breakpoints: linear between them, constant beyond the ends."""

    x: Annotated[list[Axis], Field(min_length=1)]
    y: Annotated[list[Prob], Field(min_length=1)]

    @model_validator(mode="after")
    def _monotone(self) -> BreakpointsDoc:
        _check_breakpoints(self.x, self.y)
        return self


class TableFamilyDoc(Document):
    """The joint output table: per occupied pattern :math:`(S_c + \\alpha\\,\\bar y)/(n_c + \\alpha)`; an unseen
    pattern takes ``fallback`` (``global``: ``marginal``; ``lower_prefix``: the longest seen lower prefix;
    ``hierarchical``: the recursive smoothing toward the parent prefix). ``levels[m-1]`` holds prefix level ``m``."""

    name: Literal["table"]
    alpha: NonNeg
    fallback: Literal["global", "lower_prefix", "hierarchical"]
    marginal: Prob
    levels: Annotated[list[CellLevelDoc], Field(min_length=1)]


class MeanIsoDoc(Document):
    """``mean_iso``: isotonic map of the mean scalar value of the prefix verdicts."""

    name: Literal["mean_iso"]
    isotonic: BreakpointsDoc


class OneCoinIsoDoc(Document):
    """``one_coin_iso``: isotonic map of :math:`\\sum_l w_l t_l` (``weights`` per column, :math:`t = 2s - 1`; on a
    1-5 rubric :math:`\\sum_l w_l s_l` with precision weights)."""

    name: Literal["one_coin_iso"]
    weights: list[Coef]
    isotonic: BreakpointsDoc


class RidgeIsoDoc(Document):
    """``ridge_iso`` / ``ridge_pair_iso``: isotonic map of ``intercept + coef . phi`` (:math:`\\phi = t`, or ``t``
    and every product :math:`t_l t_{l'}`, :math:`l < l'`, for the pairwise variant)."""

    name: Literal["ridge_iso", "ridge_pair_iso"]
    coef: list[Coef]
    intercept: Coef
    lam: NonNeg = 1.0
    isotonic: BreakpointsDoc


class LogisticStackDoc(Document):
    """``logistic`` / ``logistic_pair``: :math:`\\sigma(\\text{intercept} + \\text{coef}\\cdot\\phi)`; ``constant``
    when the fit saw one class (every row then gets it)."""

    name: Literal["logistic", "logistic_pair"]
    coef: list[Coef]
    intercept: Coef
    constant: Prob | None = None
    C: Positive = 1.0


ScalarFamily = Annotated[MeanIsoDoc | OneCoinIsoDoc | RidgeIsoDoc | LogisticStackDoc, Field(discriminator="name")]


class ResidualCellsDoc(Document):
    """The calibration cells of the full prefix: each occupied pattern, its row count ``n`` and the sum of its
    rows' residuals ``y - base`` (``residual``)."""

    patterns: list[list[Code]]
    n: list[Positive]
    residual: list[Finite]


class HybridDoc(Document):
    """``hybrid``: the scalar ``base`` plus the count-weighted table residual,
    :math:`\\mathrm{clip}_{[0,1]}(f_s(c) + r_c/(n_c + \\tau))` (:math:`r_c` = ``residual``; 0 for an unseen
    pattern, which gets the base)."""

    name: Literal["hybrid"]
    tau: Positive
    base: ScalarFamily
    cells: ResidualCellsDoc


FCPSFamily = Annotated[
    TableFamilyDoc | MeanIsoDoc | OneCoinIsoDoc | RidgeIsoDoc | LogisticStackDoc | HybridDoc,
    Field(discriminator="name"),
]


def _check_cells(where: str, patterns: list[list[int]], m: int, size: int, *columns: list[float]) -> None:
    if any(len(c) != len(patterns) for c in columns):
        raise ValueError(f"{where}: patterns and their columns have different lengths")
    for c, pattern in enumerate(patterns):
        if len(pattern) != m or max(pattern, default=0) >= size:
            raise ValueError(f"{where}.patterns.{c}: need {m} category codes in 0..{size - 1}, got {pattern}")
    if len({tuple(p) for p in patterns}) != len(patterns):
        raise ValueError(f"{where}.patterns: a pattern is listed twice")


class FCPSDoc(Document):
    """``judgecal.fcps/v1``: the selected FCPS candidate: a prefix of ``k`` judges of an ordered judge ``path`` and
    one family (the joint output table or a scalar stacker) over their joint verdicts, as data."""

    format: Literal["judgecal.fcps/v1"]
    name: str = ""
    path: JudgeIds
    path_rule: str = ""
    k: Annotated[int, Field(ge=1, le=64)]
    ignored_judges: list[str] = []
    sample: Annotated[int, Field(ge=0)] = 0
    encoding: EncodingDoc
    family: FCPSFamily
    fitted_on: FittedOn = FittedOn()

    @model_validator(mode="after")
    def _consistent(self) -> FCPSDoc:
        _unique(self.path, "path")
        k, size = self.k, len(self.encoding.alphabet)
        if k > len(self.path):
            raise ValueError(f"k: a prefix of {k} judges of a path of {len(self.path)}")
        overlap = sorted(set(self.ignored_judges) & set(self.path[:k]))
        if overlap:
            raise ValueError(f"ignored_judges: {overlap[:3]} are also prefix judges")
        fam = self.family
        if isinstance(fam, TableFamilyDoc):
            if len(fam.levels) != k:
                raise ValueError(f"family.levels: {len(fam.levels)} levels for a prefix of {k} judges (one per level)")
            for m, level in enumerate(fam.levels, start=1):
                where = f"family.levels.{m - 1}"
                _check_cells(where, level.patterns, m, size, level.n, level.s)
                bad = [c for c, (n, s) in enumerate(zip(level.n, level.s, strict=True)) if s > n]
                if bad:
                    raise ValueError(f"{where}.s.{bad[0]}: a label sum larger than its count n")
        wanted = {"one_coin_iso": k, "ridge_iso": k, "logistic": k, "ridge_pair_iso": k + k * (k - 1) // 2}
        wanted["logistic_pair"] = wanted["ridge_pair_iso"]
        where = "family"
        if isinstance(fam, HybridDoc):
            _check_cells("family.cells", fam.cells.patterns, k, size, fam.cells.n, fam.cells.residual)
            fam, where = fam.base, "family.base"
        key = "weights" if fam.name == "one_coin_iso" else "coef"
        if fam.name in wanted and len(getattr(fam, key)) != wanted[fam.name]:
            raise ValueError(f"{where}.{key}: {len(getattr(fam, key))} entries for k = {k} (need {wanted[fam.name]})")
        return self


#: Kind name -> (current format string, document model).
KINDS: dict[str, tuple[str, type[Document]]] = {
    "binary-pipeline": ("judgecal.binary-pipeline/v1", BinaryPipelineDoc),
    "linear-corrector": ("judgecal.linear-corrector/v1", LinearCorrectorDoc),
    "ot-corrector": ("judgecal.ot-corrector/v1", TransportCorrectorDoc),
    "flow-corrector": ("judgecal.flow-corrector/v1", FlowCorrectorDoc),
    "flow-per-rubric": ("judgecal.flow-per-rubric/v1", FlowPerRubricDoc),
    "davidson": ("judgecal.davidson/v2", DavidsonDoc),
    "escalation": ("judgecal.escalation/v2", EscalationDoc),
    "fcps": ("judgecal.fcps/v1", FCPSDoc),
}


def schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of every kind's current version (what ``docs/models.md`` prints)."""
    return {fmt: model.model_json_schema() for fmt, model in KINDS.values()}
