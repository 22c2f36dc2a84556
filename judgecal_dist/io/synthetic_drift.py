"""A sequence of nightly synthetic tables from one seeded panel, in which chosen judges change at chosen nights.

Night 0 is :func:`~judgecal_dist.io.synthetic.generate_panel` with ``seed``; night ``k`` draws new items with seed
``seed + k`` but keeps every judge's night-0 accuracy, so without a change the nights differ only by sampling. A
change applies from its night on (a regression stays). Kinds (``JUDGE@NIGHT:KIND[=VALUE]``):

* ``accuracy=D``: the judge's accuracy moves by ``D`` (default -0.15);
* ``bias=B``: its position bias (P(A) when unsure) becomes ``B`` (default: 1 minus the panel's);
* ``parse=M``: a share ``M`` of its verdicts become null, as a parser regression does (default 0.3);
* ``replace=ACC``: another model answers under a new id ``<judge>-r`` with accuracy ``ACC`` (default 0.6).

Each night is a dataset at ``<dest>/night-NN``; ``<dest>/drift.json`` lists the nights and changes.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from judgecal_dist.errors import ConfigError
from judgecal_dist.io.filesystem import open_fs
from judgecal_dist.io.records import to_json
from judgecal_dist.io.synthetic import generate_panel
from judgecal_dist.splits import SEED_MAX

__all__ = ["JudgeChange", "parse_change", "generate_drift_sequence", "night_url"]

_CHANGE = re.compile(
    r"(?P<judge>[A-Za-z0-9._-]+)@(?P<night>\d+):(?P<kind>accuracy|bias|parse|replace)(=(?P<value>.+))?"
)
_DEFAULTS = {"accuracy": -0.15, "parse": 0.3, "replace": 0.6}


@dataclasses.dataclass(frozen=True)
class JudgeChange:
    """Judge ``judge`` changes at night ``night`` (and stays changed): ``kind`` with ``value`` (None: default)."""

    judge: str
    night: int
    kind: str
    value: float | None = None


def parse_change(text: str) -> JudgeChange:
    """``JUDGE@NIGHT:KIND[=VALUE]`` (e.g. ``judge-001@5:accuracy=-0.2``) as a :class:`JudgeChange`."""
    found = _CHANGE.fullmatch(text.strip())
    value = None
    if found and found["value"] is not None:
        try:
            value = float(found["value"])
        except ValueError:
            found = None
    if not found:
        raise ConfigError(
            f"--drift: {text!r}: expected JUDGE@NIGHT:KIND[=VALUE] with KIND accuracy, bias, parse or replace "
            "(e.g. judge-001@5:accuracy=-0.2)"
        )
    return JudgeChange(found["judge"], int(found["night"]), found["kind"], value)


def night_url(dest: str, night: int) -> str:
    """``<dest>/night-NN``."""
    return f"{dest.rstrip('/')}/night-{night:02d}"


def _params_at(
    night: int, changes: Sequence[JudgeChange], base: dict[str, float], bias: float, unsure: float
) -> dict[str, dict[str, Any]]:
    params: dict[str, dict[str, Any]] = {judge: {"accuracy": acc} for judge, acc in base.items()}
    for change in sorted(changes, key=lambda c: c.night):
        if change.night > night:
            continue
        p = params[change.judge]
        if change.kind == "accuracy":
            shifted = p["accuracy"] + (_DEFAULTS["accuracy"] if change.value is None else change.value)
            p["accuracy"] = min(max(shifted, unsure / 2), 1 - unsure / 2)
        elif change.kind == "bias":
            p["position_bias"] = 1 - bias if change.value is None else change.value
        elif change.kind == "parse":
            p["missing_rate"] = _DEFAULTS["parse"] if change.value is None else change.value
        else:
            p["judge_id"] = f"{change.judge}-r"
            p["accuracy"] = _DEFAULTS["replace"] if change.value is None else change.value
    return params


def generate_drift_sequence(
    dest: str,
    *,
    nights: int,
    changes: Sequence[JudgeChange] = (),
    n_items: int = 2000,
    n_judges: int = 8,
    seed: int = 0,
    position_bias: float = 0.65,
    unsure_rate: float = 0.1,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    **panel: Any,
) -> dict[str, Any]:
    """Write ``nights`` datasets ``<dest>/night-NN`` (see the module docstring); return the sequence's report.

    ``panel`` passes further settings to :func:`~judgecal_dist.io.synthetic.generate_panel` (``label_fraction``,
    ``missing_rate``, ...). Raises :class:`ConfigError` for fewer than 2 nights, a change at a night outside
    ``1..nights-1`` or of a judge the panel lacks, before anything is written.
    """
    if nights < 2:
        raise ConfigError(f"--nights: need at least 2 nights to watch a change, got {nights}")
    if not 0 <= seed <= SEED_MAX - nights + 1:  # night k draws with seed + k: every night's seed in range, or none
        raise ConfigError(
            f"seed: must be an integer in [0, {SEED_MAX - nights + 1}] with --nights {nights}, got {seed}"
        )
    judges = {f"judge-{j:03d}" for j in range(n_judges)}
    for change in changes:
        if not 1 <= change.night < nights or change.judge not in judges:
            raise ConfigError(
                f"--drift: {change.judge}@{change.night}: the night must be in 1..{nights - 1} and the judge one of "
                f"judge-000..judge-{n_judges - 1:03d}"
            )
    common = dict(n_items=n_items, n_judges=n_judges, position_bias=position_bias, unsure_rate=unsure_rate, **panel)
    options = dict(storage_options or {})
    first = generate_panel(night_url(dest, 0), seed=seed, overwrite=overwrite, storage_options=options, **common)
    base = {row["judge_id"]: row["accuracy"] for row in first["judges"]}
    for night in range(1, nights):
        params = _params_at(night, changes, base, position_bias, unsure_rate)
        generate_panel(
            night_url(dest, night),
            seed=seed + night,
            overwrite=overwrite,
            storage_options=options,
            judge_params=params,
            **common,
        )
    report = {
        "nights": [night_url(dest, n) for n in range(nights)],
        "seed": seed,
        "changes": [dataclasses.asdict(c) for c in changes],
        "judges": first["judges"],
    }
    fs, root = open_fs(dest, options)
    with fs.open(f"{root}/drift.json", "w") as fh:
        fh.write(to_json(report))
    return report
