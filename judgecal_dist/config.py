"""Configuration: study YAML with ``--set key=value`` overrides, and engine settings (``conf/local.yaml``).

Study configs are plain mappings until a study's typed ``Config`` (a frozen model of
:mod:`judgecal_dist.settings`) validates them: unknown keys and bad values are one
:class:`~judgecal_dist.errors.ConfigError` line. YAML aliases may expand to at most :data:`MAX_YAML_NODES` nodes,
so a small file cannot exhaust memory. Credentials never appear here: S3 access comes from the environment / the
standard AWS chain.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, TypeVar

import yaml
from pydantic import Field, model_validator

from judgecal_dist.errors import ConfigError
from judgecal_dist.settings import TypedSettings, integer, number, one_of

__all__ = [
    "MAX_YAML_NODES",
    "load_yaml",
    "parse_yaml",
    "apply_overrides",
    "EngineConfig",
    "LOCAL_SPARK_CONF",
    "load_engine_config",
    "config_from_mapping",
    "config_digest",
]

T = TypeVar("T")

#: Nodes a YAML document may hold once its aliases are expanded (a config has a few hundred; an alias bomb of
#: 500 bytes expands to billions, which every deep copy or JSON dump would then materialise).
MAX_YAML_NODES = 100_000


def parse_yaml(text: str, *, source: str) -> Any:
    """``yaml.safe_load`` of ``text``, refusing a document whose aliases expand past :data:`MAX_YAML_NODES` nodes.

    The node graph is composed first (aliases are shared references there, so composing is cheap); its expanded
    size is counted with one visit per node before any Python object is built.
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, {}, set())
        if size > MAX_YAML_NODES:
            raise ConfigError(
                f"{source}: YAML aliases expand to more than {MAX_YAML_NODES} values (an alias bomb?); write the "
                "settings out without repeated anchors (*alias)"
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _expanded_size(node: yaml.Node, sizes: dict[int, int], active: set[int]) -> int:
    """Values in ``node`` with every alias expanded (memoised per node: linear in the composed graph)."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in active:  # a recursive alias expands without end
        return MAX_YAML_NODES + 1
    active.add(key)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        children: list[yaml.Node] = list(node.value)
    elif isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    else:
        children = []
    for child in children:
        total += _expanded_size(child, sizes, active)
        if total > MAX_YAML_NODES:
            break
    active.discard(key)
    sizes[key] = total
    return total


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping; a missing file, a parse error, an alias bomb or a non-mapping is a ConfigError
    naming the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read ({err.strerror or err})") from err
    try:
        data = parse_yaml(text, source=str(path))
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
            value = parse_yaml(raw, source=f"--set {key.strip()}") if raw.strip() else None
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


def config_from_mapping(cls: type[T], values: Mapping[str, Any], *, source: str, partial: bool = False) -> T:
    """Validate ``values`` against the typed settings ``cls``; errors are one line naming key, value and fix.

    ``partial`` leaves a required ``data`` empty (to show settings); every other setting is checked.
    """
    if not (isinstance(cls, type) and issubclass(cls, TypedSettings)):
        raise TypeError(f"{cls!r} is not a TypedSettings model")
    return cls.from_mapping(values, source=source, partial=partial)


def config_digest(values: Mapping[str, Any]) -> str:
    """A short stable digest of a configuration (used for default run ids: same config, same run)."""
    blob = json.dumps(values, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


#: Spark settings of a local master unless the engine config sets them. Spark's 200 shuffle partitions cost a
#: task each on one machine's few cores; 8 keep every core busy and AQE coalesces the small ones.
LOCAL_SPARK_CONF: dict[str, str] = {"spark.sql.shuffle.partitions": "8"}


class EngineConfig(TypedSettings):
    """Where and how work runs; ``conf/local.yaml`` by default, ``conf/cluster.yaml`` on a cluster."""

    fix_hint: ClassVar[str] = "set {key} in {source}, e.g. {key}: {example}"

    spark_master: str = Field(default="local[*]", min_length=1, description="Spark master URL")
    spark_conf: dict[str, str] = Field(default_factory=dict, description="Spark settings")
    ray_address: str | None = Field(default=None, description="Ray cluster address (null: a local Ray instance)")
    ray_num_cpus: Annotated[int, integer(1, description="CPUs of a local Ray instance (null: all)")] | None = None
    output: str = Field(default="./results", min_length=1, description="results root URL")
    stats_engine: Annotated[str, one_of(("auto", "spark", "local"))] = "auto"
    # auto: a table runs in memory when its verdict rows fit the memory budget (local_memory_gb at
    # LOCAL_BYTES_PER_ROW, the in-memory jobs' worst peak per row), on Spark above it; local_max_rows caps the rows.
    local_memory_gb: (
        Annotated[
            float,
            number(gt=0.0, description="memory the in-memory engine may fill, in GB (null: a quarter of the RAM)"),
        ]
        | None
    ) = None
    local_max_rows: (
        Annotated[
            int, integer(0, description="verdict rows below which statistics run in memory (null: by local_memory_gb)")
        ]
        | None
    ) = None
    # judgecal drift reads a history of up to this many recorded runs in memory, a larger one through Spark. In
    # memory it reads one small file per run (the runs table) plus the compared runs: 12 s at 2,000 runs on two
    # cores against Spark's 130 s (benchmarks/drift_scale.py), so Spark pays off only for very long histories
    # on a cluster's object store.
    history_local_max_runs: Annotated[
        int, integer(0, description="recorded runs up to which drift reads history in memory")
    ] = 20_000
    storage_options: dict[str, Any] = Field(default_factory=dict, description="fsspec storage options")
    # judgecal serve / sql / catalog: the catalog's folder (state file, logs, Derby metastore) and the endpoints.
    # The warehouse: --warehouse, else $JUDGECAL_WAREHOUSE, else this, else ~/.judgecal/warehouse (one per user).
    sql_warehouse: str | None = Field(
        default=None, min_length=1, description="catalog folder of judgecal serve (null: ~/.judgecal/warehouse)"
    )
    sql_host: str = Field(default="127.0.0.1", min_length=1, description="address judgecal serve binds")
    sql_thrift_port: Annotated[int, integer(1, 65535, description="JDBC (Thrift) port of judgecal serve")] = 10000
    sql_connect_port: Annotated[int, integer(1, 65535, description="Spark Connect port of judgecal serve")] = 15002
    sql_metastore_uri: str | None = Field(default=None, description="external Hive metastore (null: Derby)")

    @model_validator(mode="before")
    @classmethod
    def _plain_spark_conf(cls, values: Any) -> Any:
        if not isinstance(values, Mapping):
            return values
        given = values.get("spark_conf")
        if given is not None and not isinstance(given, Mapping):
            return values  # the field's own check names the key
        # YAML writes `spark.sql.shuffle.partitions: 8` as a number; Spark wants strings.
        conf = {str(k): json.dumps(v) if isinstance(v, bool | int | float) else v for k, v in (given or {}).items()}
        if str(values.get("spark_master") or "local[*]").startswith("local"):
            # The same defaults from any folder: a local master's settings do not depend on a conf/local.yaml.
            conf = LOCAL_SPARK_CONF | conf
        return {**values, "spark_conf": conf}


def load_engine_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> EngineConfig:
    """Engine settings from ``path`` (default ``conf/local.yaml`` when present), then explicit overrides.

    Without a file the settings are :class:`EngineConfig`'s defaults, the same from any folder (a local master's
    Spark settings start from :data:`LOCAL_SPARK_CONF`).
    """
    values: dict[str, Any] = {}
    if path is None and Path("conf/local.yaml").is_file():
        path = Path("conf/local.yaml")
    if path is not None:
        values.update(load_yaml(path))
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return config_from_mapping(EngineConfig, values, source=str(path or "engine settings"))
