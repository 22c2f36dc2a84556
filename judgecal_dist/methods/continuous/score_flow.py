r"""Neural-ODE score-transport flow (spec 001 §4): :math:`\mathrm dx/\mathrm dt = f_\theta(x, t[, e_r])`, :math:`x(0) = j`.

The corrected score is :math:`\hat y = x(1)`, solved with 10 fixed RK4 steps and trained by paired MSE (Adam,
lr 3e-3, 1500 full-batch epochs). Uncertainty is MC dropout: :math:`K = 40` solves with dropout on, the mask
resampled at every drift evaluation (spec §4.5); items whose MC s.d. is large are routed to human review.

Many flows train as **one stacked model**: :math:`M` members (seeds x budgets x arms) with weights of shape
``(M, ...)``, batched matmuls, one Adam step on the sum of the members' losses. Members share no parameter and
Adam is element-wise, so each member follows its own training trajectory; only the dropout stream is shared.
Anchors of unequal counts are padded and masked.

Torch is a runtime dependency of this module only (the flow is the one method that needs autograd); it runs on
CPU or on a CUDA device (``device``), and the Ray task in :mod:`judgecal_dist.engine.cluster.flow_tasks` picks the device.

References
----------
.. [1] R. T. Q. Chen, Y. Rubanova, J. Bettencourt, D. Duvenaud. Neural Ordinary Differential Equations.
   NeurIPS 2018, arXiv:1806.07366.
.. [2] Y. Gal, Z. Ghahramani. Dropout as a Bayesian Approximation. ICML 2016, arXiv:1506.02142.
.. [3] L. Morandi. Two Ways to De-Bias an LLM-as-a-Judge. 2026, §V (Algorithm 2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.errors import InputError
from judgecal_dist.methods.continuous.flow_drift import DropoutMasks, TrajectoryMasks, fused_drift, reference_drift
from judgecal_dist.methods.continuous.hb_linear import check_scores

__all__ = [
    "MASK_POLICIES",
    "StackedDrift",
    "FlowStack",
    "fit_flow_stack",
    "solve",
    "ScoreFlow",
    "route_for_review",
    "drift_flops",
    "loss_change",
]

Array = npt.NDArray[np.float64]


class StackedDrift(torch.nn.Module):
    r"""``M`` independent drift MLPs :math:`f(x, t, e_r)` (spec §4.2): Linear(d_in, H) -> Tanh -> Dropout ->
    Linear(H, H) -> Tanh -> Dropout -> Linear(H, 1), :math:`d_{in} = 2 + d_e`; 4,417 parameters per member at
    H = 64 without a rubric embedding. Initialised member by member as ``torch.nn.Linear``/``Embedding`` would be,
    from each member's own seed."""

    # registered by name in __init__ (register_parameter), declared here so they type as tensors
    w1: torch.Tensor
    b1: torch.Tensor
    w2: torch.Tensor
    b2: torch.Tensor
    w3: torch.Tensor
    b3: torch.Tensor
    emb: torch.Tensor

    def __init__(
        self, seeds: Sequence[int], *, hidden: int = 64, n_rubrics: int = 1, embed_dim: int = 8, dropout: float = 0.1
    ) -> None:
        super().__init__()
        self.dropout = dropout
        self.fused = True  # False: the plain-autograd drift (benchmarks and tests compare the two)
        self.embed_dim = embed_dim if n_rubrics > 1 else 0
        d_in = 2 + self.embed_dim
        shapes = {"w1": (d_in, hidden), "b1": (hidden,), "w2": (hidden, hidden), "b2": (hidden,), "w3": (hidden, 1)}
        shapes["b3"] = (1,)
        init: dict[str, list[torch.Tensor]] = {k: [] for k in [*shapes, "emb"]}
        for seed in seeds:
            gen = torch.Generator().manual_seed(int(seed))
            for name, shape in shapes.items():
                bound = 1.0 / math.sqrt(
                    shape[0] if name.startswith("w") else {"b1": d_in, "b2": hidden}.get(name, hidden)
                )
                init[name].append((torch.rand(shape, generator=gen) * 2 - 1) * bound)  # nn.Linear's default range
            init["emb"].append(torch.randn((max(n_rubrics, 1), max(self.embed_dim, 1)), generator=gen))
        for name, values in init.items():
            self.register_parameter(name, torch.nn.Parameter(torch.stack(values)))

    def context(self, rubric: torch.Tensor) -> torch.Tensor:
        """Time-constant part of the first layer, :math:`b_1 + W_1^{(e)} e_r`, shape (M, N, H): computed once a solve."""
        c = self.b1[:, None, :]
        if self.embed_dim:
            e = self.emb[torch.arange(self.emb.shape[0], device=rubric.device)[:, None], rubric]  # (M, N, d_e)
            c = c + torch.bmm(e, self.w1[:, 2:, :])
        return c

    def forward(
        self, t: float, x: torch.Tensor, ctx: torch.Tensor, masks: DropoutMasks | TrajectoryMasks | None = None
    ) -> torch.Tensor:
        """Drift at states ``x`` (M, N), time ``t``; in training mode with dropout, ``masks`` (default: a stream seeded
        from torch's global generator) gives a fresh pair of masks at every call, i.e. at every RK4 stage (§4.5)."""
        d1 = d2 = None
        if self.training and self.dropout > 0:
            if masks is None:
                masks = DropoutMasks(self.dropout, int(torch.randint(2**62, ())), x.device, x.dtype)
            d1, d2 = masks.draw((*x.shape, self.w2.shape[-1])), masks.draw((*x.shape, self.w2.shape[-1]))
        weights = (self.w1[:, 0, :], self.w1[:, 1, :], self.w2, self.b2, self.w3, self.b3)
        return (fused_drift if self.fused else reference_drift)(x, t, ctx, *weights, d1, d2)


def _rk4(
    drift: StackedDrift, x: torch.Tensor, ctx: torch.Tensor, n_steps: int, masks: DropoutMasks | TrajectoryMasks | None
) -> torch.Tensor:
    # Classical RK4 on a fixed grid t_k = k/N (never accumulated by addition, spec §4.3).
    h = 1.0 / n_steps
    for k in range(n_steps):
        t = k / n_steps
        k1 = drift(t, x, ctx, masks)
        k2 = drift(t + h / 2, x + h / 2 * k1, ctx, masks)
        k3 = drift(t + h / 2, x + h / 2 * k2, ctx, masks)
        k4 = drift(t + h, x + h * k3, ctx, masks)
        x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return x


def solve(
    drift: StackedDrift,
    x0: torch.Tensor,
    rubric: torch.Tensor,
    *,
    n_steps: int = 10,
    solver: str = "rk4",
    masks: DropoutMasks | None = None,
    mask_policy: str = "evaluation",
) -> torch.Tensor:
    """:math:`x(1)` from :math:`x(0) = ` ``x0`` (M, N) with ``n_steps`` fixed steps; ``solver="torchdiffeq"`` uses
    torchdiffeq's fixed-grid ``rk4`` (Kutta's 3/8 rule) instead of the classical loop above. ``masks`` is the
    dropout stream when the drift is in training mode: with ``mask_policy="evaluation"`` (spec §4.5 default)
    each drift evaluation draws fresh masks, with ``"trajectory"`` one set of masks holds for the whole solve."""
    if mask_policy not in MASK_POLICIES:
        raise ValueError(f"flow: mask_policy: must be one of {MASK_POLICIES}, got {mask_policy!r}")
    if masks is not None and mask_policy == "trajectory":
        masks = masks.for_trajectory()
    ctx = drift.context(rubric)
    if solver == "rk4":
        return _rk4(drift, x0, ctx, n_steps, masks)
    from torchdiffeq import odeint

    grid = torch.linspace(0.0, 1.0, 2, device=x0.device, dtype=x0.dtype)
    return odeint(
        lambda t, x: drift(float(t), x, ctx, masks), x0, grid, method="rk4", options={"step_size": 1.0 / n_steps}
    )[-1]


MASK_POLICIES = ("evaluation", "trajectory")


@dataclass
class FlowStack:
    """Trained members; ``predict_mc`` gives MC-dropout means and s.d. for every member at once."""

    drift: StackedDrift
    n_steps: int
    solver: str
    loss_history: npt.NDArray[np.float64]
    mask_policy: str = "evaluation"

    @torch.no_grad()
    def predict_mc(
        self, j: npt.ArrayLike, rubric: npt.ArrayLike | None = None, *, n_passes: int = 40, seed: int = 0
    ) -> tuple[Array, Array]:
        r"""MC mean :math:`\hat y` and s.d. :math:`\hat\sigma` (ddof 1) of ``n_passes`` solves, shape (M, N).

        ``j`` is (N,) shared by all members or (M, N). All passes and items go through the solver as one tensor
        (M, K N); ``n_passes=0`` gives the deterministic map (dropout off) and zero s.d.
        """
        p = next(self.drift.parameters())
        m = p.shape[0]
        x = torch.as_tensor(
            np.broadcast_to(np.asarray(j, dtype=np.float32), (m, np.shape(j)[-1])).copy(), device=p.device
        )
        r = _rubric_tensor(rubric, x.shape, p.device)
        if n_passes == 0:
            self.drift.eval()
            out = solve(self.drift, x, r, n_steps=self.n_steps, solver=self.solver)
            return out.double().cpu().numpy(), np.zeros(x.shape)
        self.drift.train()  # dropout on at inference (spec §4.5); there is no other train/eval-dependent layer
        n = x.shape[1]
        masks = DropoutMasks(self.drift.dropout, seed, p.device, x.dtype)
        out = solve(
            self.drift,
            x.repeat(1, n_passes),
            r.repeat(1, n_passes),
            n_steps=self.n_steps,
            solver=self.solver,
            masks=masks,
            mask_policy=self.mask_policy,
        )
        out = out.reshape(m, n_passes, n).double()
        return out.mean(1).cpu().numpy(), out.std(1, correction=1).cpu().numpy()


def _rubric_tensor(rubric: npt.ArrayLike | None, shape: torch.Size, device: torch.device) -> torch.Tensor:
    if rubric is None:
        return torch.zeros(shape, dtype=torch.long, device=device)
    r = np.broadcast_to(np.asarray(rubric, dtype=np.int64), tuple(shape))
    return torch.as_tensor(r.copy(), device=device)


def fit_flow_stack(
    j: npt.ArrayLike,
    y: npt.ArrayLike,
    *,
    seeds: Sequence[int],
    rubric: npt.ArrayLike | None = None,
    n_rubrics: int = 1,
    epochs: int = 1500,
    lr: float = 3e-3,
    hidden: int = 64,
    embed_dim: int = 8,
    dropout: float = 0.1,
    n_steps: int = 10,
    solver: str = "rk4",
    device: str = "cpu",
    fused: bool = True,
    mask_policy: str = "evaluation",
    tol: float | None = None,
    window: int = 50,
) -> FlowStack:
    """Train ``len(seeds)`` flows at once on anchors ``j``, ``y`` of shape (M, N) (NaN = padding of shorter members).

    ``rubric`` holds integer rubric codes (M, N) in ``range(n_rubrics)``. Each epoch is one full-batch Adam step on
    :math:`\\sum_m \\frac1{n_m}\\sum_i (\\hat y_{mi} - y_{mi})^2` (spec §4.4). ``fused=False`` evaluates the drift
    with plain autograd ops instead of :mod:`judgecal_dist.methods.continuous.flow_drift`'s fused step (the same map, 1.6x
    slower on one core).
    ``mask_policy`` (``"evaluation"`` | ``"trajectory"``, spec §4.5) applies in training and in ``predict_mc``.
    With ``tol``, training stops at the first multiple of ``window`` epochs where every member's :func:`loss_change`
    is below ``tol`` in size (``epochs`` is then the cap); without it, it runs ``epochs`` steps (the spec's fixed
    schedule). ``loss_history`` holds the epochs run.
    """
    if mask_policy not in MASK_POLICIES:
        raise InputError(f"flow: mask_policy: must be one of {MASK_POLICIES}, got {mask_policy!r}")
    j_arr, y_arr = np.atleast_2d(np.asarray(j, dtype=np.float64)), np.atleast_2d(np.asarray(y, dtype=np.float64))
    if j_arr.shape != y_arr.shape or j_arr.shape[0] != len(seeds):
        raise InputError(f"flow: j, y: shapes {j_arr.shape}, {y_arr.shape} must both be (members={len(seeds)}, N)")
    valid = ~(np.isnan(j_arr) | np.isnan(y_arr))
    counts = valid.sum(axis=1)
    if np.any(counts < 2):
        raise InputError(f"flow: fewer than 2 anchors in members {np.flatnonzero(counts < 2)[:3].tolist()}")
    drift = StackedDrift(seeds, hidden=hidden, n_rubrics=n_rubrics, embed_dim=embed_dim, dropout=dropout).to(device)
    drift.fused = fused
    x0 = torch.as_tensor(np.where(valid, j_arr, 0.0), dtype=torch.float32, device=device)
    target = torch.as_tensor(np.where(valid, y_arr, 0.0), dtype=torch.float32, device=device)
    weight = torch.as_tensor(valid / counts[:, None], dtype=torch.float32, device=device)
    r = (
        _rubric_tensor(rubric, x0.shape, torch.device(device))
        if rubric is not None
        else _rubric_tensor(None, x0.shape, torch.device(device))
    )
    masks = DropoutMasks(dropout, int(seeds[0]), device)  # the stack's dropout stream
    opt = torch.optim.Adam(drift.parameters(), lr=lr)
    history = torch.empty((epochs, len(seeds)), device=device)
    drift.train()
    for epoch in range(epochs):
        opt.zero_grad(set_to_none=True)
        err = solve(drift, x0, r, n_steps=n_steps, solver=solver, masks=masks, mask_policy=mask_policy) - target
        per_member = (weight * err * err).sum(dim=1)
        per_member.sum().backward()
        opt.step()
        history[epoch] = per_member.detach()
        done = epoch + 1
        # The MC-dropout loss is noisy step to step: compare window means, not single steps.
        checked = tol is not None and done % window == 0 and done >= 2 * window
        if checked and np.all(np.abs(loss_change(history[:done].cpu().double().numpy(), window)) < tol):
            history = history[:done]
            break
    return FlowStack(drift, n_steps, solver, history.cpu().double().numpy(), mask_policy)


def loss_change(history: npt.ArrayLike, window: int = 50) -> Array:
    """Relative change of each member's mean training loss over the last ``window`` epochs against the ``window``
    before them, ``(last - previous) / previous`` (negative while the loss still falls); NaN per member when
    ``history`` (epochs, members) holds fewer than ``2 * window`` epochs.

    Examples
    --------
    >>> loss_change([[4.0], [4.0], [3.0], [3.0]], window=2)
    array([-0.25])
    """
    h = np.asarray(history, dtype=np.float64)
    h = h.reshape(len(h), -1)
    if window < 1 or len(h) < 2 * window:
        return np.full(h.shape[1], np.nan)
    last, previous = h[-window:].mean(axis=0), h[-2 * window : -window].mean(axis=0)
    return np.asarray((last - previous) / previous, dtype=np.float64)


def drift_flops(n_points: int, *, hidden: int = 64, d_in: int = 2) -> float:
    """Forward FLOPs of one drift evaluation on ``n_points`` (multiply-adds x 2; tanh and dropout not counted)."""
    return 2.0 * n_points * (d_in * hidden + hidden * hidden + hidden)


def route_for_review(
    sigma: npt.ArrayLike, *, threshold: float | None = None, budget: float = 0.05
) -> npt.NDArray[np.bool_]:
    r"""Items to send to human review: :math:`\hat\sigma > \tau` (absolute ``threshold``) or, by default, the top
    ``budget`` fraction by :math:`\hat\sigma` (:math:`\tau` = the :math:`1-\rho` quantile, spec §4.6)."""
    s = np.asarray(sigma, dtype=np.float64)
    if threshold is None:
        if not 0.0 <= budget <= 1.0:
            raise InputError(f"flow: budget: must be in [0, 1], got {budget}")
        threshold = float(np.quantile(s, 1.0 - budget)) if s.size else 0.0
    return s > threshold


class ScoreFlow(BaseEstimator):
    """One Neural-ODE corrector (optionally rubric-conditioned), sklearn-style; see :func:`fit_flow_stack`.

    Parameters
    ----------
    epochs, lr, hidden, embed_dim, dropout, n_steps : training and architecture (spec §4.2-4.4 defaults).
    n_passes : int
        MC-dropout passes at prediction (K = 40).
    score_range : (float, float)
        Declared range of j and y (checked; the flow output is not clipped, spec §4.8).
    solver : {"rk4", "torchdiffeq"}
    mask_policy : {"evaluation", "trajectory"}
        Dropout masks redrawn at every drift evaluation (spec §4.5 recommendation) or held for a whole solve.
    tol, window : float or None, int
        Early stop on the training loss (:func:`fit_flow_stack`); None trains ``epochs`` steps.
    random_state : int

    Attributes
    ----------
    rubrics_ : list of str
    stack_ : FlowStack
    """

    def __init__(
        self,
        *,
        epochs: int = 1500,
        lr: float = 3e-3,
        hidden: int = 64,
        embed_dim: int = 8,
        dropout: float = 0.1,
        n_steps: int = 10,
        n_passes: int = 40,
        score_range: tuple[float, float] = (1.0, 5.0),
        solver: str = "rk4",
        mask_policy: str = "evaluation",
        tol: float | None = None,
        window: int = 50,
        device: str = "cpu",
        random_state: int = 0,
    ) -> None:
        self.epochs = epochs
        self.lr = lr
        self.hidden = hidden
        self.embed_dim = embed_dim
        self.dropout = dropout
        self.n_steps = n_steps
        self.n_passes = n_passes
        self.score_range = score_range
        self.solver = solver
        self.mask_policy = mask_policy
        self.tol = tol
        self.window = window
        self.device = device
        self.random_state = random_state

    def fit(self, j: npt.ArrayLike, y: npt.ArrayLike, rubric: npt.ArrayLike | None = None) -> ScoreFlow:
        j = check_scores(j, name="j (judge score)", score_range=self.score_range)
        y = check_scores(y, name="y (reference score)", score_range=self.score_range)
        if j.size != y.size:
            raise InputError(f"flow: j, y: lengths differ ({j.size}, {y.size})")
        labels = np.full(j.size, "all", dtype=object) if rubric is None else np.asarray(rubric, dtype=object)
        self.rubrics_ = sorted(set(labels.tolist()))
        codes = np.searchsorted(np.array(self.rubrics_, dtype=object), labels)
        self.stack_ = fit_flow_stack(
            j[None, :],
            y[None, :],
            seeds=[self.random_state],
            rubric=codes[None, :],
            n_rubrics=len(self.rubrics_),
            epochs=self.epochs,
            lr=self.lr,
            hidden=self.hidden,
            embed_dim=self.embed_dim,
            dropout=self.dropout,
            n_steps=self.n_steps,
            solver=self.solver,
            mask_policy=self.mask_policy,
            tol=self.tol,
            window=self.window,
            device=self.device,
        )
        return self

    def predict_mc(self, j: npt.ArrayLike, rubric: npt.ArrayLike | None = None) -> tuple[Array, Array]:
        """MC-dropout mean and s.d. at scores ``j``; an unseen rubric is an InputError (use the HB population
        predictive for it, spec §4.7)."""
        check_is_fitted(self)
        j = check_scores(j, name="j (judge score)", score_range=self.score_range)
        labels = np.full(j.size, self.rubrics_[0], dtype=object) if rubric is None else np.asarray(rubric, dtype=object)
        unknown = sorted(set(labels.tolist()) - set(self.rubrics_))
        if unknown:
            raise InputError(f"flow: rubric: not seen in training {unknown[:3]}; fall back to the HB corrector")
        codes = np.searchsorted(np.array(self.rubrics_, dtype=object), labels)
        mean, sd = self.stack_.predict_mc(j, codes, n_passes=self.n_passes, seed=self.random_state)
        return mean[0], sd[0]

    def predict(self, j: npt.ArrayLike, rubric: npt.ArrayLike | None = None) -> Array:
        """The corrected score: MC-dropout mean of ``n_passes`` solves (spec §4.5)."""
        return self.predict_mc(j, rubric)[0]
