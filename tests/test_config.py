from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest

from judgecal_dist.config import (
    MAX_YAML_NODES,
    EngineConfig,
    apply_overrides,
    config_digest,
    config_from_mapping,
    load_engine_config,
    load_yaml,
)
from judgecal_dist.errors import ConfigError
from judgecal_dist.settings import PipelineFields, Replicates, SplitFields, Strings, StudyFields, TypedSettings
from judgecal_dist.studies import STUDIES, get_study
from judgecal_dist.studies.runner import study_schema, study_settings

BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{x}: &{x} [{', '.join([f'*{p}'] * 9)}]\n" for p, x in zip("abcdefgh", "bcdefghi", strict=True)
)


class _Cfg(TypedSettings):
    data_required: ClassVar[str] = "a URL"

    data: str | None = None
    replicates: Replicates = 10
    eps: float = 1e-6
    flag: bool = False
    names: Strings = ("a",)


def test_overrides_parse_yaml_values_and_nested_keys():
    out = apply_overrides({"a": {"b": 1}}, ["a.b=2.5", "c=[x, y]", "d=true", "e="])
    assert out == {"a": {"b": 2.5}, "c": ["x", "y"], "d": True, "e": None}


def test_from_mapping_coerces_and_names_key_value_range_and_fix():
    cfg = config_from_mapping(_Cfg, {"data": "u", "replicates": 3, "eps": 1, "names": "x"}, source="t.yaml")
    assert cfg.replicates == 3 and cfg.eps == 1.0 and cfg.names == ("x",)  # a scalar is a list of one
    with pytest.raises(ConfigError, match=r"t.yaml: unknown setting\(s\) \['replictes'\] \(did you mean replicates"):
        config_from_mapping(_Cfg, {"replictes": 3}, source="t.yaml")
    message = (
        r"^replicates=many: must be an integer in \[1, 10000\] \(set replicates in t.yaml or --set replicates=10\)$"
    )
    with pytest.raises(ConfigError, match=message):
        config_from_mapping(_Cfg, {"data": "u", "replicates": "many"}, source="t.yaml")
    with pytest.raises(ConfigError, match=r"^flag='yes please': must be true or false"):
        config_from_mapping(_Cfg, {"data": "u", "flag": "yes please"}, source="t.yaml")
    with pytest.raises(ConfigError, match=r"^data=null: required \(a URL\)"):
        config_from_mapping(_Cfg, {}, source="t.yaml")
    assert config_from_mapping(_Cfg, {}, source="t.yaml", partial=True).data is None


def test_keyword_construction_raises_the_same_error_and_models_are_frozen():
    with pytest.raises(ConfigError, match=r"^replicates=0: must be an integer in \[1, 10000\] \(e.g. replicates=10\)$"):
        _Cfg(data="u", replicates=0)
    cfg = _Cfg(data="u")
    with pytest.raises(Exception, match="frozen"):
        cfg.replicates = 5
    assert cfg == _Cfg(data="u") and hash(cfg) == hash(_Cfg(data="u")) and cfg != _Cfg(data="v")


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("n_bins=0", r"n_bins=0: must be an integer in \[2, 10000\]"),
        ("alpha0=-1", r"alpha0=-1: must be a number > 0"),
        ("eps=0.7", r"eps=0.7: must be a number in \(0, 0.5\)"),
        ("class_prior=flat", r"class_prior=flat: must be one of half, empirical"),
        ("beta_l1_ratio=2", r"beta_l1_ratio=2: must be a number in \[0, 1\]"),
    ],
)
def test_pipeline_fields_are_shared(setting, message):
    for name in ("inclusion", "budget", "inclusion_scale"):
        config = get_study(name).Config
        assert issubclass(config, PipelineFields)
        with pytest.raises(ConfigError, match=message):
            config_from_mapping(config, apply_overrides({"data": "x"}, [setting]), source=f"{name}.yaml")


def test_yaml_alias_bomb_is_refused_before_it_expands(tmp_path):
    assert len(BOMB) < 500
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    with pytest.raises(ConfigError, match=rf"bomb.yaml: YAML aliases expand to more than {MAX_YAML_NODES} values"):
        load_yaml(path)
    path.write_text("a: &a [*a]\n")  # recursive
    with pytest.raises(ConfigError, match="YAML aliases expand"):
        load_yaml(path)
    with pytest.raises(ConfigError, match="--set x: YAML aliases expand"):
        apply_overrides({}, ["x=" + BOMB.replace("\n", ", ").join("{}")])
    path.write_text("a: &a [1, 2]\nb: *a\n")  # ordinary aliases still work
    assert load_yaml(path) == {"a": [1, 2], "b": [1, 2]}


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


def test_equal_configs_give_equal_digests():
    inclusion = get_study("inclusion").Config
    a = inclusion(data="x", panels=["all", "top3"])
    b = config_from_mapping(inclusion, {"data": "x", "panels": ("all", "top3")}, source="t")
    assert a == b and config_digest(a.values()) == config_digest(b.values())


def test_engine_config_rejects_bad_engine(tmp_path):
    conf = tmp_path / "e.yaml"
    conf.write_text("stats_engine: gpu\n")
    with pytest.raises(
        ConfigError, match=r"^stats_engine=gpu: must be one of auto, spark, local \(set stats_engine in"
    ):
        load_engine_config(conf)
    conf.write_text("spark_conf: {spark.sql.shuffle.partitions: 8}\nray_num_cpus: 0\n")
    with pytest.raises(ConfigError, match=r"ray_num_cpus=0: must be an integer >= 1 or null"):
        load_engine_config(conf)
    conf.write_text("spark_conf: {spark.sql.shuffle.partitions: 8}\n")
    assert load_engine_config(conf).spark_conf == {"spark.sql.shuffle.partitions": "8"}  # Spark reads strings
    assert EngineConfig() == EngineConfig() and EngineConfig().values()["output"] == "./results"


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_every_study_takes_the_shared_settings_from_their_one_declaration(name):
    if name == "continuous":
        pytest.importorskip("torch")
    config = get_study(name).Config
    assert issubclass(config, StudyFields)  # data and ci_level
    if "replicates" in config.model_fields and name != "ensemble":  # ensemble's replicates are bootstrap resamples
        assert issubclass(config, SplitFields)  # replicates and seed
    if "eps" in config.model_fields:  # the pipeline's hyperparameters, calibrator_input among them
        assert issubclass(config, PipelineFields) and "calibrator_input" in PipelineFields.model_fields


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_every_study_shows_its_settings_and_schema(name):
    if name == "continuous":
        pytest.importorskip("torch")
    shown = study_settings(name)
    assert shown["study"] == name and set(shown) - {"study"} == set(get_study(name).Config.model_fields)
    schema = study_schema(name)
    assert schema["properties"]["study"] == {"const": name, "description": "the study"}
    assert schema["additionalProperties"] is False and json.loads(json.dumps(schema)) == schema
    replicates = schema["properties"].get("replicates", {})
    assert replicates.get("maximum", 0) <= 100_000  # replicates and resamples are capped


@pytest.mark.parametrize(
    ("name", "values"),
    [
        ("budget", {}),
        ("budget", {"mode": "fraction"}),
        ("regime_map", {}),
        ("inclusion", {}),
        ("itc", {}),
        ("narrowband", {}),
        ("ensemble", {}),
    ],
)
def test_the_schema_states_the_replicates_bound_a_run_checks(name, values):
    # `config schema` must refuse what `run` refuses (budget mode and the regime map need two splits), and no more.
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(study_schema(name))
    for replicates in (0, 1, 2):
        by_schema = validator.is_valid({"study": name, **values, "replicates": replicates})
        try:
            get_study(name).Config.from_mapping({**values, "replicates": replicates}, source="t.yaml", partial=True)
            by_run = True
        except ConfigError:
            by_run = False
        assert by_schema == by_run, (name, values, replicates)
    bound = 2 if name == "regime_map" or values == {} and name == "budget" else 1
    assert not validator.is_valid({"study": name, **values, "replicates": bound - 1})
    assert validator.is_valid({"study": name, **values, "replicates": bound})


def test_a_bad_entry_of_a_mapping_setting_names_its_dotted_key():
    ensemble = get_study("ensemble").Config
    message = r"^prices\.full=\[-1, 4\]: must be a list of 2, each a number >= 0 \(set prices\.full in e\.yaml or "
    with pytest.raises(ConfigError, match=message + r"--set prices\.full=\[2\.5, 15\.0\]\)$"):
        config_from_mapping(ensemble, apply_overrides({"data": "x"}, ["prices.full=[-1, 4]"]), source="e.yaml")


def test_cross_field_rules_name_the_setting_to_fix():
    itc = get_study("itc").Config
    with pytest.raises(
        ConfigError, match=r"^synthetic_prior=\[0\.5, 0\.5, 0\.5\]: must hold P\(B\), P\(tie\), P\(A\), summing"
    ):
        itc(data="synthetic:g2", synthetic_prior=[0.5, 0.5, 0.5])
    # The prior is of the three labels, whatever the number of simulated judges (one per tie propensity).
    with pytest.raises(ConfigError, match=r"^synthetic_prior=\[0\.5, 0\.5\]: must be a list of 3, each a number in"):
        itc(data="synthetic:g2", synthetic_prior=[0.5, 0.5])
    one_judge = itc(data="synthetic:g2", synthetic_propensities=[0.0], synthetic_items=40, budgets=[2])
    tasks = get_study("itc").load(one_judge, EngineConfig()).tasks
    assert [t.judge_id for t in tasks] == ["eta=+0.00"] and tasks[0].votes.shape == (40, 2)
    with pytest.raises(ConfigError, match=r"^data=synthetic:g3: must be a dataset URL or synthetic:g2"):
        itc(data="synthetic:g3")


def test_engine_defaults_are_the_same_from_any_folder(tmp_path, monkeypatch):
    # The checkout's conf/local.yaml and no file at all give the CLI one engine (benchmarks build sessions from it).
    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    in_checkout = load_engine_config()
    monkeypatch.chdir(tmp_path)
    assert load_engine_config() == in_checkout == EngineConfig()
    assert in_checkout.spark_conf == {"spark.sql.shuffle.partitions": "8"}
    # A local master keeps the default beside other settings and under an explicit value; a cluster master gets none.
    conf = tmp_path / "e.yaml"
    conf.write_text("spark_conf: {spark.driver.memory: 2g}\n")
    assert load_engine_config(conf).spark_conf == {"spark.sql.shuffle.partitions": "8", "spark.driver.memory": "2g"}
    conf.write_text("spark_conf: {spark.sql.shuffle.partitions: 3}\n")
    assert load_engine_config(conf).spark_conf == {"spark.sql.shuffle.partitions": "3"}
    assert load_engine_config(root / "conf" / "cluster.yaml").spark_conf["spark.sql.shuffle.partitions"] == "64"
    assert EngineConfig(spark_master="spark://host:7077").spark_conf == {}
