"""Spark engine: session, tables, SQL views, and the statistics jobs equal to the in-memory path and to references.

References are independent of the engines: hand-counted cells, brute force per replicate in pandas (one
``calibration_mask`` per seed, filter, ``groupby``), the published LLMBar accuracies.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs import spark as sp
from judgecal_dist.engine.jobs import stats
from judgecal_dist.engine.jobs.local import judge_cells_arrow
from judgecal_dist.engine.sql.query import run_sql
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.dataset import read_dataset_table as read_arrow_table
from judgecal_dist.io.schema import LABELS_SCHEMA, VERDICTS_SCHEMA
from judgecal_dist.splits import calibration_mask, group_keys

pytestmark = pytest.mark.spark

SEEDS = [0, 1, 2, 3, 4]
KEYS = ["replicate", "side", "judge_id", "label", "verdict"]


def write_root(
    root: Path, verdicts: pd.DataFrame, labels: pd.DataFrame, *, parts: int = 2, success: bool = True
) -> str:
    """A dataset root as the io layer stores it: Parquet folders (several parts) plus ``_SUCCESS``."""
    for name, frame, schema in (("verdicts", verdicts, VERDICTS_SCHEMA), ("labels", labels, LABELS_SCHEMA)):
        (root / name).mkdir(parents=True)
        present = pa.schema([schema.field(c) if c in schema.names else pa.field(c, pa.string()) for c in frame])
        for i, chunk in enumerate(np.array_split(np.arange(len(frame)), parts if name == "verdicts" else 1)):
            table = pa.Table.from_pandas(frame.iloc[chunk], schema=present, preserve_index=False)
            pq.write_table(table, root / name / f"part-{i:05d}.parquet")
    if success:
        (root / "_SUCCESS").touch()
    return str(root)


def hand_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Missing verdicts, ties, unlabelled items (null label / no label row), repeated samples, swapped pairs,
    and the same item_id in two datasets with different labels."""
    rows = [
        # dataset, item_id, group_id, judge_id, sample, verdict, score
        ("d1", "p1/ab", "p1", "j1", 0, "A", 0.9),
        ("d1", "p1/ab", "p1", "j1", 1, "A", 0.8),
        ("d1", "p1/ab", "p1", "j1", 2, None, None),
        ("d1", "p1/ab", "p1", "j2", 0, "B", 0.2),
        ("d1", "p1/ba", "p1", "j1", 0, "B", 0.1),
        ("d1", "p1/ba", "p1", "j2", 0, "tie", 0.5),
        ("d1", "t1", "t1", "j1", 0, "tie", None),
        ("d1", "t1", "t1", "j2", 0, "A", None),
        ("d1", "t1", "t1", "j3", 0, None, None),
        ("d1", "u1", "u1", "j1", 0, "A", None),
        ("d1", "u2", "u2", "j2", 0, "B", None),
        ("d1", "x1", "x1", "j1", 0, "A", 3.0),
        ("d1", "x1", "x1", "j3", 0, "A", 5.0),
        ("d2", "x1", "x1", "j1", 0, "A", 1.0),
        ("d2", "x1", "x1", "j1", 1, "B", 2.0),
        ("d2", "m1", "m1", "j2", 0, None, None),
        ("d2", "m1", "m1", "j3", 0, "B", None),
    ]
    verdicts = pd.DataFrame(rows, columns=["dataset", "item_id", "group_id", "judge_id", "sample", "verdict", "score"])
    labels = pd.DataFrame(
        [
            ("d1", "p1/ab", "A"),
            ("d1", "p1/ba", "B"),
            ("d1", "t1", "tie"),
            ("d1", "u1", None),
            ("d1", "x1", "A"),
            ("d2", "x1", "B"),
            ("d2", "m1", "A"),
        ],
        columns=["dataset", "item_id", "label"],
    )
    return verdicts, labels


def random_tables(seed: int = 11) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    items = [f"i{i:03d}" for i in range(150)]
    groups = [f"g{i // 2:03d}" if i < 80 else f"s{i:03d}" for i in range(150)]  # 40 swapped pairs, 70 singletons
    rows = []
    for item, group in zip(items, groups, strict=True):
        for judge in ("ja", "jb", "jc", "jd", "je"):
            for sample in range(2 if judge == "ja" else 1):
                if rng.random() < 0.1:
                    continue  # absent row
                verdict = rng.choice(np.array(["A", "B", "tie", None], dtype=object), p=[0.4, 0.4, 0.1, 0.1])
                score = None if rng.random() < 0.3 else float(rng.integers(1, 6))
                rows.append(("d", item, group, judge, sample, verdict, score))
    verdicts = pd.DataFrame(rows, columns=["dataset", "item_id", "group_id", "judge_id", "sample", "verdict", "score"])
    label = rng.choice(np.array(["A", "B", "tie", None], dtype=object), size=len(items), p=[0.4, 0.4, 0.1, 0.1])
    labels = pd.DataFrame({"dataset": "d", "item_id": items, "label": label}).iloc[:140]  # 10 items without a row
    return verdicts, labels


def sort(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    ordered = frame.assign(**{f"_{k}": frame[k].fillna("~") for k in keys if frame[k].dtype == object})
    by = [f"_{k}" if f"_{k}" in ordered else k for k in keys]
    return ordered.sort_values(by).drop(columns=[c for c in ordered if c.startswith("_")]).reset_index(drop=True)


def sides(group_ids: pd.Series, seed: int, fraction: float) -> np.ndarray:
    groups = group_ids.unique()
    calibration = set(groups[calibration_mask(group_keys(groups), [seed], fraction)[0]])
    return np.where(group_ids.isin(calibration), "calibration", "evaluation")


def brute_judge_cells(verdicts: pd.DataFrame, labels: pd.DataFrame, seeds, fraction) -> pd.DataFrame:
    rows = verdicts.merge(labels[labels["label"].notna()], on=["dataset", "item_id"], how="inner")
    frames = []
    for seed in seeds:
        grouped = rows.assign(side=sides(rows["group_id"], seed, fraction)).groupby(
            ["side", "judge_id", "label", "verdict"], dropna=False
        )
        frames.append(grouped.size().rename("n").reset_index().assign(replicate=seed))
    out = pd.concat(frames, ignore_index=True)
    out["verdict"] = out["verdict"].astype(object).where(out["verdict"].notna(), None)
    return sort(out[KEYS + ["n"]].astype({"replicate": np.int64, "n": np.int64}), KEYS)


def brute_patterns(verdicts, labels, judges, seeds=None, fraction=None, sample=0) -> pd.DataFrame:
    rows = verdicts[verdicts["sample"] == sample]
    wide = rows.pivot(index=["dataset", "item_id"], columns="judge_id", values="verdict").reindex(columns=judges)
    items = rows[["dataset", "item_id", "group_id"]].drop_duplicates().merge(wide, on=["dataset", "item_id"])
    items = items.merge(labels, on=["dataset", "item_id"], how="left")
    symbols = items[judges].astype(object).where(items[judges].notna(), "-")
    frames = []
    for seed in seeds if seeds is not None else [None]:
        side = sides(items["group_id"], seed, fraction) if seed is not None else "all"
        for k in range(1, len(judges) + 1):
            cells = items.assign(pattern=symbols[judges[:k]].agg("|".join, axis=1), side=side, k=k)
            agg = cells.groupby(["side", "k", "pattern"]).agg(
                n=("pattern", "size"),
                label_sum=("label", lambda s: int((s == "A").sum())),
                n_labelled=("label", "count"),
            )
            frames.append(agg.reset_index().assign(replicate=seed))
    out = pd.concat(frames, ignore_index=True).astype({"n": np.int64, "label_sum": np.int64, "n_labelled": np.int64})
    keys = ["replicate", "side", "k", "pattern"] if seeds is not None else ["k", "pattern"]
    out = out.astype({"replicate": np.int64}) if seeds is not None else out
    return sort(out[keys + ["n", "label_sum", "n_labelled"]], keys)


@pytest.fixture(scope="module")
def hand_root(tmp_path_factory) -> str:
    return write_root(tmp_path_factory.mktemp("hand"), *hand_tables(), parts=3)


@pytest.fixture(scope="module")
def random_root(tmp_path_factory) -> str:
    return write_root(tmp_path_factory.mktemp("random"), *random_tables(), parts=4)


@pytest.mark.parametrize("root_name", ["hand_root", "random_root"])
def test_judge_cells_spark_equals_local_equals_brute_force(spark, request, root_name):
    root = request.getfixturevalue(root_name)
    tables = hand_tables() if root_name == "hand_root" else random_tables()
    on_spark = stats.judge_cells(root, SEEDS, 0.4, engine="spark")
    in_memory = stats.judge_cells(root, SEEDS, 0.4, engine="local")
    pd.testing.assert_frame_equal(on_spark, in_memory)
    pd.testing.assert_frame_equal(sort(in_memory, KEYS), brute_judge_cells(*tables, SEEDS, 0.4))


def test_judge_cells_hand_counts(hand_root):
    cells = stats.judge_cells(hand_root, SEEDS, 0.4, engine="local")
    replicate = cells[cells["replicate"] == 3].fillna({"verdict": "-"})
    both_sides = replicate.groupby(["judge_id", "label", "verdict"])["n"].sum()
    # j1 on label A: p1/ab samples 0,1 (A), d1/x1 (A) -> 3 x (A, A); p1/ab sample 2 -> (A, missing).
    assert both_sides[("j1", "A", "A")] == 3 and both_sides[("j1", "A", "-")] == 1
    # d2/x1 (label B) must not take d1/x1's label: j1 votes A and B on it.
    assert both_sides[("j1", "B", "A")] == 1 and both_sides[("j1", "B", "B")] == 2
    # Unlabelled u1 (null label) and u2 (no label row) are not counted; 15 labelled rows in all.
    assert cells.groupby("replicate")["n"].sum().tolist() == [15] * len(SEEDS)
    summary = stats.judge_summary(cells).groupby(["replicate", "judge_id"]).sum(numeric_only=True).loc[3]
    assert summary.loc["j1", ["rows", "votes", "correct"]].tolist() == [8, 6, 5]
    assert summary.loc["j3", ["rows", "votes", "correct"]].tolist() == [3, 2, 1]


def test_judge_cells_on_registered_views(spark, hand_root):
    sp.register_views(spark, hand_root)
    pd.testing.assert_frame_equal(
        stats.judge_cells(spark, SEEDS, 0.4), stats.judge_cells(hand_root, SEEDS, 0.4, engine="local")
    )


@pytest.mark.parametrize("with_replicates", [False, True])
def test_pattern_cells_spark_equals_local_equals_brute_force(spark, random_root, with_replicates):
    judges = ["jc", "ja", "je"]
    seeds, fraction = (SEEDS, 0.5) if with_replicates else (None, None)
    on_spark = stats.pattern_cells(random_root, judges, seeds, fraction, sample=0, engine="spark")
    in_memory = stats.pattern_cells(random_root, judges, seeds, fraction, sample=0, engine="local")
    pd.testing.assert_frame_equal(on_spark, in_memory)
    keys = list(in_memory.columns[:-3])
    pd.testing.assert_frame_equal(sort(in_memory, keys), brute_patterns(*random_tables(), judges, seeds, fraction))


def test_pattern_cells_hand_sample_1(spark, hand_root):
    on_spark = stats.pattern_cells(hand_root, ["j1", "j2"], sample=1, engine="spark")
    pd.testing.assert_frame_equal(on_spark, stats.pattern_cells(hand_root, ["j1", "j2"], sample=1, engine="local"))
    # Sample 1 rows: d1/p1/ab (j1 A, label A) and d2/x1 (j1 B, label B).
    assert on_spark.to_dict("list") == {
        "k": [1, 1, 2, 2],
        "pattern": ["A", "B", "A|-", "B|-"],
        "n": [1, 1, 1, 1],
        "label_sum": [1, 0, 1, 0],
        "n_labelled": [1, 1, 1, 1],
    }


@pytest.mark.parametrize("root_name", ["hand_root", "random_root"])
def test_item_vote_counts_spark_equals_local_equals_pandas(spark, request, root_name):
    root = request.getfixturevalue(root_name)
    verdicts = (hand_tables() if root_name == "hand_root" else random_tables())[0]
    keys = ["dataset", "item_id", "judge_id"]
    on_spark = stats.item_vote_counts(root, engine="spark")
    assert not isinstance(on_spark, pd.DataFrame)  # item-level: the engine leaves it in Spark
    on_spark = sort(on_spark.toPandas(), keys)
    in_memory = stats.item_vote_counts(root, engine="local")
    reference = verdicts.assign(**{f"_{c}": verdicts["verdict"].eq(c) for c in ("A", "B", "tie")})
    reference = (
        reference.groupby(keys)
        .agg(
            n_A=("_A", "sum"),
            n_B=("_B", "sum"),
            n_tie=("_tie", "sum"),
            n_missing=("verdict", lambda s: s.isna().sum()),
            n_score=("score", "count"),
            score_mean=("score", "mean"),
            score_var=("score", lambda s: s.var(ddof=0)),
        )
        .reset_index()
    )
    reference = reference.astype({c: np.int64 for c in ("n_A", "n_B", "n_tie", "n_missing", "n_score")})
    counts_cols = list(in_memory.columns[:8])
    pd.testing.assert_frame_equal(on_spark[counts_cols], in_memory[counts_cols])
    pd.testing.assert_frame_equal(on_spark, in_memory, check_exact=False, rtol=1e-12)
    pd.testing.assert_frame_equal(sort(reference, keys), in_memory, check_exact=False, rtol=1e-12)


def test_generated_panel_spark_equals_local(spark, tmp_path_factory):
    from judgecal_dist.io.synthetic import generate_panel

    root = str(tmp_path_factory.mktemp("generated") / "panel")
    generate_panel(
        root,
        n_items=1000,
        n_judges=6,
        n_samples=2,
        pairs=True,
        tie_rate=0.05,
        label_fraction=0.9,
        scores=True,
        chunk_items=250,
    )
    pd.testing.assert_frame_equal(
        stats.judge_cells(root, range(20), 0.5, engine="spark"), stats.judge_cells(root, range(20), 0.5, engine="local")
    )
    judges = [f"judge-{j:03d}" for j in (4, 0, 2)]
    pd.testing.assert_frame_equal(
        stats.pattern_cells(root, judges, range(5), 0.3, sample=1, engine="spark"),
        stats.pattern_cells(root, judges, range(5), 0.3, sample=1, engine="local"),
    )


@pytest.fixture(scope="module")
def llmbar_root(llmbar_dir, tmp_path_factory) -> str:
    from judgecal_dist.io.ingest import ingest

    root = str(tmp_path_factory.mktemp("llmbar") / "llmbar")
    ingest("llmbar", str(llmbar_dir), root)
    return root


def test_llmbar_spark_equals_local_and_published_accuracy(spark, llmbar_root):
    on_spark = stats.judge_cells(llmbar_root, range(10), 0.5, engine="spark")
    pd.testing.assert_frame_equal(on_spark, stats.judge_cells(llmbar_root, range(10), 0.5, engine="local"))
    # The release's statistics.json: GPT-4/Vanilla correct without swap 95+104+78+35+35, with swap 96+107+81+38+39.
    summary = stats.judge_summary(on_spark).groupby(["replicate", "judge_id"])[["rows", "correct"]].sum()
    assert summary.loc[(7, "GPT-4/Vanilla/ab")].tolist() == [419, 347]
    assert summary.loc[(7, "GPT-4/Vanilla/ba")].tolist() == [419, 361]
    judges = ["GPT-4/Vanilla/ab", "GPT-4/Vanilla/ba", "PaLM2/CoT/ab", "LLaMA2/Vanilla/ab"]
    pd.testing.assert_frame_equal(
        stats.pattern_cells(llmbar_root, judges, range(3), 0.5, engine="spark"),
        stats.pattern_cells(llmbar_root, judges, range(3), 0.5, engine="local"),
    )


def test_run_sql_on_views_matches_published_llmbar_numbers(spark, llmbar_root):
    query = """
        SELECT judge_id, sum(int(verdict = label)) AS correct, count(*) AS n
        FROM verdicts JOIN labels USING (dataset, item_id)
        WHERE item_id LIKE 'Natural/%' AND judge_id LIKE 'GPT-4/Vanilla/%'
        GROUP BY judge_id ORDER BY judge_id
    """
    (result,) = run_sql(spark, query, llmbar_root)
    assert not result.truncated
    assert result.rows.to_dict("list") == {
        "judge_id": ["GPT-4/Vanilla/ab", "GPT-4/Vanilla/ba"],
        "correct": [95, 96],
        "n": [100, 100],
    }


def test_run_sql_writes_parquet_and_returns_a_preview(spark, random_root, tmp_path):
    out = tmp_path / "result"
    (preview,) = run_sql(spark, "SELECT * FROM verdicts", random_root, out=str(out), limit=5)
    assert len(preview.rows) == 5 and preview.truncated and list(preview.rows.columns) == VERDICTS_SCHEMA.names
    assert pq.read_table(out).num_rows == len(random_tables()[0])
    with pytest.raises(InputError, match=r"sql: .*already exists"):
        run_sql(spark, "SELECT 1 AS x", random_root, out=str(out))


@pytest.mark.parametrize(
    ("query", "match"),
    [
        ("SELECT * FROM nowhere", r"^sql: 'nowhere' is not a view of this dataset; the views are labels, verdicts$"),
        ("SELEC judge_id FROM verdicts", r"^sql: \[PARSE_SYNTAX_ERROR\]"),
        ("SELECT no_such_column FROM verdicts", r"^sql: \[UNRESOLVED_COLUMN"),
        ("SELECT 1; SELECT nope FROM verdicts", r"^sql: statement 2: \[UNRESOLVED_COLUMN"),
        (" ; -- nothing\n", r"^sql: no statement"),
    ],
)
def test_run_sql_errors(spark, random_root, query, match):
    with pytest.raises(InputError, match=match) as info:
        run_sql(spark, query, random_root)
    assert "\n" not in str(info.value)


def test_register_views_drops_views_the_root_lacks(spark, tmp_path, hand_root):
    root = Path(write_root(tmp_path / "with_judges", *hand_tables()))
    (root / "judges").mkdir()
    pq.write_table(pa.table({"judge_id": ["j1", "j2", "j3"], "family": ["f", "f", "g"]}), root / "judges" / "p.parquet")
    assert sp.register_views(spark, str(root)) == ["verdicts", "labels", "judges"]
    assert spark.sql("SELECT count(*) AS n FROM judges").first().n == 3
    assert sp.register_views(spark, hand_root) == ["verdicts", "labels"]
    assert not spark.catalog.tableExists("judges")


def test_read_table_contract_and_defaults(spark, tmp_path):
    verdicts, labels = hand_tables()
    root = write_root(tmp_path / "lean", verdicts.drop(columns=["group_id", "sample", "score"]), labels)
    frame = sp.read_table(spark, root, "verdicts")
    assert frame.columns == VERDICTS_SCHEMA.names
    assert [f.dataType.simpleString() for f in frame.schema][:5] == ["string"] * 4 + ["int"]
    on_spark = sort(frame.toPandas(), ["dataset", "item_id", "judge_id", "verdict"])
    in_memory = sort(read_arrow_table(root, "verdicts").to_pandas(), ["dataset", "item_id", "judge_id", "verdict"])
    pd.testing.assert_frame_equal(on_spark, in_memory)
    assert (on_spark["group_id"] == on_spark["item_id"]).all() and (on_spark["sample"] == 0).all()
    # The streamed in-memory path applies the same default (group_id = item_id) as Spark.
    pd.testing.assert_frame_equal(
        stats.judge_cells(root, SEEDS, 0.5, engine="spark"), stats.judge_cells(root, SEEDS, 0.5, engine="local")
    )


def test_judge_cells_of_in_memory_tables_equal_the_streamed_scan(random_root):
    verdicts = read_arrow_table(random_root, "verdicts")
    labels = read_arrow_table(random_root, "labels")
    pd.testing.assert_frame_equal(
        judge_cells_arrow(verdicts, labels, SEEDS, 0.5), stats.judge_cells(random_root, SEEDS, 0.5, engine="local")
    )


def test_read_table_errors(spark, tmp_path):
    verdicts, labels = hand_tables()
    with pytest.raises(InputError, match=r"_SUCCESS: not a committed dataset"):
        sp.read_table(spark, write_root(tmp_path / "unfinished", verdicts, labels, success=False), "verdicts")
    with pytest.raises(InputError, match=r"missing required column\(s\) \['judge_id'\]"):
        sp.read_table(spark, write_root(tmp_path / "nojudge", verdicts.drop(columns="judge_id"), labels), "verdicts")
    root = write_root(tmp_path / "ok", verdicts, labels)
    with pytest.raises(InputError, match=r"judges: table not in dataset"):
        sp.read_table(spark, root, "judges")
    extra = write_root(tmp_path / "extra", verdicts, labels.assign(note="x"))
    with pytest.raises(InputError, match=r"labels: unknown column\(s\) \['note'\]"):
        sp.read_table(spark, extra, "labels")
    with pytest.raises(InputError, match=r"labels: unknown column\(s\) \['note'\]"):
        read_arrow_table(extra, "labels")


@pytest.mark.parametrize("engine", ["spark", "local"])
def test_unknown_category_is_an_input_error(spark, tmp_path, engine):
    verdicts, labels = hand_tables()
    verdicts.loc[3, "verdict"] = "C"
    root = write_root(tmp_path / "bad", verdicts, labels)
    with pytest.raises(InputError, match=r"verdicts: verdict: .*category outside"):
        stats.judge_cells(root, SEEDS, 0.5, engine=engine)
    with pytest.raises(InputError, match=r"verdicts: verdict: .*category outside"):
        stats.pattern_cells(root, ["j2"], engine=engine)


def test_auto_engine_uses_the_row_threshold(spark, hand_root, caplog):
    stats._SAID.clear()  # the choice is logged once per source and limit in a process
    with caplog.at_level(logging.INFO, logger="judgecal_dist.engine.jobs.stats"):
        assert stats.choose_engine(hand_root) == "local"
        assert stats.choose_engine(hand_root, config=EngineConfig(local_max_rows=10)) == "spark"
        # 17 rows at LOCAL_BYTES_PER_ROW: 4352 bytes fit 4.4e-6 GB, not 4.3e-6
        assert stats.choose_engine(hand_root, config=EngineConfig(local_memory_gb=4.4e-6)) == "local"
        assert stats.choose_engine(hand_root, config=EngineConfig(local_memory_gb=4.3e-6)) == "spark"
    assert "auto: 17 verdict rows; in memory up to 10 = local_max_rows 10" in caplog.text
    assert "GB (a quarter of the RAM) at 256 B/row" in caplog.text
    with pytest.raises(ConfigError, match=r"engine: must be one of"):
        stats.choose_engine(hand_root, engine="dask")
    with pytest.raises(ConfigError, match=r"'local' needs a dataset URL"):
        stats.choose_engine(spark, engine="local")


def test_session_source_needs_views(spark):
    for view in ("verdicts", "labels", "judges", "items"):
        spark.catalog.dropTempView(view)
    with pytest.raises(InputError, match=r"call register_views\(spark, url\) first"):
        stats.judge_cells(spark, SEEDS, 0.5)


def test_get_session_reuses_the_active_session(spark):
    again = sp.get_session(conf={"spark.sql.shuffle.partitions": "3"})
    assert again is spark and spark.conf.get("spark.sql.shuffle.partitions") == "3"
    spark.conf.set("spark.sql.shuffle.partitions", "4")
    assert spark.conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    assert spark.sparkContext.getConf().get("spark.ui.enabled") == "false"


def test_spark_url_maps_s3_to_s3a():
    assert sp.spark_url("s3://bucket/data/verdicts") == "s3a://bucket/data/verdicts"
    assert sp.spark_url("file:///tmp/x") == "file:///tmp/x"
