"""One reader, one vote codec: the old decoders are gone, every vote-building call site uses the codec, and the
vote codes, ``TABLES``, ``SUCCESS``, the column defaults and the dataset chooser are defined once (issue 20).

Nothing is patched: the modules are imported and their names compared, and the package's source is searched the
way ``grep`` would.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

import judgecal_dist
from judgecal_dist.engine.votes import codec
from judgecal_dist.engine.votes import spark as codec_spark
from judgecal_dist.io import dataset as io_dataset
from judgecal_dist.io.schema import VERDICT_CATEGORIES

#: Files outside the codec's homes that still match verdict strings, with how many matches they hold (the scan
#: below); each may only shrink (empty: the notebook API's own coding went with its rework).
VERDICT_MATCHING_ALLOWED: dict[str, int] = {}

PACKAGE = Path(judgecal_dist.__file__).parent
SOURCES = {path.relative_to(PACKAGE.parent).as_posix(): path.read_text() for path in PACKAGE.rglob("*.py")}


@pytest.mark.parametrize("module", ["judgecal_dist.engine.item_votes", "judgecal_dist.engine.item_votes_scan"])
def test_the_old_decoder_modules_are_gone(module):
    assert importlib.util.find_spec(module) is None


@pytest.mark.parametrize(
    ("module", "names"),
    [
        # the in-memory decoder, the JVM packing and the second scan
        (
            "judgecal_dist.engine.jobs.local",
            [
                "read_arrow_table",
                "contract_columns",
                "dataset_root",
                "count_rows",
                "_LabelLookup",
                "_group_keys_of",
            ],
        ),
        ("judgecal_dist.engine.jobs.spark", ["_verdict_slot", "item_votes_spark"]),
        ("judgecal_dist.scoring.apply", ["item_votes_arrow", "item_votes_scan"]),
        ("judgecal_dist.scoring.artifact", ["VOTE_CODES"]),
        ("judgecal_dist.engine.onepass.sources", ["_pack_partition", "DENSE_LABEL_SHARE", "votes_from_blocks"]),
        ("judgecal_dist.engine.jobs.ds_spark", ["binary_votes"]),
    ],
)
def test_old_decoders_and_readers_are_deleted(module, names):
    loaded = importlib.import_module(module)
    # a name the module imports from the codec (and calls) is not a second definition; one it defines is
    defined = [n for n in names if n in vars(loaded) and getattr(vars(loaded)[n], "__module__", module) == module]
    assert defined == []


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("judgecal_dist.engine.jobs.panel", ["encode"]),
        ("judgecal_dist.engine.jobs.local", ["encode", "LabelIndex", "verdict_patterns", "category_codes"]),
        ("judgecal_dist.engine.jobs.spark", ["LabelIndex", "unpack", "verdict_patterns"]),
        ("judgecal_dist.engine.onepass.sources", ["item_votes_spark", "dense_votes_spark", "from_binary_column"]),
        ("judgecal_dist.engine.jobs.ds_spark", ["item_votes_spark", "unpack", "block_columns"]),
        # scoring.items reaches the Spark codec through engine.jobs.scorer (the base install has no pyspark): see below
        ("judgecal_dist.scoring.items", ["encode", "ItemVotes"]),
        ("judgecal_dist.scoring.kernel", ["unpack"]),
        # verdict and label strings held in pandas are coded by the codec too
        ("judgecal_dist.engine.jobs.stats", ["codes_of", "binary_codes"]),
        ("judgecal_dist.scoring.summary", ["codes_of"]),
        ("judgecal_dist.models.fcps", ["codes_of", "binary_codes"]),
        ("judgecal_dist.models.davidson", ["codes_of", "outcome_signs", "verdicts_of_signs"]),
        ("judgecal_dist.studies.itc.data", ["outcome_signs"]),
    ],
)
def test_every_vote_building_module_holds_the_codec_itself(module, names):
    """Each call site's name is the codec's own object (an import), not a look-alike defined there."""
    loaded = importlib.import_module(module)
    owners = {**vars(codec), **vars(codec_spark)}
    assert {n: vars(loaded).get(n) is owners[n] for n in names} == dict.fromkeys(names, True)


def test_the_call_sites_call_the_codec():
    """The functions that build votes name the codec's functions in their code (what they call)."""
    from judgecal_dist.engine.jobs import local, panel

    assert "encode" in panel._load.__code__.co_names
    assert "encode" in local.batch_cells.__code__.co_names
    assert {"encode", "verdict_patterns"} <= set(local.pattern_items_arrow.__code__.co_names)
    assert "encode" in codec_spark.partial_items.__code__.co_names
    assert "encode" in codec.item_votes.__code__.co_names
    # score's Spark path reaches the codec's scan through the engine's scorer (scoring imports no pyspark)
    from judgecal_dist.engine.jobs import scorer

    assert "item_votes_spark" in scorer.item_votes.__code__.co_names
    assert vars(scorer)["item_votes_spark"] is codec_spark.item_votes_spark


def _definitions(name: str) -> list[str]:
    """Files of the package that assign ``name`` at module level (``NAME = ...`` or ``NAME: type = ...``)."""
    pattern = re.compile(rf"^{name}\s*(:[^=\n]*)?=", re.MULTILINE)
    return sorted(path for path, text in SOURCES.items() if pattern.search(text))


@pytest.mark.parametrize(
    "name",
    [
        "VERDICT_CODES",
        "MISSING_CODE",
        "UNKNOWN_CODE",
        "VOTE_A",
        "VOTE_B",
        "VOTE_CODING",
        "TABLES",
        "SUCCESS",
        "COLUMN_DEFAULTS",
        "FREE_TABLES",
    ],
)
def test_codes_tables_and_markers_are_defined_once_in_io_schema(name):
    assert _definitions(name) == ["judgecal_dist/io/schema.py"]


def test_pattern_limits_are_defined_once_each_under_distinct_names():
    assert _definitions("MAX_VERDICT_PATTERN_JUDGES") == ["judgecal_dist/engine/votes/codec.py"]
    assert _definitions("MAX_PATTERN_JUDGES") == []


def test_no_vote_coding_literal_outside_io_schema():
    literal = re.compile(r"""["']A["']\s*:\s*1\s*,\s*["']B["']\s*:\s*0|["']B["']\s*:\s*0\s*,\s*["']A["']\s*:\s*1""")
    assert sorted(p for p, text in SOURCES.items() if literal.search(text)) == ["judgecal_dist/io/schema.py"]


def test_one_dataset_chooser():
    assert _definitions_of_function("choose_dataset") == ["judgecal_dist/io/dataset.py"]
    # its message is written in one place: every other module calls it
    message = "choose one with dataset="
    assert sorted(p for p, text in SOURCES.items() if message in text) == ["judgecal_dist/io/dataset.py"]
    assert io_dataset.choose_dataset(["b", "a", "b"], "a", where="x") == "a"


def _definitions_of_function(name: str) -> list[str]:
    pattern = re.compile(rf"^def {name}\(", re.MULTILINE)
    return sorted(path for path, text in SOURCES.items() if pattern.search(text))


def test_one_dataset_reader():
    """Reading a stored table is io's: nobody else opens a table folder with pyarrow.dataset or a glob.

    io.dataset lists a table's parts with ``table_parts`` (hidden entries skipped, foreign ones refused); the run
    history globs its own partitioned tables, which are no dataset.
    """
    opens = re.compile(r"pads\.dataset\(f?\"?\{?root|\.glob\([^)]*\*\.parquet")
    assert sorted(p for p, text in SOURCES.items() if opens.search(text)) == ["judgecal_dist/history/store.py"]
    assert "def table_parts(" in SOURCES["judgecal_dist/io/dataset.py"]


# -- verdict strings are matched by the codec only --------------------------------------------------------------
#: Where verdict strings may be named as a coding or matched: their definition and the codec.
CODEC_HOMES = ("judgecal_dist/io/schema.py", "judgecal_dist/engine/votes/")
#: Methods that match a column against values (pandas, numpy, Spark).
_MATCHING_METHODS = {"isin", "eq", "ne", "map", "replace"}


def _is_verdict(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in VERDICT_CATEGORIES


def _is_verdicts(node: ast.AST) -> bool:
    """A verdict string, a list/tuple/set of them, or a dict keyed by one (a coding)."""
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return bool(node.elts) and all(_is_verdict(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return any(k is not None and _is_verdict(k) for k in node.keys)
    return _is_verdict(node)


def verdict_matches(text: str) -> list[tuple[int, str]]:
    """(line, code) of every place ``text`` codes or matches verdict strings itself: a comparison with ``"A"``,
    ``"B"`` or ``"tie"`` (``==``, ``!=``, ``in``), ``isin`` / ``eq`` / ``map`` / ``replace`` with them, or a dict with
    two or more of them as keys (a coding). Writing a verdict (``np.where(p > 0.5, "A", "B")``) is not matching."""
    out = []
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.Compare)
            and any(_is_verdicts(n) for n in (node.left, *node.comparators))
            or (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _MATCHING_METHODS
                and any(_is_verdicts(a) for a in node.args)
            )
            or isinstance(node, ast.Dict)
            and sum(k is not None and _is_verdict(k) for k in node.keys) >= 2
        ):
            out.append((node.lineno, ast.unparse(node)))
    return sorted(set(out))


def test_no_verdict_string_is_matched_outside_the_codec():
    found = {
        path: matches
        for path, text in sorted(SOURCES.items())
        if not path.startswith(CODEC_HOMES) and (matches := verdict_matches(text))
    }
    offending = [
        f"{path}:{line}: {code}"
        for path, matches in found.items()
        if len(matches) > VERDICT_MATCHING_ALLOWED.get(path, 0)
        for line, code in matches
    ]
    assert not offending, "verdict strings matched outside the codec (use engine.votes.codec):\n" + "\n".join(offending)
    stale = sorted(set(VERDICT_MATCHING_ALLOWED) - set(found))
    assert not stale, f"no verdict matching left: remove {stale} from VERDICT_MATCHING_ALLOWED"


@pytest.mark.parametrize(
    "planted",
    [
        'x == "A"',
        '"B" != x',
        'x in ("A", "B")',
        'frame["label"].isin(["A", "B"])',
        'frame["verdict"].map({"A": 1, "tie": 0, "B": -1})',
        'F.col("label") == "tie"',
        'F.col("label").isin("A", "B")',
    ],
)
def test_the_scan_finds_a_planted_match(tmp_path, planted):
    # a real module of the package, with one match planted in a copy of it
    probe = tmp_path / "summary.py"
    clean = SOURCES["judgecal_dist/scoring/summary.py"]
    probe.write_text(clean + f"\n\ndef planted(x, frame, F):\n    return {planted}\n")
    assert verdict_matches(clean) == []
    found = verdict_matches(probe.read_text())
    assert {line for line, _ in found} == {len(clean.splitlines()) + 4}


def test_the_scan_leaves_writing_verdicts_and_records_alone():
    text = 'v = np.where(p > 0.5, "A", "B")\nrow = {"tie": 3, "first": 1}\nname = "A"\n'
    assert verdict_matches(text) == []
