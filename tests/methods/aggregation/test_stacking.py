from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.aggregation.stacking import LogisticStacking


def z_matrix(V):
    """The +-1 / 0 features, built independently of methods.votes."""
    return np.select([V == 1, V == 0], [1.0, -1.0], default=0.0)


@pytest.mark.parametrize("random_state", [None, 7])
def test_oof_scores_equal_cross_val_predict(panel, random_state):
    V, y = panel
    model = LogisticStacking(random_state=random_state).fit(V, y)
    cv = StratifiedKFold(5, shuffle=random_state is not None, random_state=random_state)
    expected = cross_val_predict(LogisticRegression(C=1.0), z_matrix(V), y, cv=cv, method="predict_proba")[:, 1]
    np.testing.assert_allclose(model.oof_scores_, expected, rtol=0, atol=1e-6)
    assert model.fallback_ is None


def test_refit_on_all_items_scores_new_items(panel):
    V, y = panel
    model = LogisticStacking(C=0.5).fit(V, y)
    reference = LogisticRegression(C=0.5).fit(z_matrix(V), y)
    np.testing.assert_allclose(model.coef_, reference.coef_[0], atol=1e-4)
    np.testing.assert_allclose(model.predict_proba(V[:10]), reference.predict_proba(z_matrix(V[:10])), atol=1e-5)
    assert model.coef_[4] < 0 < model.coef_[0]  # the 25%-accurate judge is flipped
    assert not np.allclose(model.oof_scores_, model.predict_proba(V)[:, 1])  # out-of-fold is not in-sample


def test_needs_two_items_per_class():
    V = np.array([[1, 0], [0, 0], [1, 1], [0, 1], [1, 0], [0, 1]])
    with pytest.raises(InputError, match=r"need >= 2 items of each class .* \(class counts \[5, 1\], 6 items\)"):
        LogisticStacking().fit(V, [0, 0, 0, 0, 0, 1])
    with pytest.raises(InputError, match=r"class counts \[2, 2\], 4 items"):
        LogisticStacking(n_folds=5).fit(V[:4], [0, 1, 0, 1])


def test_clone_and_not_fitted():
    assert clone(LogisticStacking(C=2.0, n_folds=3)).get_params() == {"C": 2.0, "n_folds": 3, "random_state": None}
    with pytest.raises(NotFittedError):
        LogisticStacking().predict_proba(np.ones((1, 2)))


@pytest.mark.parametrize(
    ("params", "match"),
    [({"C": 0.0}, r"C == 0.0, must be > 0"), ({"n_folds": 1}, r"n_folds == 1, must be >= 2")],
)
def test_rejects_hyperparameters(params, match):
    with pytest.raises(ConfigError, match=match):
        LogisticStacking(**params).fit(np.array([[1], [0]]), [1, 0])
