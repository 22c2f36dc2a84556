"""Split membership as data: a pure function of (``group_id``, replicate seed, fraction).

Every engine computes the same halves:

1. ``group_key = XXH64(utf8(group_id), seed=42)`` as a signed 64-bit integer. This is exactly Spark's built-in
   ``xxhash64(group_id)``, so the JVM computes it per row without a Python UDF, and the in-memory path computes
   it with the ``xxhash`` library; the two agree bit for bit (tested).
2. ``u = splitmix64(group_key XOR splitmix64(seed)) >> 11`` scaled to ``[0, 1)`` (53 bits): a keyed hash whose
   key is the replicate seed. SplitMix64's finaliser (Steele, Lea & Flood, "Fast splittable pseudorandom number
   generators", OOPSLA 2014) is a bijection with full avalanche, so distinct seeds give independent-looking
   uniforms and ``u`` is a pure function of (group_id, seed).
3. A group is in the calibration part of replicate ``seed`` iff ``u < fraction``; multi-block splits cut
   ``[0, 1)`` into consecutive intervals.

Because membership depends on ``group_id`` only, swapped or otherwise linked copies of an item (which share a
``group_id``) are never on both sides of a split.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt
import xxhash

__all__ = [
    "SEED_MAX",
    "GROUP_HASH_SEED",
    "group_keys",
    "split_uniforms",
    "calibration_mask",
    "assign_blocks",
]

#: The largest seed a setting or command takes: a seed plus a replicate index plus any study's seed offset (all below
#: 2**41) stays a non-negative int64 here and in numpy, so a larger seed is refused with its key, never overflows.
SEED_MAX = 2**62 - 1
#: Seed of Spark's ``xxhash64`` SQL function; fixed so that ``F.xxhash64("group_id")`` equals :func:`group_keys`.
GROUP_HASH_SEED = 42

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def group_keys(group_ids: Iterable[str]) -> npt.NDArray[np.int64]:
    """XXH64 (seed 42) of each group id's UTF-8 bytes, as int64: equal to Spark's ``xxhash64(group_id)``.

    Parameters
    ----------
    group_ids : iterable of str
        Group identifiers (one per item, or unique ones: the caller decides).

    Returns
    -------
    ndarray of int64

    Examples
    --------
    >>> int(group_keys(["Natural/0"])[0])
    4045779914292371059
    """
    digests = [xxhash.xxh64_intdigest(g.encode("utf-8"), seed=GROUP_HASH_SEED) for g in group_ids]
    return np.array(digests, dtype=np.uint64).view(np.int64)


def _splitmix64(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    # SplitMix64 finaliser (Steele et al. 2014); uint64 arithmetic wraps modulo 2**64 by design.
    with np.errstate(over="ignore"):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def split_uniforms(keys: npt.ArrayLike, seeds: Sequence[int] | npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Uniforms ``u[r, g]`` in [0, 1) for replicate seeds ``r`` and group keys ``g``.

    Parameters
    ----------
    keys : array of int64
        Group keys from :func:`group_keys` (or Spark's ``xxhash64(group_id)``).
    seeds : sequence of int
        Replicate seeds (non-negative, below 2**63).

    Returns
    -------
    ndarray of float64, shape (len(seeds), len(keys))
        Exactly representable multiples of 2**-53, so comparisons with a fraction are deterministic.
    """
    k = np.asarray(keys, dtype=np.int64).view(np.uint64)
    s = np.asarray(seeds, dtype=np.int64).reshape(-1, 1)
    if (s < 0).any():
        raise ValueError(f"seeds: must be non-negative, got {s[s < 0][:3].tolist()}")
    seed_key = _splitmix64(s.astype(np.uint64))
    mixed = _splitmix64(k[None, :] ^ seed_key)
    return (mixed >> np.uint64(11)).astype(np.float64) * 2.0**-53


def calibration_mask(
    keys: npt.ArrayLike, seeds: Sequence[int] | npt.ArrayLike, fraction: float
) -> npt.NDArray[np.bool_]:
    """``mask[r, g]`` is True when group ``g`` is in the calibration part of replicate ``seeds[r]``.

    Examples
    --------
    >>> keys = group_keys([f"g{i}" for i in range(10_000)])
    >>> m = calibration_mask(keys, [0, 1], 0.5)
    >>> m.shape, bool(abs(m.mean() - 0.5) < 0.02), bool((m[0] != m[1]).any())
    ((2, 10000), True, True)
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction: must be in (0, 1), got {fraction!r}")
    return split_uniforms(keys, seeds) < fraction


def assign_blocks(keys: npt.ArrayLike, seed: int, fractions: Sequence[float]) -> npt.NDArray[np.int8]:
    """Block index (0..len(fractions)-1) of every group for one replicate, cutting [0, 1) by ``fractions``.

    Used for multi-block protocols (selection / calibration / validation / test). Fractions must sum to 1.

    Examples
    --------
    >>> b = assign_blocks(group_keys([f"g{i}" for i in range(1000)]), 7, [0.25, 0.25, 0.5])
    >>> sorted(set(b.tolist()))
    [0, 1, 2]
    """
    f = np.asarray(fractions, dtype=np.float64)
    if f.ndim != 1 or (f <= 0).any() or not np.isclose(f.sum(), 1.0):
        raise ValueError(f"fractions: must be positive and sum to 1, got {list(fractions)}")
    u = split_uniforms(keys, [seed])[0]
    edges = np.cumsum(f)[:-1]
    return np.searchsorted(edges, u, side="right").astype(np.int8)
