r"""The drift evaluation of the score flow, fused: one forward and one hand-derived backward per call.

Training the flow is 1500 epochs x 10 RK4 steps x 4 drift evaluations of a small MLP on (M, N, 64) activations,
so per-op overhead, not arithmetic, decides its speed on a CPU (spec 001 §4.9; issue 7's "Figures to reach").
Measured on one core of this machine (N = 1500): ``torch.tanh`` takes 6x the time of ``torch.sigmoid`` on the
same tensor, ``torch.nn.functional.dropout`` (a Bernoulli draw per element from torch's CPU generator) 4x the
64x64 matmul, and autograd records ~15 small ops per evaluation. This module therefore computes

.. math::
    a_1 = x\,w_{1x} + t\,w_{1t} + c, \quad g_1 = \tanh(a_1) \odot d_1, \quad
    a_2 = g_1 W_2 + b_2, \quad g_2 = \tanh(a_2) \odot d_2, \quad f = g_2 w_3 + b_3

(:math:`c = b_1 + W_{1e} e_r` is time-constant, :math:`d_\ell` are dropout keep-masks scaled by :math:`1/(1-p)`)
as one :class:`torch.autograd.Function` with the chain rule written out, using :math:`\tanh a = 2\sigma(2a) - 1`
and :math:`\partial g_\ell / \partial a_\ell = d_\ell \odot (1 - \tanh^2 a_\ell) = d_\ell - g_\ell \odot \tanh a_\ell`.
The three matmuls per evaluation forward and the three backward are the irreducible part. The masks come from
:class:`DropoutMasks`: on CPU 16 random bits per element from numpy's PCG64 (``P(drop) = round(p\,2^{16})/2^{16}``,
``0.100006`` for ``p = 0.1``), on other devices ``torch.rand`` on the device.

:func:`reference_drift` is the same map in plain autograd ops (``torch.tanh``, masks applied by multiplication):
the tests check the fused forward and every gradient against it in float64.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["DropoutMasks", "TrajectoryMasks", "fused_drift", "reference_drift"]

_BITS = 16


class DropoutMasks:
    """A seeded stream of dropout keep-masks scaled by :math:`1/(1-p)` (inverted dropout), one fresh mask per call.

    Parameters
    ----------
    p : float
        Drop probability; on CPU it is realised as ``round(p * 2**16) / 2**16`` (``effective_p``).
    seed : int
        Seeds the stream (numpy PCG64 on CPU, a ``torch.Generator`` on other devices).
    device : torch.device or str
    dtype : torch.dtype
    """

    def __init__(self, p: float, seed: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32):
        if not 0.0 <= p < 1.0:
            raise ValueError(f"flow: dropout: must be in [0, 1), got {p}")
        self.device = torch.device(device)
        self.dtype = dtype
        self.cpu = self.device.type == "cpu"
        if self.cpu:
            self._threshold = round(p * 2**_BITS)
            self.effective_p = self._threshold / 2**_BITS
            self._bits = np.random.PCG64(seed)
        else:
            self.effective_p = p
            self._gen = torch.Generator(device=self.device).manual_seed(seed)
        self.scale = 1.0 / (1.0 - self.effective_p)

    def draw(self, shape: tuple[int, ...]) -> torch.Tensor:
        """A keep-mask of ``shape``: ``1/(1-p)`` with probability ``1 - p``, else 0, independent across elements."""
        n = int(np.prod(shape))
        if self.cpu:
            # Unsigned 16-bit lanes of 64-bit draws; numpy's compare + cast is ~10x torch's on bool/int16 tensors.
            lanes = self._bits.random_raw(-(-n // 4)).view(np.uint16)[:n]
            keep = np.multiply(lanes >= self._threshold, np.float32(self.scale), dtype=np.float32)
            return torch.from_numpy(keep.reshape(shape)).to(self.dtype)
        u = torch.rand(shape, generator=self._gen, device=self.device, dtype=self.dtype)
        return (u >= self.effective_p).to(self.dtype) * self.scale

    def for_trajectory(self) -> TrajectoryMasks:
        """Masks for one solve under the "one mask per trajectory" policy (spec 001 §4.5 option)."""
        return TrajectoryMasks(self)


class TrajectoryMasks:
    """One mask per layer for a whole ODE solve: a sampled network, the same at every drift evaluation.

    The first evaluation draws the layer masks from ``stream``; later evaluations replay them in the same order.
    """

    def __init__(self, stream: DropoutMasks) -> None:
        self.stream = stream
        self._masks: list[torch.Tensor] = []
        self._calls = 0

    def draw(self, shape: tuple[int, ...]) -> torch.Tensor:
        """The mask of the next layer (cycling through the layers of the first evaluation)."""
        if len(self._masks) < 2:  # the drift has two dropout layers
            self._masks.append(self.stream.draw(shape))
            return self._masks[-1]
        mask = self._masks[self._calls % 2]
        self._calls += 1
        return mask


def _activate(z: torch.Tensor, d: torch.Tensor | None, keep: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    r"""From :math:`z = 2a` (overwritten), :math:`k = g/2 = d(\tanh a)/2` and :math:`r = s/4 = d(1-\tanh^2 a)/4`.

    With :math:`\sigma = \sigma(z)`, :math:`\tanh a = 2\sigma - 1`: :math:`k = d\sigma - d/2`,
    :math:`r = d\sigma(1-\sigma)`. Four ops on (M, N, H) instead of six (the factors 2 and 4 move into the small
    weight tensors); ``r`` is ``None`` unless ``keep`` (a backward pass will need it).
    """
    sig = z.sigmoid_()
    u = sig * d if d is not None else sig
    k = torch.sub(u, d, alpha=0.5) if d is not None else u - 0.5
    r = torch.addcmul(u, u, sig, value=-1.0) if keep else None
    return k, r


def _forward(x, t, base, w1x, w1t, w2, b2, w3, b3, d1, d2, keep=True):
    z1 = torch.addcmul(2.0 * (base + t * w1t[:, None, :]), x[..., None], 2.0 * w1x[:, None, :])
    k1, r1 = _activate(z1, d1, keep)
    k2, r2 = _activate(torch.baddbmm(b2[:, None, :], k1, w2, beta=2.0, alpha=4.0), d2, keep)
    f = torch.baddbmm(b3[:, None, :], k2, w3, alpha=2.0)[..., 0]
    return f, k1, r1, k2, r2


class _FusedDrift(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, t, base, w1x, w1t, w2, b2, w3, b3, d1, d2):  # noqa: D102 - see the module docstring
        f, k1, r1, k2, r2 = _forward(x, t, base, w1x, w1t, w2, b2, w3, b3, d1, d2)
        ctx.t = t
        ctx.base_items = base.shape[1]
        ctx.save_for_backward(x, w1x, w2, w3, k1, k2, r1, r2)
        return f

    @staticmethod
    def backward(ctx, df):  # noqa: D102
        # g = 2k and s = 4r (see _activate): the factors are applied to the small tensors.
        x, w1x, w2, w3, k1, k2, r1, r2 = ctx.saved_tensors
        df3 = df[..., None]  # (M, N, 1)
        dw3 = torch.bmm(k2.transpose(1, 2), df3).mul_(2.0)
        db3 = df.sum(1, keepdim=True)
        da2 = torch.bmm(df3, 4.0 * w3.transpose(1, 2)).mul_(r2)  # (M, N, H)
        dw2 = torch.bmm(k1.transpose(1, 2), da2).mul_(2.0)
        db2 = da2.sum(1)
        da1 = torch.bmm(da2, 4.0 * w2.transpose(1, 2)).mul_(r1)
        dx = torch.bmm(da1, w1x[:, :, None])[..., 0]
        dw1x = torch.bmm(x[:, None, :], da1)[:, 0, :]
        da1_sum = da1.sum(1, keepdim=True)
        dbase = da1 if ctx.base_items != 1 else da1_sum
        return dx, None, dbase, dw1x, ctx.t * da1_sum[:, 0, :], dw2, db2, dw3, db3, None, None


def fused_drift(
    x: torch.Tensor,
    t: float,
    base: torch.Tensor,
    w1x: torch.Tensor,
    w1t: torch.Tensor,
    w2: torch.Tensor,
    b2: torch.Tensor,
    w3: torch.Tensor,
    b3: torch.Tensor,
    d1: torch.Tensor | None = None,
    d2: torch.Tensor | None = None,
) -> torch.Tensor:
    """Drift :math:`f(x, t)` of ``M`` stacked MLPs at states ``x`` (M, N); ``base`` is :math:`c`, (M, 1 or N, H);
    ``d1``, ``d2`` are keep-masks (M, N, H) or ``None`` (no dropout). Differentiable in every tensor but the masks."""
    if not torch.is_grad_enabled():  # inference (MC dropout): no graph, no backward buffers
        return _forward(x, float(t), base, w1x, w1t, w2, b2, w3, b3, d1, d2, keep=False)[0]
    return _FusedDrift.apply(x, float(t), base, w1x, w1t, w2, b2, w3, b3, d1, d2)


def reference_drift(
    x: torch.Tensor,
    t: float,
    base: torch.Tensor,
    w1x: torch.Tensor,
    w1t: torch.Tensor,
    w2: torch.Tensor,
    b2: torch.Tensor,
    w3: torch.Tensor,
    b3: torch.Tensor,
    d1: torch.Tensor | None = None,
    d2: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`fused_drift` in plain autograd ops: the oracle of the tests (and the readable definition)."""
    h = torch.tanh(x[..., None] * w1x[:, None, :] + t * w1t[:, None, :] + base)
    h = h * d1 if d1 is not None else h
    h = torch.tanh(torch.baddbmm(b2[:, None, :], h, w2))
    h = h * d2 if d2 is not None else h
    return torch.baddbmm(b3[:, None, :], h, w3)[..., 0]
