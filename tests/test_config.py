from __future__ import annotations

import dataclasses

import pytest

from judgecal_dist.config import apply_overrides, config_digest, config_from_mapping, load_engine_config, load_yaml
from judgecal_dist.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class _Cfg:
    data: str | None = None
    replicates: int = 10
    eps: float = 1e-6
    flag: bool = False
    names: tuple[str, ...] = ("a",)


def test_overrides_parse_yaml_values_and_nested_keys():
    out = apply_overrides({"a": {"b": 1}}, ["a.b=2.5", "c=[x, y]", "d=true", "e="])
    assert out == {"a": {"b": 2.5}, "c": ["x", "y"], "d": True, "e": None}


def test_from_mapping_validates_types_and_keys():
    cfg = config_from_mapping(_Cfg, {"replicates": 3, "eps": 1, "names": ["x", "y"]}, source="t.yaml")
    assert cfg.replicates == 3 and cfg.eps == 1 and cfg.names == ("x", "y")
    with pytest.raises(ConfigError, match=r"t.yaml: unknown setting\(s\) \['replictes'\]"):
        config_from_mapping(_Cfg, {"replictes": 3}, source="t.yaml")
    with pytest.raises(ConfigError, match="replicates: expected an integer"):
        config_from_mapping(_Cfg, {"replicates": "many"}, source="t.yaml")
    with pytest.raises(ConfigError, match="flag: expected true/false"):
        config_from_mapping(_Cfg, {"flag": "yes please"}, source="t.yaml")


def test_bad_overrides_and_files(tmp_path):
    with pytest.raises(ConfigError, match="expected key=value"):
        apply_overrides({}, ["novalue"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [unclosed\n")
    with pytest.raises(ConfigError, match="bad.yaml: not valid YAML"):
        load_yaml(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_yaml(listy)
    with pytest.raises(ConfigError, match="cannot read"):
        load_yaml(tmp_path / "missing.yaml")


def test_digest_is_order_independent():
    assert config_digest({"a": 1, "b": [1, 2]}) == config_digest({"b": [1, 2], "a": 1})
    assert config_digest({"a": 1}) != config_digest({"a": 2})


def test_engine_config_rejects_bad_engine(tmp_path):
    conf = tmp_path / "e.yaml"
    conf.write_text("stats_engine: gpu\n")
    with pytest.raises(ConfigError, match="stats_engine"):
        load_engine_config(conf)
