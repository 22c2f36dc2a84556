"""Drift thresholds as configuration: a YAML file (``conf/drift.yaml``) plus command-line overrides, checked once.

Keys: ``baseline`` (``previous``, ``window:N`` or a run id) and every field of
:class:`~judgecal_dist.history.drift.DriftSettings` (``alpha``, ``method``, ``min_change``, ``ci_level``,
``measures``). Unknown keys, wrong types and values out of range are :class:`~judgecal_dist.errors.ConfigError`
naming the file and the key, raised before any history is read or any run starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from judgecal_dist.config import load_yaml
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
    from_file: dict[str, Any] = load_yaml(path) if path is not None else {}
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    source = str(path) if path is not None else "drift settings"
    known = sorted(["baseline", *DriftSettings.model_fields])
    unknown = sorted(set(from_file) - set(known))
    if unknown:
        raise ConfigError(f"{source}: unknown setting(s) {unknown}; known: {known}")
    values = {**from_file, **given}
    baseline = values.pop("baseline", "previous")
    where = "--baseline" if "baseline" in given else f"{source}: baseline"
    if not isinstance(baseline, str):
        raise ConfigError(f"{where}: expected previous, window:N or a run id, got {baseline!r}")
    check_baseline(baseline, source=where)
    # The file's values first, so that an error in them names the file; then the options over them.
    DriftSettings.from_mapping({k: v for k, v in from_file.items() if k != "baseline"}, source=source)
    return baseline, DriftSettings.from_mapping(values, source="the command line")
