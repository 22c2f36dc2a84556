"""Neural-ODE score flow: architecture, solver, stacked training, MC dropout, rubric embedding, crossover."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from judgecal_dist.errors import InputError
from judgecal_dist.methods.continuous.linear_conjugate import ols_from_stats, sufficient_stats
from judgecal_dist.methods.continuous.score_flow import (
    ScoreFlow,
    StackedDrift,
    fit_flow_stack,
    loss_change,
    route_for_review,
    solve,
)


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    # Tiny tensors: one thread avoids OpenMP spin-waits on a shared CI machine (and keeps runs reproducible).
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _reference_mlp(drift: StackedDrift, m: int) -> torch.nn.Sequential:
    """The spec's drift as plain torch layers (§4.2), with member ``m``'s weights."""
    net = torch.nn.Sequential(
        torch.nn.Linear(2, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1)
    )
    with torch.no_grad():
        for layer, (w, b) in zip(net[::2], (("w1", "b1"), ("w2", "b2"), ("w3", "b3")), strict=True):
            layer.weight.copy_(getattr(drift, w)[m].T)
            layer.bias.copy_(getattr(drift, b)[m])
    return net


def test_drift_has_the_spec_size_and_matches_plain_torch_layers():
    drift = StackedDrift([0, 1, 2]).eval()
    per_member = sum(p[0].numel() for n, p in drift.named_parameters() if n != "emb")
    reference = _reference_mlp(drift, 1)
    assert per_member == sum(p.numel() for p in reference.parameters()) == 4417
    x, t = torch.linspace(1, 5, 7), 0.3
    ctx = drift.context(torch.zeros((3, 7), dtype=torch.long))
    out = drift(t, x.expand(3, 7), ctx)[1]
    expected = reference(torch.stack([x, torch.full_like(x, t)], dim=1))[:, 0]
    torch.testing.assert_close(out, expected)


def test_rk4_loop_matches_torchdiffeq_and_is_monotone():
    drift = StackedDrift([4]).eval()
    x0 = torch.linspace(1, 5, 50)[None, :]
    r = torch.zeros_like(x0, dtype=torch.long)
    with torch.no_grad():
        ours, lib = solve(drift, x0, r), solve(drift, x0, r, solver="torchdiffeq")
    torch.testing.assert_close(ours, lib, atol=1e-4, rtol=0)  # classical RK4 vs Kutta's 3/8 rule, both 4th order
    assert torch.all(torch.diff(ours[0]) > 0)  # 1-D trajectories cannot cross: the map is increasing


def test_stacked_training_equals_separate_fits_without_dropout():
    rng = np.random.default_rng(0)
    j = rng.uniform(1, 5, (2, 40))
    y = np.clip(j + 0.3 * np.sin(j), 1, 5)
    j[1, 30:] = y[1, 30:] = np.nan  # unequal anchor counts: padding must not leak into member 1
    kw = {"epochs": 15, "dropout": 0.0}
    stack = fit_flow_stack(j, y, seeds=[3, 4], **kw)
    alone = fit_flow_stack(j[1:, :30], y[1:, :30], seeds=[4], **kw)
    grid = np.linspace(1, 5, 9)
    np.testing.assert_allclose(
        stack.predict_mc(grid, n_passes=0)[0][1], alone.predict_mc(grid, n_passes=0)[0][0], atol=1e-5
    )
    np.testing.assert_allclose(stack.loss_history[:, 1], alone.loss_history[:, 0], rtol=1e-4)


def test_mc_dropout_resamples_the_mask_at_every_drift_evaluation():
    stack = fit_flow_stack(np.linspace(1, 5, 20)[None], np.linspace(1.5, 4.5, 20)[None], seeds=[0], epochs=3)
    calls = []
    handle = stack.drift.register_forward_hook(lambda mod, args, out: calls.append(out.detach().clone()))
    mean, sd = stack.predict_mc(np.full(5, 3.0), n_passes=40)
    handle.remove()
    assert len(calls) == 40  # one batched solve: 10 RK4 steps x 4 drift evaluations for all K x items
    # The same state gets different drifts across passes within every evaluation: a fresh mask each call.
    first = calls[0].reshape(40, 5)
    assert torch.unique(first[:, 0]).numel() > 20
    assert np.all(sd > 0)
    assert np.ptp(mean) < 8 * sd.max() / np.sqrt(40)  # identical items: same law, MC means within MC error
    det_mean, det_sd = stack.predict_mc(np.full(5, 3.0), n_passes=0)
    assert np.all(det_sd == 0) and np.ptp(det_mean) == 0


def test_rubric_embedding_learns_two_opposite_shifts():
    rng = np.random.default_rng(1)
    j = rng.uniform(1.5, 4.5, 200)
    rubric = np.array(["up", "down"] * 100)
    y = j + np.where(rubric == "up", 0.4, -0.4)
    flow = ScoreFlow(epochs=150, lr=0.01, n_passes=10, random_state=0).fit(j, y, rubric)
    up, down = flow.predict([3.0], ["up"])[0], flow.predict([3.0], ["down"])[0]
    assert up == pytest.approx(3.4, abs=0.12) and down == pytest.approx(2.6, abs=0.12)
    with pytest.raises(InputError, match="fall back to the HB corrector"):
        flow.predict([3.0], ["unseen"])


def test_route_for_review_takes_the_top_budget_by_mc_sd():
    sd = np.random.default_rng(0).gamma(2.0, 0.01, 1000)
    routed = route_for_review(sd, budget=0.1)
    assert routed.sum() == 100 and sd[routed].min() > sd[~routed].max()
    assert route_for_review(sd, threshold=0.05).sum() == int((sd > 0.05).sum())


def test_early_stop_ends_at_the_first_window_whose_loss_moved_less_than_tol():
    """The stop is read off the returned history with plain window means: below ``tol`` (every member) at the
    epoch it stopped, not at the check one window earlier; without ``tol`` the same fit runs every epoch."""
    rng = np.random.default_rng(5)
    j = rng.uniform(1, 5, (2, 60))
    y = np.clip(0.5 + 0.8 * j + 0.3 * rng.standard_normal(j.shape), 1, 5)
    kw = {"seeds": [0, 1], "epochs": 600, "lr": 0.01, "hidden": 8, "window": 20}
    stack = fit_flow_stack(j, y, tol=0.02, **kw)
    h = stack.loss_history
    done = len(h)
    assert done < 600 and done % 20 == 0 and done >= 40

    def change(upto: int) -> np.ndarray:
        last, previous = h[upto - 20 : upto].mean(0), h[upto - 40 : upto - 20].mean(0)
        return (last - previous) / previous

    assert np.all(np.abs(change(done)) < 0.02)
    np.testing.assert_allclose(loss_change(h, 20), change(done), rtol=1e-12)
    if done > 40:
        assert np.any(np.abs(change(done - 20)) >= 0.02)  # the check before did not stop it
    full = fit_flow_stack(j, y, **kw).loss_history
    assert full.shape == (600, 2)
    np.testing.assert_array_equal(full[:done], h)  # the same trajectory up to the stop
    assert np.isnan(loss_change(h[:39], 20)).all()


def test_bad_input_is_rejected():
    with pytest.raises(InputError, match="outside the declared range"):
        ScoreFlow(epochs=1).fit([1.0, 6.0], [1.0, 2.0])
    with pytest.raises(InputError, match="fewer than 2 anchors"):
        fit_flow_stack(np.array([[2.0, np.nan]]), np.array([[2.0, np.nan]]), seeds=[0], epochs=1)


@pytest.mark.heavy
def test_flow_beats_linear_at_1500_and_linear_ties_at_100():
    """The paper's crossover on a known tanh distortion, scored against the true curve (no test-set noise).

    Several seeded data draws per budget, trained as one stacked model each (8 at 100 anchors, 3 at 1500), on a
    reduced schedule (300 full-batch epochs at lr 0.02, one thread: deterministic). Gap = linear error minus flow
    error on the true curve. Measured on two other independent sets of draws (issue-7 note): at 1500 anchors every
    draw's gap was 0.038-0.092 (means 0.063 and 0.072); at 100 anchors the mean gaps were -0.022 and -0.008 (draws
    -0.13..0.08), i.e. linear wins or ties. The margins below hold with room across those sets.
    """

    def g(j):
        return 3 + 1.6 * np.tanh(0.8 * (j - 3))

    grid = np.linspace(1.2, 4.8, 200)
    gaps = {}
    for n, draws in ((100, 8), (1500, 3)):
        rng = np.random.default_rng([n, 0])
        j = rng.uniform(1, 5, (draws, n))
        y = g(j) + 1.0 * rng.standard_normal((draws, n))
        stack = fit_flow_stack(j, y, seeds=list(range(draws)), epochs=300, lr=0.02)
        flow = np.abs(stack.predict_mc(grid)[0] - g(grid)).mean(axis=1)
        linear = []
        for d in range(draws):
            a, b, _ = ols_from_stats(sufficient_stats(j[d], y[d]))
            linear.append(np.abs(a + b * grid - g(grid)).mean())
        gaps[n] = np.asarray(linear) - flow  # > 0: the flow recovers g better
    assert np.all(gaps[1500] > 0.01)  # the flow wins at 1500 anchors in every draw
    assert gaps[100].mean() < 0.02  # linear wins or ties at 100 (the paper's +-0.02 MAE band, spec 001 §8)
    assert gaps[1500].mean() > gaps[100].mean() + 0.03  # the crossover
