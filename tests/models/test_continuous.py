"""The continuous correctors export as models, reload, and predict as the fitted estimators do; a tampered
document or weights file is refused naming the key or the file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from judgecal_dist.errors import InputError
from judgecal_dist.methods.continuous.hb_linear import HierarchicalLinear
from judgecal_dist.methods.continuous.linear_conjugate import ConjugateLinear, sufficient_stats
from judgecal_dist.methods.continuous.score_transport import MarginalOT
from judgecal_dist.models import (
    flow_from_estimator,
    flows_per_rubric_from_estimators,
    linear_from_conjugate,
    linear_from_hb,
    load_model,
    model_from_dict,
    ot_from_estimators,
    save_model,
)

RUBRICS = ["chat", "math"]


@pytest.fixture(scope="module")
def anchors() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A strict, compressing judge on two rubrics: j in 1..5, y = a + b j + noise."""
    rng = np.random.default_rng(3)
    rubric = np.array(RUBRICS)[rng.integers(0, 2, 80)]
    j = rng.integers(1, 6, 80).astype(float)
    y = np.clip(np.where(rubric == "chat", 0.4 + 0.9 * j, 1.5 + 0.6 * j) + rng.normal(0, 0.3, 80), 1, 5)
    return j, y, rubric


@pytest.fixture(scope="module")
def flow(anchors):
    from judgecal_dist.methods.continuous.score_flow import ScoreFlow

    j, y, rubric = anchors
    return ScoreFlow(epochs=25, hidden=8, embed_dim=2, n_passes=0, random_state=5).fit(j, y, rubric)


def test_conjugate_summary_round_trips_with_the_exact_predictive_moments(anchors, tmp_path) -> None:
    j, y, rubric = anchors
    masks = np.stack([rubric == r for r in RUBRICS])
    conj = ConjugateLinear().fit(sufficient_stats(np.where(masks, j, np.nan), np.where(masks, y, np.nan)))
    model = linear_from_conjugate(conj, rubrics=RUBRICS, n_anchors=masks.sum(1), judge_id="mini")
    loaded = load_model(save_model(model, str(tmp_path / "linear.json")))
    for i, r in enumerate(RUBRICS):
        sel = rubric == r
        np.testing.assert_array_equal(
            loaded.predict(j[sel], [r] * sel.sum()), conj.mean_[i, 0] + conj.mean_[i, 1] * j[sel]
        )
        # The stored covariance and E[sigma^2] give the predictive mixture's s.d. (one cell fitted alone).
        _, sd = ConjugateLinear().fit(sufficient_stats(j[sel], y[sel])).predictive_moments(j[sel])
        np.testing.assert_allclose(loaded.correct(j[sel], [r] * sel.sum())["sd"], sd, rtol=1e-9)
    assert loaded.document["fit"] == "conjugate" and loaded.kind == "linear-corrector"


def test_nuts_summary_keeps_the_posterior_means_and_the_draws_moments(anchors, tmp_path) -> None:
    """The summary of a NUTS fit reads its draws: the mean prediction is the estimator's, the s.d. that of
    alpha + beta j + sigma eps over the draws (the draws are given, so no sampler runs here)."""
    j, _, rubric = anchors
    rng = np.random.default_rng(0)
    hb = HierarchicalLinear()
    hb.rubrics_, hb.n_anchors_ = list(RUBRICS), np.array([40, 40])
    hb.draws_ = {
        "alpha": rng.normal([0.4, 1.5], 0.1, (2, 500, 2)),
        "beta": rng.normal([0.9, 0.6], 0.05, (2, 500, 2)),
        "sigma": np.abs(rng.normal(0.3, 0.02, (2, 500, 2))),
    }
    hb.alpha_, hb.beta_, hb.sigma_ = (hb.draws_[k].mean(axis=(0, 1)) for k in ("alpha", "beta", "sigma"))
    hb.canary_prob_ = np.zeros(2)
    loaded = load_model(save_model(linear_from_hb(hb, judge_id="mini", input_range=(1, 10)), str(tmp_path / "m.json")))
    np.testing.assert_array_equal(loaded.predict(j, rubric), hb.predict(j, rubric))
    code = np.searchsorted(RUBRICS, rubric)
    a, b, s = (hb.draws_[k].reshape(-1, 2)[:, code] for k in ("alpha", "beta", "sigma"))
    want = np.sqrt((a + b * j).var(axis=0) + (s * s).mean(axis=0))
    np.testing.assert_allclose(loaded.predict(j, rubric), (a + b * j).mean(axis=0), rtol=1e-12)
    # raw scores on 1-10 are mapped onto 1-5 first
    np.testing.assert_allclose(loaded.correct(1 + 9 * (j - 1) / 4, rubric)["sd"], want, rtol=1e-9)


def test_ot_maps_round_trip_exactly(anchors, tmp_path) -> None:
    j, y, rubric = anchors
    maps = {r: MarginalOT().fit(j[rubric == r], y[rubric == r]) for r in RUBRICS}
    loaded = load_model(save_model(ot_from_estimators(maps, judge_id="mini"), str(tmp_path / "ot.json")))
    grid = np.linspace(0.5, 5.5, 41)  # between and beyond the knots
    for r in RUBRICS:
        np.testing.assert_array_equal(loaded.predict(grid, [r] * grid.size), maps[r].predict(grid))


def test_flow_round_trips_and_its_mc_passes_do_not_depend_on_the_batch(anchors, flow, tmp_path) -> None:
    j, _, rubric = anchors
    loaded = load_model(save_model(flow_from_estimator(flow, judge_id="mini"), str(tmp_path / "flow.json")))
    assert loaded.document["weights"]["container"] == "safetensors"
    assert (tmp_path / "flow-weights.safetensors").exists()
    np.testing.assert_allclose(loaded.predict(j, rubric), flow.predict(j, rubric), atol=1e-5)  # float32 solves
    mc = load_model(
        save_model(flow_from_estimator(flow, judge_id="mini", n_passes=30), str(tmp_path / "mc" / "model.json"))
    )
    whole, part = mc.correct(j, rubric), mc.correct(j[:9], rubric[:9])
    np.testing.assert_array_equal(whole["corrected"][:9], part["corrected"])
    np.testing.assert_array_equal(whole["sd"][:9], part["sd"])
    # Same expectation as the estimator's per-item MC mean: the two differ by MC noise only.
    theirs = flow.set_params(n_passes=30).predict(j, rubric)
    flow.set_params(n_passes=0)
    noise = 6 * np.maximum(whole["sd"], 1e-3) / np.sqrt(30)
    assert np.all(np.abs(whole["corrected"] - theirs) < noise)


def _saved_flow(flow, tmp_path: Path) -> tuple[Path, dict]:
    url = save_model(flow_from_estimator(flow, judge_id="mini"), str(tmp_path / "model.json"))
    return Path(url), json.loads(Path(url).read_text())


def test_a_tampered_weights_file_is_refused_naming_it(flow, tmp_path) -> None:
    path, doc = _saved_flow(flow, tmp_path)
    weights = tmp_path / doc["weights"]["file"]
    blob = bytearray(weights.read_bytes())
    blob[-3] ^= 0xFF
    weights.write_bytes(bytes(blob))
    with pytest.raises(InputError, match=r"flow-weights\.safetensors: sha256 .* does not match .*export the model"):
        load_model(str(path))
    weights.unlink()
    with pytest.raises(InputError, match=r"flow-weights\.safetensors: not found; .* beside its model\.json"):
        load_model(str(path))


def test_weights_of_another_architecture_are_refused(flow, tmp_path) -> None:
    path, doc = _saved_flow(flow, tmp_path)
    doc["architecture"]["hidden"] = 16  # a hand edit; the hash still matches the file
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"flow-weights\.safetensors: w1: shape \(1, 4, 8\), expected \(1, 4, 16\)"):
        load_model(str(path))


def test_npz_weights_are_read_when_safetensors_is_absent(flow, tmp_path, monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)  # import fails as when not installed
    model = flow_from_estimator(flow, judge_id="mini")
    assert model.document["weights"]["container"] == "npz"
    url = save_model(model, str(tmp_path / "model.json"))
    blob = (tmp_path / "flow-weights.npz").read_bytes()
    assert hashlib.sha256(blob).hexdigest() == model.document["weights"]["sha256"]
    np.testing.assert_array_equal(
        load_model(url).predict([1.0, 3.0], ["chat", "math"]), model.predict([1.0, 3.0], ["chat", "math"])
    )


@pytest.fixture(scope="module")
def per_rubric(anchors):
    """One plain flow per rubric, each on its rubric's anchors (the study's ``flow_per_rubric``)."""
    from judgecal_dist.methods.continuous.score_flow import ScoreFlow

    j, y, rubric = anchors
    return {
        r: ScoreFlow(epochs=15, hidden=8, n_passes=0, random_state=7 + i).fit(
            j[rubric == r], y[rubric == r], rubric[rubric == r]
        )
        for i, r in enumerate(RUBRICS)
    }


def test_flows_per_rubric_round_trip_and_each_score_goes_through_its_rubrics_flow(anchors, per_rubric, tmp_path):
    j, _, rubric = anchors
    model = flows_per_rubric_from_estimators(per_rubric, judge_id="mini")
    loaded = load_model(save_model(model, str(tmp_path / "model.json")))
    files = [f["weights"]["file"] for f in loaded.document["flows"]]
    assert files == ["flow-weights-0.safetensors", "flow-weights-1.safetensors"]
    assert all((tmp_path / f).exists() for f in files) and loaded.rubrics == RUBRICS
    got = loaded.predict(j, rubric)
    for r, est in per_rubric.items():  # the deterministic map of each rubric's own flow, float32 solves
        np.testing.assert_allclose(got[rubric == r], est.predict(j[rubric == r], rubric[rubric == r]), atol=1e-5)
    # MC passes: the masks are per pass, never dependent on the batch (so in memory and on Spark agree to the
    # float32 rounding of solves of other batch shapes)
    mc = load_model(
        save_model(flows_per_rubric_from_estimators(per_rubric, judge_id="mini", n_passes=12), str(tmp_path / "mc"))
    )
    whole, part = mc.correct(j, rubric), mc.correct(j[:9], rubric[:9])
    np.testing.assert_allclose(whole["corrected"][:9], part["corrected"], rtol=0, atol=1e-6)
    assert np.all(np.abs(whole["corrected"] - got) <= 6 * np.maximum(whole["sd"], 1e-3))


def test_a_tampered_per_rubric_weights_file_or_document_is_refused_naming_it(per_rubric, tmp_path):
    url = save_model(flows_per_rubric_from_estimators(per_rubric, judge_id="mini"), str(tmp_path / "model.json"))
    doc = json.loads(Path(url).read_text())
    weights = tmp_path / "flow-weights-1.safetensors"
    blob = bytearray(weights.read_bytes())
    blob[-3] ^= 0xFF
    weights.write_bytes(bytes(blob))
    with pytest.raises(InputError, match=r"flow-weights-1\.safetensors: sha256 .* does not match"):
        load_model(url)
    doc["flows"][1]["rubric"] = "chat"
    with pytest.raises(InputError, match=r"^m\.json: flows: rubric: 1 id\(s\) listed twice \(e\.g\. \['chat'\]\)"):
        model_from_dict(doc, source="m.json")
    doc["flows"][1] |= {"rubric": "math", "n_passes": 1}
    with pytest.raises(InputError, match=r"^m\.json: flows\.1\.n_passes: 0 \(deterministic map\) or >= 2"):
        model_from_dict(doc, source="m.json")


_OT = {
    "format": "judgecal.ot-corrector/v1",
    "judge_id": "mini",
    "rubrics": [{"rubric": "chat", "knots": [1.0, 3.0], "levels": [0.0, 1.0], "y_sorted": [1.0, 4.0]}],
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"knots": [3.0, 1.0]}, r"rubrics\.0: .*knots: must be strictly increasing|rubrics: 'chat': knots"),
        ({"levels": [0.0, 1.5]}, r"rubrics\.0\.levels\.1: input should be less than or equal to 1"),
        ({"y_sorted": [4.0, 1.0]}, r"rubrics: 'chat': y_sorted: must be non-decreasing"),
    ],
)
def test_a_malformed_ot_map_is_refused_naming_the_key(change, message) -> None:
    doc = json.loads(json.dumps(_OT))
    doc["rubrics"][0] |= change
    with pytest.raises(InputError, match=message):
        model_from_dict(doc, source="model.json")


def test_a_linear_summary_with_a_bad_covariance_or_range_is_refused() -> None:
    row = {"rubric": "chat", "alpha": 0.1, "beta": 0.9, "sigma": 0.3, "cov": [[1.0, 2.0], [2.0, 1.0]], "sigma2": 0.1}
    doc = {"format": "judgecal.linear-corrector/v1", "judge_id": "mini", "fit": "conjugate", "rubrics": [row]}
    with pytest.raises(InputError, match=r"model\.json: rubrics: cov of 'chat': not a symmetric positive semi-def"):
        model_from_dict(doc, source="model.json")
    row["cov"] = [[0.01, 0.0], [0.0, 0.01]]
    with pytest.raises(InputError, match=r"model\.json: input_range: must be \[low, high\] with low < high"):
        model_from_dict(doc | {"input_range": [5.0, 1.0]}, source="model.json")
    model = model_from_dict(doc, source="model.json")
    with pytest.raises(InputError, match=r"model\.json: rubric: 1 rubric\(s\) the model was not fitted for .*'code'"):
        model.correct([3.0], ["code"])
    np.testing.assert_allclose(model.correct([3.0], [None])["corrected"], [0.1 + 0.9 * 3.0])  # its one rubric
