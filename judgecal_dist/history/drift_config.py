"""Drift thresholds as configuration: a YAML file (``conf/drift.yaml``) plus command-line overrides, checked once.

Keys: ``baseline`` (``previous``, ``window:N`` or a run id) and every field of
:class:`~judgecal_dist.history.drift.DriftSettings` (``alpha``, ``method``, ``min_change``, ``ci_level``,
``measures``). Unknown keys, wrong types and values out of range are :class:`~judgecal_dist.errors.ConfigError`
naming the file and the key, raised before any history is read or any run starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from judgecal_dist.config import config_from_mapping, load_yaml
from judgecal_dist.errors import ConfigError
from judgecal_dist.history.drift import DriftSettings, check_baseline

__all__ = ["load_drift_config"]


def load_drift_config(
    path: str | Path | None = None, overrides: Mapping[str, Any] | None = None
) -> tuple[str, DriftSettings]:
    """``(baseline, settings)`` from the YAML at ``path`` (optional) and ``overrides`` (None values ignored).

    Raises
    ------
    ConfigError
        An unreadable file, an unknown key, a wrong type or a value out of range (the file is named when the
        value came from it).
    """
    values: dict[str, Any] = load_yaml(path) if path is not None else {}
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    source = str(path) if path is not None else "drift settings"
    from_file = {k for k in values if k not in given}
    values.update(given)
    known = sorted(["baseline", *(field.name for field in dataclasses.fields(DriftSettings))])
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"{source}: unknown setting(s) {unknown}; known: {known}")
    if isinstance(values.get("measures"), str):
        raise ConfigError(
            f"{source}: measures: expected a list (e.g. [accuracy, parse_rate]), got {values['measures']!r}"
        )
    baseline = values.pop("baseline", "previous")
    where = f"{source}: baseline" if "baseline" in from_file else "--baseline"
    if not isinstance(baseline, str):
        raise ConfigError(f"{where}: expected previous, window:N or a run id, got {baseline!r}")
    check_baseline(baseline, source=where)
    settings = config_from_mapping(DriftSettings, values, source=source)
    try:
        return baseline, settings.check()
    except ConfigError as err:
        # check() names the option (--alpha); a value read from the file is named by file and key instead.
        option = str(err).split(":", 1)[0]
        key = option.removeprefix("--").replace("-", "_")
        if key in from_file:
            raise ConfigError(f"{source}: {key}:{str(err).split(':', 1)[1]}") from err
        raise
