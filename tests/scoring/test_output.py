"""``judgecal score`` owns its output: a marked folder, staged writes promoted file by file, S3 included.

Runs on a local folder and on moto's S3 server on loopback (through s3fs, as a cluster reaches S3), with the
Spark path (tasks write the scored items through fsspec) and the in-process path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.results.store import RunStore
from judgecal_dist.errors import InputError
from judgecal_dist.scoring.apply import MARKER, score_dataset
from tests.scoring.support import ITEMS, expected_p, model_json, write_arena, write_run

OTHER = {"j1": 2.0, "j2": 0.5, "j3": 0.0}


@pytest.fixture(scope="module")
def arena(tmp_path_factory) -> str:
    return write_arena(str(tmp_path_factory.mktemp("arena") / "data"))


def _s3_options(endpoint: str) -> dict:
    # Credentials go in the options: Spark's Python workers forked before the server's fixture ran lack its env.
    return {
        "endpoint_url": endpoint,
        "key": os.environ["AWS_ACCESS_KEY_ID"],
        "secret": os.environ["AWS_SECRET_ACCESS_KEY"],
    }


def _items_p(url: str, options: dict) -> pd.Series:
    import pyarrow.parquet as pq
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)  # a fresh client: no cached listing or ETag
    items = pq.read_table(f"{url.removeprefix('s3://')}/items", filesystem=fs).to_pandas()
    return items.set_index("item_id")["p"].sort_index()


@pytest.mark.s3
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_s3_output_commits_reruns_and_replaces_only_its_files(engine, arena, tmp_path, s3_server, s3_bucket, spark):
    import s3fs

    options = _s3_options(s3_server)
    config = EngineConfig(stats_engine=engine, storage_options=options)
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
    out = f"{s3_bucket}/scores"
    run = write_run(tmp_path / "run", model_json())
    first = score_dataset(run, arena, out, engine=config)
    names = sorted(f.removeprefix(out.removeprefix("s3://") + "/") for f in fs.find(out))
    assert {"summary.json", "figures/win_rates.png", "_SUCCESS", MARKER} <= set(names)
    assert not [n for n in names if n.startswith(("_tmp/", "_LEASE"))]
    marker = json.loads(fs.cat_file(f"{out}/{MARKER}"))
    assert sorted(marker["files"]) == sorted(n for n in names if n not in (MARKER, "_SUCCESS"))
    np.testing.assert_allclose(_items_p(out, options), expected_p().sort_index(), rtol=0, atol=1e-12)
    assert first["counts"]["items"] == len(ITEMS)

    again = score_dataset(run, arena, out, engine=config)
    assert again["skipped"] and again["datasets"] == first["datasets"]

    fs.invalidate_cache()
    fs.pipe(f"{out}/NOTES.txt", b"mine")  # a user's file beside score's: left alone
    other = write_run(tmp_path / "other", model_json(OTHER))
    score_dataset(other, arena, out, engine=config, overwrite=True)
    np.testing.assert_allclose(_items_p(out, options), expected_p(OTHER).sort_index(), rtol=0, atol=1e-12)
    fs.invalidate_cache()
    assert fs.cat_file(f"{out}/NOTES.txt") == b"mine"
    after = sorted(f.removeprefix(out.removeprefix("s3://") + "/") for f in fs.find(out))
    assert len([n for n in after if n.startswith("items/")]) == len([n for n in names if n.startswith("items/")])
    assert json.loads(fs.cat_file(f"{out}/{MARKER}"))["inputs"]["model"].endswith("other/model/calibration.json")


@pytest.mark.s3
def test_s3_output_in_a_missing_bucket_is_refused_before_anything_is_read(tmp_path, s3_server, s3_bucket):
    import s3fs

    options = _s3_options(s3_server)
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
    buckets = sorted(fs.ls(""))
    missing = f"{s3_bucket}-absent"
    # Neither model nor data exists: the bucket is named first, so nothing was read before the refusal.
    with pytest.raises(InputError, match=rf"{missing}/scores: bucket '{missing[5:]}' does not exist.*never creates"):
        score_dataset(
            str(tmp_path / "no-run"),
            str(tmp_path / "no-data"),
            f"{missing}/scores",
            engine=EngineConfig(stats_engine="local", storage_options=options),
        )
    fs.invalidate_cache()
    assert sorted(fs.ls("")) == buckets  # no bucket was created


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_spark_and_local_write_the_same_rows(engine, arena, tmp_path, spark):
    run = write_run(tmp_path / "run", model_json())
    out = str(tmp_path / engine)
    score_dataset(run, arena, out, engine=EngineConfig(stats_engine=engine))
    items = pd.read_parquet(Path(out) / "items").sort_values("item_id").reset_index(drop=True)
    assert items.columns.tolist()[:9] == [
        "item_id",
        "group_id",
        "label",
        "n_votes",
        "score",
        "p",
        "verdict",
        "in_calibration",
        "set_alpha_0_1",
    ]
    assert items["in_calibration"].isna().all()  # the model records no calibration items
    assert items["n_votes"].tolist() == [3, 2, 2, 2, 3, 0]  # i1..i6: ties and absent verdicts are no votes
    assert (items["verdict"].isna() == items["n_votes"].eq(0)).all()


def test_foreign_folder_is_refused_untouched(arena, tmp_path):
    out = tmp_path / "mine"
    (out / "items").mkdir(parents=True)
    (out / "items" / "keep.parquet").write_bytes(b"not score's")
    (out / "summary.json").write_text("{}")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    run = write_run(tmp_path / "run", model_json())
    with pytest.raises(
        InputError, match=rf"{out}: holds 2 file\(s\) that judgecal score did not write .* no _JUDGECAL_SCORE marker"
    ):
        score_dataset(run, arena, str(out), engine=EngineConfig(stats_engine="local"))
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_foreign_file_among_score_results_is_refused(arena, tmp_path):
    run = write_run(tmp_path / "run", model_json())
    out = tmp_path / "out"
    engine = EngineConfig(stats_engine="local")
    score_dataset(run, arena, str(out), engine=engine)
    (out / "items" / "dataset=arena" / "extra.parquet").write_bytes(b"someone else's")
    other = write_run(tmp_path / "other", model_json(OTHER))
    with pytest.raises(InputError, match=r"1 file\(s\) among score's results were not written by it"):
        score_dataset(other, arena, str(out), engine=engine, overwrite=True)
    assert (out / "_SUCCESS").exists() and (out / "items" / "dataset=arena" / "extra.parquet").exists()


def test_refused_table_leaves_no_new_folder_and_keeps_an_old_one(arena, tmp_path, spark):
    """The Spark path checks judges after its scan: the staged rows are removed, the committed ones kept."""
    engine = EngineConfig(stats_engine="spark")
    two = write_run(tmp_path / "two", model_json({"j1": 1.0, "j2": 0.5}))  # j3 is unknown to it
    fresh = tmp_path / "fresh"
    with pytest.raises(InputError, match="not in the model"):
        score_dataset(two, arena, str(fresh), engine=engine)
    assert not fresh.exists()
    out = tmp_path / "out"
    score_dataset(write_run(tmp_path / "run", model_json()), arena, str(out), engine=engine)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(InputError, match="not in the model"):
        score_dataset(two, arena, str(out), engine=engine, overwrite=True)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_store_promotes_only_reported_files_and_skips_writer_bookkeeping(tmp_path):
    store = RunStore(str(tmp_path / "run"))
    staged = store.stage("items")
    root = Path(staged)
    (root / "dataset=a").mkdir(parents=True)
    for name in ("dataset=a/part-0.parquet", "dataset=a/part-1.parquet", "_SUCCESS", "dataset=a/.part-0.crc"):
        (root / name).write_bytes(name.encode())
    assert store.staged_files(staged) == ["dataset=a/part-0.parquet", "dataset=a/part-1.parquet"]
    assert store.promote(staged, "items", ["dataset=a/part-0.parquet"]) == ["items/dataset=a/part-0.parquet"]
    assert (tmp_path / "run" / "items" / "dataset=a" / "part-0.parquet").read_bytes() == b"dataset=a/part-0.parquet"
    assert not (tmp_path / "run" / "items" / "dataset=a" / "part-1.parquet").exists()
    store.discard(staged)
    assert not root.exists()
    store.remove_files(["items/dataset=a/part-0.parquet", "items/never-written"])
    assert store.list_files() == ["_LEASE.json"]
    store.abandon(remove_empty=True)
    assert not (tmp_path / "run").exists()
    with pytest.raises(ValueError, match="not a staging folder"):
        store.promote(str(tmp_path / "elsewhere"), "items")


def test_a_marker_listing_paths_out_of_the_folder_is_refused(arena, tmp_path):
    run = write_run(tmp_path / "run", model_json())
    out = tmp_path / "out"
    engine = EngineConfig(stats_engine="local")
    score_dataset(run, arena, str(out), engine=engine)
    (tmp_path / "precious.txt").write_text("keep")
    marker = json.loads((out / MARKER).read_text())
    marker["files"].append("items/../../precious.txt")
    (out / MARKER).write_text(json.dumps(marker))
    other = write_run(tmp_path / "other", model_json(OTHER))
    with pytest.raises(InputError, match=r"_JUDGECAL_SCORE: not a judgecal\.score-output/v1 marker"):
        score_dataset(other, arena, str(out), engine=engine)
    assert (tmp_path / "precious.txt").read_text() == "keep"
