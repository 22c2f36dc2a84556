"""The spec §5.6(b) one-coin generator: accuracies, MNAR missingness, families, and the written dataset."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest, fisher_exact

from judgecal_dist.errors import ConfigError
from judgecal_dist.io.one_coin import simulate_one_coin, write_one_coin_panel
from judgecal_dist.methods.selection.diagnostics import flag_missingness


def _observed_accuracy(panel) -> np.ndarray:
    voted = panel.votes >= 0
    return ((panel.votes == panel.labels[:, None]) & voted).sum(0) / voted.sum(0)


def test_accuracies_and_mcar_rate_within_binomial_error():
    acc = np.array([0.9, 0.7, 0.55, 0.3])
    panel = simulate_one_coin(20_000, acc, seed=1, missing_rate=0.1)
    voted = panel.votes >= 0
    for j, p in enumerate(acc):
        n, k = int(voted[:, j].sum()), int(((panel.votes[:, j] == panel.labels) & voted[:, j]).sum())
        assert binomtest(k, n, p).pvalue > 1e-3
        assert binomtest(int((~voted[:, j]).sum()), 20_000, 0.1).pvalue > 1e-3
        # MCAR: missingness independent of the label
        table = [[int((~voted[panel.labels == y, j]).sum()), int(voted[panel.labels == y, j].sum())] for y in (0, 1)]
        assert fisher_exact(table).pvalue > 1e-3


def test_label_dependent_missingness_is_detected_as_mnar():
    """Spec: 'missing probability depending on Y'. Judge 0 misses 30% of class-1 items and 2% of class-0 ones."""
    panel = simulate_one_coin(
        4000,
        [0.8, 0.8, 0.7],
        seed=2,
        missing="label",
        missing_rate=[0.02, 0.1, 0.1],
        missing_rate_positive=[0.3, 0.1, 0.1],
    )
    miss = panel.votes < 0
    for y, rate in ((0, 0.02), (1, 0.3)):
        items = panel.labels == y
        assert binomtest(int(miss[items, 0].sum()), int(items.sum()), rate).pvalue > 1e-3
    flags = flag_missingness(panel.votes, panel.labels, np.array(["j0", "j1", "j2"]))
    assert flags.set_index("judge_id").loc["j0", "p3_flag"]  # the project's P3 check sees it
    assert not flags.set_index("judge_id").loc[["j1", "j2"], "p3_flag"].any()


def test_judges_abstain_more_on_hard_items():
    """missing='difficulty': abstention rises with item difficulty, so observed accuracy exceeds p_j."""
    acc = np.full(6, 0.7)
    mnar = simulate_one_coin(
        20_000, acc, seed=3, difficulty_sd=1.5, missing="difficulty", missing_rate=0.15, mnar_strength=2.0
    )
    mcar = simulate_one_coin(20_000, acc, seed=3, difficulty_sd=1.5, missing="mcar", missing_rate=0.15)
    hard = mnar.difficulty > np.quantile(mnar.difficulty, 2 / 3)
    easy = mnar.difficulty < np.quantile(mnar.difficulty, 1 / 3)
    miss = mnar.votes < 0
    assert miss[hard].mean() > 2 * miss[easy].mean()
    r = np.corrcoef(mnar.difficulty, miss.mean(axis=1))[0, 1]
    assert r > 0.3
    # the generator's own missing probabilities are what it draws from
    assert abs(miss.mean() - mnar.missing_prob.mean()) < 0.01
    # MCAR keeps the (difficulty-averaged) accuracy among answered items; MNAR hides hard items and inflates it
    assert (_observed_accuracy(mnar) > _observed_accuracy(mcar) + 0.02).all()
    assert abs(np.corrcoef(mcar.difficulty, (mcar.votes < 0).mean(axis=1))[0, 1]) < 0.05


def test_family_copies_correlate_errors():
    panel = simulate_one_coin(20_000, [0.7] * 4, seed=4, families=[0, 0, 1, 1], family_corr=0.8)
    wrong = (panel.votes != panel.labels[:, None]).astype(float)
    c = np.corrcoef(wrong.T)
    assert c[0, 1] > 0.5 and abs(c[0, 2]) < 0.05  # shared within a family, independent across
    assert np.allclose(_observed_accuracy(panel), 0.7, atol=0.015)  # copying keeps the marginal accuracy


def test_written_dataset_loads_as_the_same_panel(tmp_path):
    from judgecal_dist.engine.jobs.panel import load_panel

    sim = simulate_one_coin(300, [0.8, 0.6, 0.4], seed=5, missing="label", missing_rate=0.05, missing_rate_positive=0.2)
    write_one_coin_panel(str(tmp_path / "d"), sim)
    panel = load_panel(str(tmp_path / "d"))
    order = np.argsort(panel.item_ids) if hasattr(panel, "item_ids") else np.arange(300)
    np.testing.assert_array_equal(panel.labels[order], sim.labels)
    np.testing.assert_array_equal(panel.votes[order], sim.votes)


def test_rejects_bad_arguments():
    with pytest.raises(ConfigError):
        simulate_one_coin(10, [1.0])
    with pytest.raises(ConfigError):
        simulate_one_coin(10, [0.7], missing="mnar")
    with pytest.raises(ConfigError):
        simulate_one_coin(10, [0.7], missing_rate=1.0)
