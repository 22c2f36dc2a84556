"""The output folder of ``judgecal score``: its ownership marker, staging of the item rows and the commit.

Every scorer (:mod:`judgecal_dist.scoring.apply` for panel pipelines and table kinds,
:mod:`judgecal_dist.scoring.continuous` for correctors) claims, stages and replaces its output through these
functions, so a folder is score's by one marker and one rule (layout and ownership in :mod:`~judgecal_dist.scoring.apply`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from judgecal_dist.engine.results.store import LEASE, SUCCESS, RunStore
from judgecal_dist.errors import InputError
from judgecal_dist.io.ownership import Ownership

__all__ = [
    "OUTPUT_FORMAT",
    "MARKER",
    "MARKER_FORMAT",
    "OWN_NAMES",
    "OWNER",
    "Output",
    "brief_counts",
    "inspect_output",
    "ownership_marker",
    "stage_items",
    "replace_outputs",
]

_T = TypeVar("_T")

OUTPUT_FORMAT = "judgecal.scores/v1"
#: The marker file that makes a folder score's own, and its format.
MARKER, MARKER_FORMAT = "_JUDGECAL_SCORE", "judgecal.score-output/v1"
#: Top-level names score writes; a marked folder's foreign files under them are refused, elsewhere left alone.
OWN_NAMES = ("items/", "summary/", "figures/", "summary.json", SUCCESS)
OWNER = Ownership(MARKER, MARKER_FORMAT, "score", "--output", OWN_NAMES)


# -- -----------------------------------------------------------------------------------------
def stage_items(store: RunStore, output: Output, write: Callable[[str], _T]) -> tuple[str, _T]:
    """Claim the output folder (score's marker, unless it is already score's), stage ``items`` and ``write`` into it.

    On any failure the staged folder, a marker this call wrote and a folder this call created are removed, so a
    failed score leaves the output as it found it. Returns the staged folder and what ``write`` returned.
    """
    if output.marker is None:  # claim the folder: from here on, what is in it is score's
        store.write_json(MARKER, ownership_marker(None, []))
    staged = store.stage("items")
    try:
        return staged, write(staged)
    except BaseException:
        store.discard(staged)
        if output.marker is None:
            store.remove_files([MARKER])
        store.abandon(remove_empty=output.new)
        raise


def replace_outputs(store: RunStore, output: Output, staged: str, written: list[str], others: list[str]) -> list[str]:
    """The first half of the commit: readers stop trusting the folder (``_SUCCESS`` withdrawn), the marker lists
    the old and the new files (staged items, and ``others`` that the caller writes next), the old ones go and the
    staged items come into place; returns the new file list."""
    new_files = {f"items/{f}" for f in written} | set(others)
    old_files = set(output.marker.get("files", [])) if output.marker else set()
    store.reopen()
    store.write_json(
        MARKER, ownership_marker(None, sorted(old_files | new_files))
    )  # a crash from here on leaves it ours
    store.remove_files(sorted(old_files - new_files - {MARKER, SUCCESS}))
    store.promote(staged, "items", written)
    return sorted(new_files)


@dataclass(frozen=True)
class Output:
    """What an output folder holds before score writes: nothing (``new``), or its marker's content."""

    new: bool
    marker: dict[str, Any] | None


def ownership_marker(inputs: dict[str, Any] | None, files: list[str]) -> dict[str, Any]:
    # inputs None = a score is being written (or failed): no rerun takes it for committed.
    return OWNER.document(files, inputs=inputs)


def inspect_output(store: RunStore) -> Output:
    """The output folder's state; refuses a folder holding files score did not write (nothing is touched)."""
    files = [f for f in store.list_files() if f != LEASE]  # the lease is the store's own (a live one conflicts)
    marker = OWNER.read(store.url, files, store.read_bytes)
    if marker is None:
        return Output(new=not store.fs.exists(store.path), marker=None)
    mine = set(marker["files"]) | {MARKER, SUCCESS}
    foreign = [f for f in files if f not in mine and not f.startswith("_tmp/") and f.startswith(OWN_NAMES)]
    if foreign:
        raise InputError(
            f"{store.url}: {len(foreign)} file(s) among score's results were not written by it (e.g. "
            f"{foreign[:3]}); move them out of the folder (score never deletes files it did not write)"
        )
    return Output(new=False, marker=marker)


def brief_counts(counts: dict[str, Any], most: int = 5) -> dict[str, Any]:
    """``counts`` for the console: a list of more than ``most`` names (e.g. a hundred judges the model ignored)
    becomes its length and first names; summary.json in the results keeps every name."""
    return {
        key: {"count": len(v), "first": v[:3], "all_in": "summary.json"} if isinstance(v, list) and len(v) > most else v
        for key, v in counts.items()
    }
