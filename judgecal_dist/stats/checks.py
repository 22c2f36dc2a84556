"""Input checks shared by the estimators in ``methods/`` and the metrics in ``stats/``.

Data checks raise :class:`~judgecal_dist.errors.InputError` and parameter checks raise
:class:`~judgecal_dist.errors.ConfigError` (both are ``ValueError``), with a message of the form
``<where>: <argument>: <what is wrong> (<count>, e.g. <positions>)``; data checks return the validated array,
converted to the dtype the caller computes with. Nothing is repaired silently.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import numpy.typing as npt

from judgecal_dist.errors import ConfigError, InputError

__all__ = [
    "DEFAULT_EPS",
    "check_binary_labels",
    "check_probabilities",
    "check_same_length",
    "check_eps",
    "check_confidence",
    "check_param",
    "check_labels_and_probabilities",
    "check_rng",
    "check_values",
]

#: Probability clipping floor of spec 000 §3.4 (Lemma 1): every probability entering a log or a logit is
#: clipped to ``[DEFAULT_EPS, 1 - DEFAULT_EPS]``.
DEFAULT_EPS: float = 1e-6


def _examples(mask: npt.NDArray[np.bool_], values: npt.NDArray[Any], k: int = 3) -> str:
    idx = np.flatnonzero(mask)[:k]
    return ", ".join(f"[{i}]={values.ravel()[i].item()!r}" for i in idx)


def check_binary_labels(y: npt.ArrayLike, *, where: str, name: str = "y") -> npt.NDArray[np.int64]:
    """Return ``y`` as a 1-D int64 array after checking that every entry is 0 or 1.

    Raises
    ------
    InputError
        If ``y`` is not 1-D, is empty, or holds a value other than 0 and 1 (NaN included).

    Examples
    --------
    >>> check_binary_labels([1, 0, 1.0], where="demo")
    array([1, 0, 1])
    """
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise InputError(f"{where}: {name}: expected a 1-D array of labels, got shape {arr.shape}; use np.ravel")
    if arr.size == 0:
        raise InputError(f"{where}: {name}: no labels (0 items)")
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise InputError(f"{where}: {name}: expected numeric labels in {{0, 1}}, got dtype {arr.dtype}")
    bad = ~np.isin(arr, (0, 1))
    if bad.any():
        raise InputError(f"{where}: {name}: labels must be 0 or 1 ({int(bad.sum())} items, e.g. {_examples(bad, arr)})")
    return arr.astype(np.int64)


def check_probabilities(p: npt.ArrayLike, *, where: str, name: str = "p") -> npt.NDArray[np.float64]:
    """Return ``p`` as a 1-D float64 array after checking that every entry is a finite number in [0, 1].

    Raises
    ------
    InputError
        If ``p`` is not 1-D, is empty, or holds NaN, infinity or a value outside [0, 1].

    Examples
    --------
    >>> check_probabilities([0.2, 1], where="demo")
    array([0.2, 1. ])
    """
    arr = np.asarray(p)
    if arr.ndim != 1:
        hint = " (for a predict_proba output pass column 1, P(class 1))" if arr.ndim == 2 else ""
        raise InputError(f"{where}: {name}: expected a 1-D array of probabilities, got shape {arr.shape}{hint}")
    if arr.size == 0:
        raise InputError(f"{where}: {name}: no probabilities (0 items)")
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise InputError(f"{where}: {name}: expected numeric probabilities, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    bad = ~(np.isfinite(arr) & (arr >= 0.0) & (arr <= 1.0))
    if bad.any():
        raise InputError(
            f"{where}: {name}: probabilities must be finite and in [0, 1] "
            f"({int(bad.sum())} items, e.g. {_examples(bad, arr)})"
        )
    return arr


def check_same_length(*arrays: tuple[str, npt.NDArray[Any]], where: str) -> None:
    """Raise :class:`InputError` unless all ``(name, array)`` pairs have the same first dimension.

    Examples
    --------
    >>> check_same_length(("y", np.zeros(2)), ("p", np.zeros(3)), where="demo")
    Traceback (most recent call last):
    ...
    judgecal_dist.errors.InputError: demo: inconsistent numbers of items: y has 2, p has 3
    """
    lengths = {name: len(arr) for name, arr in arrays}
    if len(set(lengths.values())) > 1:
        found = ", ".join(f"{name} has {n}" for name, n in lengths.items())
        raise InputError(f"{where}: inconsistent numbers of items: {found}")


def _within(value: Any, low: float | None, high: float | None, include_boundaries: str) -> bool:
    """Whether a number lies in the interval ``check_scalar`` checks (NaN never does)."""
    left, right = include_boundaries in ("left", "both"), include_boundaries in ("right", "both")
    above = low is None or (value >= low if left else value > low)
    below = high is None or (value <= high if right else value < high)
    return bool(above and below)


def check_param(
    value: Any,
    *,
    where: str,
    name: str,
    target_type: type | tuple[type, ...],
    min_val: float | None = None,
    max_val: float | None = None,
    include_boundaries: str = "both",
) -> Any:
    """:func:`sklearn.utils.check_scalar`, re-raised as :class:`ConfigError` naming ``where`` and ``name``.

    Examples
    --------
    >>> check_param(2, where="demo", name="n_bins", target_type=numbers.Integral, min_val=1)
    2
    >>> check_param(0, where="demo", name="n_bins", target_type=numbers.Integral, min_val=1)
    Traceback (most recent call last):
    ...
    judgecal_dist.errors.ConfigError: demo: n_bins == 0, must be >= 1.
    """
    if isinstance(value, bool) and target_type is not bool:
        raise ConfigError(f"{where}: {name}: expected {target_type}, got a bool ({value!r})")
    if isinstance(value, target_type) and _within(value, min_val, max_val, include_boundaries):
        return value  # valid: what check_scalar returns, without importing sklearn (~1 s) on the scoring path
    from sklearn.utils import check_scalar  # its messages for what is not valid

    try:
        return check_scalar(
            value,
            name,
            target_type,
            min_val=min_val,
            max_val=max_val,
            include_boundaries=include_boundaries,
        )
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{where}: {err}") from err


def check_eps(eps: float, *, where: str) -> float:
    """Return ``eps`` as a float after checking ``0 < eps < 1/2`` (the clipping interval must be non-empty).

    Raises
    ------
    ConfigError
        If ``eps`` is not a real number in (0, 1/2).
    """
    return float(
        check_param(
            eps,
            where=where,
            name="eps",
            target_type=numbers.Real,
            min_val=0.0,
            max_val=0.5,
            include_boundaries="neither",
        )
    )


def check_confidence(confidence: float, *, where: str, name: str = "confidence") -> float:
    """Return a confidence level (or a two-sided alpha) as a float after checking it lies in the open (0, 1).

    Raises
    ------
    ConfigError
        If it is not a real number strictly between 0 and 1.
    """
    return float(
        check_param(
            confidence,
            where=where,
            name=name,
            target_type=numbers.Real,
            min_val=0.0,
            max_val=1.0,
            include_boundaries="neither",
        )
    )


def check_labels_and_probabilities(
    y: npt.ArrayLike, p: npt.ArrayLike, *, where: str
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Binary labels ``y`` and probabilities ``p`` of the same length, as the metrics take them.

    Raises
    ------
    InputError
        As :func:`check_binary_labels`, :func:`check_probabilities` and :func:`check_same_length`.
    """
    y_arr = check_binary_labels(y, where=where, name="y")
    p_arr = check_probabilities(p, where=where, name="p")
    check_same_length(("y", y_arr), ("p", p_arr), where=where)
    return y_arr, p_arr


def check_rng(rng: np.random.Generator, *, where: str) -> np.random.Generator:
    """``rng`` itself when it is a :class:`numpy.random.Generator` (resampling never touches global state).

    Raises
    ------
    ConfigError
        If ``rng`` is anything else (a seed, a ``RandomState``, None).
    """
    if not isinstance(rng, np.random.Generator):
        raise ConfigError(
            f"{where}: rng: expected a numpy.random.Generator (e.g. np.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )
    return rng


def check_values(values: npt.ArrayLike, where: str) -> npt.NDArray[np.float64]:
    """``values`` as a 1-D float array of at least one finite number (a metric over splits or replicates).

    Raises
    ------
    InputError
        If it is not 1-D, is empty or holds NaN or infinity.
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise InputError(f"{where}: values: expected numbers ({err})") from err
    if arr.ndim != 1:
        raise InputError(f"{where}: values: expected a 1-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise InputError(f"{where}: values: no values (0 splits)")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InputError(
            f"{where}: values: must be finite ({int(bad.sum())} values, e.g. positions "
            f"{np.flatnonzero(bad)[:3].tolist()})"
        )
    return arr
