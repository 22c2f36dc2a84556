"""The notebook API: docs/api.md runs as written (in a fresh interpreter that cannot import pyspark or ray), the
estimators compose in a scikit-learn Pipeline exactly as the studies' pipeline, and the API's model is the one
``judgecal score`` applies."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import make_pipeline

from judgecal_dist import CalibratedAggregator
from judgecal_dist.errors import InputError
from judgecal_dist.methods.aggregation import (
    AccuracyWeighted,
    DawidSkene,
    LogisticStacking,
    LogOddsWeighted,
    MajorityVote,
    OneCoin,
)
from judgecal_dist.methods.calibration import BetaCalibration
from judgecal_dist.methods.pipeline import Settings, aggregate, calibrate

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "api.md"

_FRESH = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyspark", "ray"):
            raise ImportError(f"No module named {name!r} (the base install has no engine)")
        return None
sys.meta_path.insert(0, Refuse())
"""


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_docs_api_runs_on_the_base_install_and_imports_no_engine():
    code = _FRESH + "\n".join(_blocks())
    code += "\nimport json\nprint(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'ray'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
    # the output the page shows is the output it gives
    shown = re.findall(r"```text\n(.*?)```", DOC.read_text(), flags=re.S)
    assert all(block.strip() in out.stdout for block in shown)


def _panel(seed: int = 3, n: int = 240, accuracy=(0.85, 0.75, 0.7, 0.6, 0.52, 0.8)):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n).astype(np.int8)
    right = rng.random((n, len(accuracy))) < np.array(accuracy)
    V = np.where(right, y[:, None], 1 - y[:, None]).astype(np.int8)
    V[rng.random(V.shape) < 0.1] = -1
    return V, y


@pytest.mark.parametrize(
    ("name", "agg"),
    [
        ("majority", MajorityVote()),
        ("accuracy_weighted", AccuracyWeighted()),
        ("log_odds", LogOddsWeighted()),
        ("one_coin", OneCoin()),
        ("dawid_skene", DawidSkene()),
        ("stacking", LogisticStacking(random_state=0)),
    ],
)
def test_a_pipeline_of_estimators_is_the_studies_pipeline(name, agg):
    V, y = _panel()
    fit, new = slice(0, 160), slice(160, None)
    pipe = make_pipeline(agg, BetaCalibration()).fit(V[fit], y[fit])
    settings = Settings()  # log-odds input: the default everywhere
    s_fit, s_new, _ = aggregate(name, settings, V[fit], y[fit], V[new])
    expected = calibrate("beta", settings, s_fit, y[fit], {"new": s_new})["new"]
    np.testing.assert_allclose(pipe.predict_proba(V[new])[:, 1], expected, rtol=1e-10, atol=1e-12)
    assert set(pipe.predict(V[new])) <= {0, 1}


def _long(V: np.ndarray) -> pd.DataFrame:
    i, j = np.nonzero(V >= 0)
    return pd.DataFrame({"item_id": [f"i{k}" for k in i], "judge_id": [f"j{k}" for k in j], "verdict": V[i, j]})


def test_the_api_model_is_what_judgecal_score_applies(tmp_path):
    from judgecal_dist.models import load_model

    V, y = _panel()
    votes = _long(V)
    labels = pd.Series(y[:200], index=[f"i{k}" for k in range(200)])
    est = CalibratedAggregator(aggregator="stacking", calibrator="isotonic").fit(votes, labels)
    url = est.save(str(tmp_path / "m.json"))
    model = load_model(url)
    scored = est.predict(votes)
    np.testing.assert_array_equal(model.score(V[:, np.argsort([f"j{k}" for k in range(V.shape[1])])])["p"], scored["p"])
    assert model.name == "stacking + isotonic @ all" and list(scored.index[:2]) == ["i0", "i1"]
    with pytest.raises(InputError, match="m.json: exists; .*overwrite=True"):
        est.save(url)


def test_long_frames_are_checked_with_the_column_and_fix():
    V, y = _panel()
    votes = _long(V)
    labels = pd.Series(y, index=[f"i{k}" for k in range(len(y))])
    with pytest.raises(InputError, match=r"verdict: values must be A/B/tie or 0/1 .*got \['yes'\]"):
        CalibratedAggregator().fit(votes.assign(verdict="yes"), labels)
    with pytest.raises(InputError, match="need item_id, judge_id, verdict"):
        CalibratedAggregator().fit(votes.rename(columns={"judge_id": "who"}), labels)
    with pytest.raises(InputError, match="repeated verdicts .*keep one sample per judge and item"):
        CalibratedAggregator().fit(pd.concat([votes, votes.iloc[:1]]), labels)
    with pytest.raises(InputError, match="aggregator: 'em' is not one of"):
        CalibratedAggregator(aggregator="em").fit(votes, labels)
    with pytest.raises(InputError, match="a long frame of verdicts .*CalibratedAggregator"):
        OneCoin().fit(votes, y)


def test_a_judge_unknown_to_the_model_is_ignored_and_a_missing_one_is_a_missing_vote():
    V, y = _panel()
    votes = _long(V)
    labels = pd.Series(y, index=[f"i{k}" for k in range(len(y))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = CalibratedAggregator(conformal_alphas=()).fit(votes, labels)
    extra = pd.concat([votes, pd.DataFrame({"item_id": ["i0"], "judge_id": ["new"], "verdict": [1]})])
    pd.testing.assert_frame_equal(est.predict(extra), est.predict(votes))
    fewer = votes[votes["judge_id"] != "j0"]
    V0 = V.copy()
    V0[:, 0] = -1
    np.testing.assert_allclose(est.predict(fewer)["p"], est.model_.score(V0)["p"])
