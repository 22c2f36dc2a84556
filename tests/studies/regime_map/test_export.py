"""The regime map exports the candidate its recommended menu selected (``judgecal.fcps/v1``), names it in the
Recommendation, and ``judgecal score`` applies it to the dataset as the study evaluated it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judgecal_dist.config import EngineConfig
from judgecal_dist.errors import ConfigError
from judgecal_dist.io.dataset import read_dataset_table, write_dataset
from judgecal_dist.models import model_from_dict, save_model
from judgecal_dist.scoring.apply import score_dataset
from judgecal_dist.studies.regime_map import study as regime_map
from judgecal_dist.studies.regime_map.export import selected_row

POOL = ("J1", "J2", "J3")
_CODE = {"B": 0, "A": 1, "tie": 2}


def _dataset(root: str, n_items: int = 300, seed: int = 11) -> str:
    """Both presentation orders of every item (``J/ab``, ``J/ba`` in the original numbering), ties and missing
    verdicts, two items per group."""
    rng = np.random.default_rng(seed)
    truth = rng.choice(["A", "B"], n_items)
    rows = []
    for i, label in enumerate(truth):
        for j, judge in enumerate(POOL):
            for order in ("ab", "ba"):
                if rng.random() < 0.05:
                    continue
                right = rng.random() < 0.85 - 0.12 * j
                verdict = rng.choice(["tie", label if right else ("B" if label == "A" else "A")], p=[0.1, 0.9])
                rows.append((f"i{i:03d}", f"g{i // 2}", f"{judge}/{order}", 0, str(verdict)))
    verdicts = pd.DataFrame(rows, columns=["item_id", "group_id", "judge_id", "sample", "verdict"]).assign(dataset="d")
    labels = pd.DataFrame({"dataset": "d", "item_id": [f"i{i:03d}" for i in range(n_items)], "label": truth})
    tables = {
        name: pa.Table.from_pandas(f, preserve_index=False) for name, f in (("verdicts", verdicts), ("labels", labels))
    }
    return write_dataset(root, tables, {"adapter": "test"})


def _config(data: str, **changes) -> regime_map.Config:
    settings = dict(
        data=data,
        pool=POOL,
        replicates=2,
        budgets=(50, 150),
        families=("mean_iso", "ridge_iso"),
        main_families=("mean_iso", "ridge_iso"),
        fallbacks=("hierarchical",),
        hybrid_taus=(5.0,),
        jury=False,
        single_judges=False,
    )
    return regime_map.Config(**(settings | changes))


def _run(config: regime_map.Config):
    data = regime_map.load(config, EngineConfig())
    parts = pd.concat([regime_map.run_replicate(data, rep) for rep in regime_map.plan(config, data)], ignore_index=True)
    return data, parts, regime_map.summarise(config, parts, data)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    return _dataset(str(tmp_path_factory.mktemp("fcps-export") / "data"))


@pytest.mark.parametrize("export", ["auto", "table_hierarchical", "hybrid"])
def test_the_exported_model_is_the_selected_candidate_and_scores_as_evaluated(dataset, export, tmp_path):
    config = _config(dataset, export=export)
    data, parts, result = _run(config)
    doc = result.model["model.json"]
    model = model_from_dict(doc)
    row = selected_row(config, parts, export if export != "auto" else _auto_menu(result))
    assert (model.k, doc["path_rule"]) == (int(row["k"]), row["path"])
    assert "model/model.json" in result.recommendation.exported and "judgecal.fcps/v1" in result.recommendation.exported
    if export == "table_hierarchical":
        assert doc["family"]["name"] == "table" and doc["family"]["fallback"] == "hierarchical"
    # The study's own validation MSE of that candidate, recomputed from the exported model on the same block.
    val = data.splits[config.seed].val
    columns = [POOL.index(j.removesuffix("/ab")) for j in model.judge_ids]
    assert val.mse(model.predict(val.codes[:, columns])) == pytest.approx(row["val_mse"], abs=1e-12)
    if export != "hybrid":  # the study scores the hybrid in closed form: equal to rounding, not bit for bit
        assert val.mse(model.predict(val.codes[:, columns])) == row["val_mse"]
    assert model.ignored_judges == [j for j in (f"{p}/ab" for p in POOL) if j not in model.judge_ids] + [
        f"{p}/ba" for p in POOL
    ]
    # score applies it to every item's J/ab verdicts (pivoted here independently of the vote codec).
    url = save_model(model, str(tmp_path / "model.json"))
    score_dataset(url, dataset, str(tmp_path / "out"), engine=EngineConfig(stats_engine="local"))
    rows = pq.read_table(tmp_path / "out" / "items").to_pandas().set_index("item_id")
    verdicts = read_dataset_table(dataset, "verdicts").to_pandas()
    verdicts = verdicts[verdicts["judge_id"].isin(model.judge_ids)]
    wide = verdicts.assign(code=verdicts["verdict"].map(_CODE)).pivot(
        index="item_id", columns="judge_id", values="code"
    )
    codes = wide.reindex(index=rows.index, columns=model.judge_ids).fillna(3).to_numpy(np.int64)
    np.testing.assert_array_equal(rows["p"].to_numpy(), model.predict(codes))


def _auto_menu(result) -> str:
    pair = result.extra["table_vs_scalar"][-1]
    return "scalar" if pair["ci_high"] < 0 else "table" if pair["ci_low"] > 0 else "union"


def test_a_menu_without_an_exportable_family_is_refused(dataset):
    with pytest.raises(
        ConfigError,
        match=r"export=jury: must be one of auto, table, scalar, union, .* \(the jury menu exports no",
    ):
        _config(dataset, export="jury", jury=True)


def test_a_rubric_run_exports_its_candidate_with_the_rubric_encoding(tmp_path):
    from tests.studies.regime_map.test_ties_and_rubric import rubric_config, write_rubric

    root = str(tmp_path / "rubric")
    write_rubric(root)
    config = rubric_config(root, main_families=("ridge_iso", "one_coin_iso"), export="scalar")
    data, parts, result = _run(config)
    model = model_from_dict(result.model["model.json"])
    assert model.encoding["alphabet"] == ["1", "2", "3", "4", "5", "err"] and model.ignored_judges != []
    row = selected_row(config, parts, "scalar")
    val = data.splits[config.seed].val
    columns = [config.pool.index(j) for j in model.judge_ids]
    assert model.family_id == row["family"] and val.mse(model.predict(val.codes[:, columns])) == row["val_mse"]
