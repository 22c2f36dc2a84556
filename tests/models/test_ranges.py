"""Extreme but finite numbers, per model kind: a value outside its legal range is refused naming the dotted field
(exit 2 from the CLI: tests/probes/test_models.py), a legal but implausible one is applied with a warning naming
it, and a field the scoring needs is never filled in by a default. The documents are fitted ones (the fixtures of
the round-trip tests), so the legal ones also show that a fit's export meets every range."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from judgecal_dist.errors import InputError
from judgecal_dist.methods.continuous.linear_conjugate import ConjugateLinear, sufficient_stats
from judgecal_dist.methods.continuous.score_transport import MarginalOT
from judgecal_dist.models import (
    flow_from_estimator,
    flows_per_rubric_from_estimators,
    linear_from_conjugate,
    model_from_dict,
    ot_from_estimators,
)
from judgecal_dist.models.davidson import davidson_from_estimators
from judgecal_dist.models.documents import _unique
from tests.faults import set_dotted
from tests.models.test_binary import _fit, panel  # noqa: F401 - fixtures used by name
from tests.models.test_continuous import RUBRICS, anchors, flow, per_rubric  # noqa: F401
from tests.models.test_davidson import BUDGET
from tests.models.test_davidson import fitted as davidson_fitted  # noqa: F401
from tests.models.test_escalation import _policy
from tests.models.test_fcps import _model as fcps_model
from tests.models.test_fcps import fitted as fcps_fitted  # noqa: F401
from tests.scoring.support import model_json

Doc = dict[str, Any]


def _set(path: str, value: Any) -> Callable[[Doc], None]:
    """A change of the document: the field at the dotted ``path`` set to ``value`` (``...`` removes it)."""

    def change(doc: Doc) -> None:
        set_dotted(doc, path, value)

    return change


@pytest.fixture(scope="module")
def documents(panel, anchors, flow, per_rubric, davidson_fitted, fcps_fitted) -> dict[str, tuple[Doc, dict]]:  # noqa: F811
    """One fitted document per kind (with the files beside it, for the flows)."""
    V, y = panel
    out: dict[str, tuple[Doc, dict]] = {}
    for agg, cal in (("one_coin", "platt"), ("dawid_skene", "temperature"), ("stacking", "beta")):
        out[f"binary-{agg}"] = (_fit(V, y, agg, cal, _settings())[1].document, {})
    j, y_c, rubric = anchors
    masks = np.stack([rubric == r for r in RUBRICS])
    conj = ConjugateLinear().fit(sufficient_stats(np.where(masks, j, np.nan), np.where(masks, y_c, np.nan)))
    out["linear"] = (linear_from_conjugate(conj, rubrics=RUBRICS, n_anchors=masks.sum(1), judge_id="m").document, {})
    maps = {r: MarginalOT().fit(j[rubric == r], y_c[rubric == r]) for r in RUBRICS}
    out["ot"] = (ot_from_estimators(maps, judge_id="m").document, {})
    for name, model in (
        ("flow", flow_from_estimator(flow, judge_id="m")),
        ("flow-per-rubric", flows_per_rubric_from_estimators(per_rubric, judge_id="m")),
    ):
        out[name] = (model.document, dict(model.files))
    _, _, _, _, ests = davidson_fitted
    out["davidson"] = (davidson_from_estimators(ests[("local_intercept", "accuracy")], n=BUDGET).document, {})
    out["escalation"] = (_policy().document, {})
    _, _, fcps_ests = fcps_fitted
    out["fcps"] = (fcps_model(fcps_ests["logistic"]).document, {})
    return {k: (json.loads(json.dumps(doc)), files) for k, (doc, files) in out.items()}


def _settings():
    from judgecal_dist.methods.pipeline import Settings

    return Settings()


def _load(documents, kind: str, change: Callable[[Doc], None] | None = None) -> Any:
    doc, files = documents[kind]
    doc = copy.deepcopy(doc)
    if change is not None:
        change(doc)
    return model_from_dict(doc, source="model.json", read_file=files.__getitem__)


def test_every_fitted_kind_loads_without_a_warning(documents, implausible_warnings) -> None:
    for kind in documents:
        _load(documents, kind)
    assert implausible_warnings == []


# (kind, field set to an extreme, the message's start after "model.json: ")
REFUSED = [
    ("binary-one_coin", "calibrator.slope", 1e308, "calibrator.slope = 1e+308 is outside [-1000, 1000]; refit"),
    ("binary-one_coin", "aggregator.weights.2", 1e305, "aggregator.weights.2 = 1e+305 is outside [-1000, 1000]"),
    ("binary-one_coin", "aggregator.class_prior", 1e-300, "aggregator.class_prior = 1e-300 is outside [1e-12, "),
    ("binary-one_coin", "eps", 1e-300, "eps = 1e-300 is outside [1e-15, 0.5]"),
    ("binary-one_coin", "eps", ..., "eps: required, and missing"),
    ("binary-one_coin", "conformal", ..., "conformal: required, and missing"),
    ("binary-dawid_skene", "aggregator.class_prior", 1e-300, "aggregator.class_prior = 1e-300 is outside"),
    ("binary-dawid_skene", "aggregator.eps", ..., "aggregator.eps: required, and missing"),
    ("binary-dawid_skene", "calibrator.temperature", 1e-300, "calibrator.temperature = 1e-300 is outside [0.001"),
    ("binary-stacking", "aggregator.coef.0", -1e305, "aggregator.coef.0 = -1e+305 is outside [-1000, 1000]"),
    ("binary-stacking", "calibrator.a", 1e305, "calibrator.a = 1e+305 is outside [0, 1000]"),
    ("linear", "rubrics.0.beta", 1e308, "rubrics.0.beta = 1e+308 is outside [-1000, 1000]"),
    ("linear", "rubrics.1.sigma", 1e300, "rubrics.1.sigma = 1e+300 is outside [0, 1000]"),
    ("ot", "rubrics.0.knots.0", -1e300, "rubrics.0.knots.0 = -1e+300 is outside [-1000000, 1000000]"),
    ("flow", "input_range.1", 1e300, "input_range.1 = 1e+300 is outside"),
    ("flow-per-rubric", "flows.1.n_passes", 20_000, "flows.1.n_passes: input should be less than or equal to 10000"),
    ("davidson", "judges.0.beta", 1e305, "judges.0.beta = 1e+305 is outside [0, 1000]"),
    ("davidson", "judges.1.gamma", -1e305, "judges.1.gamma = -1e+305 is outside [-1000, 1000]"),
    ("escalation", "prices.full.0", 1e305, "prices.full.0 = 1e+305 is outside [0, 1000000]"),
    ("fcps", "family.coef.0", 1e305, "family.coef.0 = 1e+305 is outside [-1000, 1000]"),
    ("fcps", "family.intercept", -1e305, "family.intercept = -1e+305 is outside [-1000, 1000]"),
]


@pytest.mark.parametrize(("kind", "field", "value", "message"), REFUSED, ids=[f"{r[0]}-{r[1]}" for r in REFUSED])
def test_an_extreme_value_or_a_missing_field_is_refused_naming_it(documents, kind, field, value, message) -> None:
    with pytest.raises(InputError) as err:
        _load(documents, kind, _set(field, value))
    assert str(err.value).startswith(f"model.json: {message}"), str(err.value)


# (kind, field set to a legal but implausible value, the warning after "model.json: ")
WARNED = [
    ("binary-one_coin", "calibrator.slope", 250.0, "calibrator.slope = 250 is outside the plausible range [-100, 100]"),
    ("binary-one_coin", "aggregator.class_prior", 1e-6, "aggregator.class_prior = 1e-06 is outside the plausible"),
    ("binary-one_coin", "eps", 0.2, "eps = 0.2 is outside the plausible range [1e-12, 0.05]"),
    ("binary-dawid_skene", "calibrator.temperature", 80.0, "calibrator.temperature = 80 is outside the plausible"),
    ("linear", "rubrics.0.alpha", -400.0, "rubrics.0.alpha = -400 is outside the plausible range [-100, 100]"),
    ("flow", "n_passes", 5000, "n_passes = 5000 is outside the plausible range [0, 1000]"),
    ("davidson", "judges.0.eta0", 300.0, "judges.0.eta0 = 300 is outside the plausible range [-100, 100]"),
    ("escalation", "prices.mini.1", 2000.0, "prices.mini.1 = 2000 is outside the plausible range [0, 1000]"),
    ("fcps", "family.coef.1", 150.0, "family.coef.1 = 150 is outside the plausible range [-100, 100]"),
]


@pytest.mark.parametrize(("kind", "field", "value", "message"), WARNED, ids=[f"{r[0]}-{r[1]}" for r in WARNED])
def test_a_legal_but_implausible_value_is_applied_with_a_warning_naming_it(
    documents, implausible_warnings, kind, field, value, message
) -> None:
    _load(documents, kind, _set(field, value))
    assert len(implausible_warnings) == 1 and implausible_warnings[0].startswith(f"model.json: {message}")
    implausible_warnings.clear()


def test_the_earlier_calibration_file_meets_the_same_ranges(implausible_warnings) -> None:
    """``judgecal.calibration/v2`` is converted, then checked as the pipeline it becomes."""
    for change, message in [
        (_set("aggregator.weights.0", 1e305), "model.json: aggregator.weights.0 = 1e+305 is outside [-1000, 1000]"),
        (_set("aggregator.class_prior", 1e-300), "model.json: aggregator.class_prior = 1e-300 is outside [1e-12, "),
        (_set("calibrator.a", 1e305), "model.json: calibrator.a = 1e+305 is outside [0, 1000]"),
        (_set("conformal", ...), "model.json: missing key 'conformal'"),
        (_set("eps", ...), "model.json: missing key 'eps'"),
    ]:
        doc = model_json()
        change(doc)
        with pytest.raises(InputError) as err:
            model_from_dict(doc, source="model.json")
        assert str(err.value).startswith(message), str(err.value)
    doc = model_json()
    _set("calibrator.c", 120.0)(doc)
    model_from_dict(doc, source="model.json")
    assert implausible_warnings == [
        "model.json: calibrator.c = 120 is outside the plausible range [-100, 100]; "
        "applied as it is (check the fit that wrote it)"
    ]
    implausible_warnings.clear()


def test_repeated_ids_are_found_in_one_pass() -> None:
    """The duplicate check counts once (it was quadratic: a 60k-judge document took a minute to refuse)."""
    ids = [f"j{i}" for i in range(60_000)]
    _unique(ids, "judge_ids")
    with pytest.raises(ValueError, match=r"judge_ids: 2 id\(s\) listed twice \(e.g. \['j1', 'j7'\]\)"):
        _unique([*ids, "j7", "j1", "j7"], "judge_ids")
