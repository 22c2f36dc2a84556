"""Configuration: study YAML with ``--set key=value`` overrides, and engine settings (``conf/local.yaml``).

Study configs are plain mappings until a study's frozen ``Config`` dataclass validates them (unknown keys and bad
values are :class:`~judgecal_dist.errors.ConfigError`). Credentials never appear here: S3 access comes from the
environment / the standard AWS chain.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from judgecal_dist.errors import ConfigError

__all__ = [
    "load_yaml",
    "apply_overrides",
    "EngineConfig",
    "load_engine_config",
    "config_from_mapping",
    "config_digest",
]

T = TypeVar("T")


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping; a missing file, a parse error or a non-mapping is a ConfigError naming the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read ({err.strerror or err})") from err
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from err
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must hold a mapping of settings, got {type(data).__name__}")
    return data


def apply_overrides(config: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``key=value`` overrides (dotted keys reach nested mappings; values parse as YAML scalars/lists).

    Examples
    --------
    >>> apply_overrides({"replicates": 100, "one_coin": {"alpha0": 1}}, ["replicates=5", "one_coin.alpha0=2.5"])
    {'replicates': 5, 'one_coin': {'alpha0': 2.5}}
    """
    result = json.loads(json.dumps(config))  # deep copy of plain data
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected key=value")
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as err:
            raise ConfigError(f"--set {item!r}: value is not valid YAML ({err})") from err
        node = result
        parts = key.strip().split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--set {item!r}: {part} is not a mapping")
            node = child
        node[parts[-1]] = value
    return result


def config_from_mapping(cls: type[T], values: Mapping[str, Any], *, source: str) -> T:
    """Build the frozen dataclass ``cls`` from ``values``, rejecting unknown keys and wrong basic types."""
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(f"{source}: unknown setting(s) {unknown}; known: {sorted(fields)}")
    kwargs = {}
    for name, value in values.items():
        default = fields[name].default
        if isinstance(default, bool) and not isinstance(value, bool):
            raise ConfigError(f"{source}: {name}: expected true/false, got {value!r}")
        if (
            isinstance(default, int)
            and not isinstance(default, bool)
            and not (isinstance(value, int) and not isinstance(value, bool))
        ):
            raise ConfigError(f"{source}: {name}: expected an integer, got {value!r}")
        if isinstance(default, float) and not (isinstance(value, int | float) and not isinstance(value, bool)):
            raise ConfigError(f"{source}: {name}: expected a number, got {value!r}")
        if isinstance(default, tuple) and isinstance(value, list):
            value = tuple(value)
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except TypeError as err:
        raise ConfigError(f"{source}: {err}") from err


def config_digest(values: Mapping[str, Any]) -> str:
    """A short stable digest of a configuration (used for default run ids: same config, same run)."""
    blob = json.dumps(values, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """Where and how work runs; ``conf/local.yaml`` by default, ``conf/cluster.yaml`` on a cluster."""

    spark_master: str = "local[*]"
    spark_conf: Mapping[str, str] = dataclasses.field(default_factory=dict)
    ray_address: str | None = None
    ray_num_cpus: int | None = None
    output: str = "./results"
    stats_engine: str = "auto"
    local_max_rows: int = 5_000_000
    # judgecal drift reads a history of up to this many recorded runs in memory, a larger one through Spark.
    history_local_max_runs: int = 2_000
    storage_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.stats_engine not in ("auto", "spark", "local"):
            raise ConfigError(f"engine: stats_engine: must be auto, spark or local, got {self.stats_engine!r}")
        if self.history_local_max_runs < 0:
            raise ConfigError(f"engine: history_local_max_runs: must be >= 0, got {self.history_local_max_runs}")


def load_engine_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> EngineConfig:
    """Engine settings from ``path`` (default ``conf/local.yaml`` when present), then explicit overrides."""
    values: dict[str, Any] = {}
    if path is None and Path("conf/local.yaml").is_file():
        path = Path("conf/local.yaml")
    if path is not None:
        values.update(load_yaml(path))
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return config_from_mapping(EngineConfig, values, source=str(path or "engine settings"))
