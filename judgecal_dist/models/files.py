"""Reading and writing model documents: one JSON file per model, checked in full when read, never a pickle.

Where a model lives: a committed run folder's ``model/model.json`` (every study and ``judgecal fit`` export their
recommended model there), or any ``.json`` URL. A run folder of an older version holding only
``model/calibration.json`` (``judgecal.calibration/v2``: one-coin + beta) is read too, converted to a
``judgecal.binary-pipeline/v1`` pipeline with the same numbers (a log line says so).

A refusal is one :class:`~judgecal_dist.errors.InputError` line ``<url>: <field>: <what is wrong>``: the field is
the dotted path of the first bad value (``aggregator.weights.2``), so a hand-edited or truncated file is never
scored.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from judgecal_dist.engine.results.store import RunStore
from judgecal_dist.errors import InputError
from judgecal_dist.io.filesystem import open_fs
from judgecal_dist.io.records import json_depth, to_json
from judgecal_dist.models.bounds import checked
from judgecal_dist.models.documents import KINDS, LEGACY_FORMAT

__all__ = ["MODEL_FILE", "LEGACY_FILE", "model_from_dict", "load_model", "save_model", "model_document"]

log = logging.getLogger(__name__)

#: Where a run folder keeps the model it recommends.
MODEL_FILE = "model/model.json"
#: The one-coin + beta calibration of earlier versions (``judgecal.calibration/v2``), still read.
LEGACY_FILE = "model/calibration.json"
#: What a model document may be before it is parsed: its JSON nests a few levels (FCPS cells: 6), and its largest
#: part is the fingerprint of the fitted items; beyond these it is not a model (and would exhaust the parser).
MAX_DOCUMENT_DEPTH = 32
MAX_DOCUMENT_BYTES = 1 << 30
#: Formats that earlier versions wrote and that no scorer applies (the study that writes them exports a kind now).
_RETIRED = {
    "judgecal.escalation/v1": "rerun the ensemble study with this version",
    "judgecal.davidson/v1": "rerun the itc study with this version (it exports judgecal.davidson/v2)",
}


def model_document(model: Any) -> dict[str, Any]:
    """The JSON document of a model built by this package (what :func:`save_model` writes)."""
    doc = getattr(model, "document", None)
    if isinstance(model, Mapping):
        doc = dict(model)
    if not isinstance(doc, dict) or not doc:
        raise TypeError(f"save_model: expected a model of judgecal_dist.models or its document, got {type(model)}")
    return doc


def model_from_dict(
    state: Any, *, source: str = "model", digest: str = "", read_file: Callable[[str], bytes] | None = None
) -> Any:
    """Rebuild a model from its document (any kind of the family); refuses it naming the first bad field.

    ``read_file(name)`` gives the bytes of a file the document names beside it (a flow's weights; ``load_model``
    reads them from the document's folder).

    Raises
    ------
    InputError
        Not an object, an unknown ``format``, or a field that fails its kind's schema.
    """
    if not isinstance(state, Mapping):
        raise InputError(f"{source}: expected a JSON object (a model document), got {type(state).__name__}")
    fmt = state.get("format")
    if fmt == LEGACY_FORMAT:
        legacy = importlib.import_module("judgecal_dist.models.legacy")
        log.debug("%s: %s read as %s (one_coin + beta)", source, LEGACY_FORMAT, KINDS["binary-pipeline"][0])
        return legacy.from_dict(state, source=source, digest=digest)  # checked as a pipeline document
    if fmt in _RETIRED:
        raise InputError(f"{source}: format: {fmt!r} is not applied by this version; {_RETIRED[fmt]}")
    known = {f: model for f, model in KINDS.values()}
    if fmt not in known:
        raise InputError(f"{source}: format: expected one of {sorted(known)} (or {LEGACY_FORMAT!r}), got {fmt!r}")
    doc = checked(known[fmt], state, source)
    kind = next(k for k, (f, _) in KINDS.items() if f == fmt)
    module, function = _BUILDERS[kind]
    build = getattr(importlib.import_module(f"judgecal_dist.models.{module}"), function)
    if kind in _WITH_FILES:
        return build(doc, dict(state), source=source, digest=digest, read_file=read_file)
    return build(doc, dict(state), source=source, digest=digest)


#: The reader of each kind (module of judgecal_dist.models, function), imported when a document of the kind is read:
#: applying a binary pipeline imports neither the correctors' nor the FCPS models' code (sklearn among them).
_BUILDERS: dict[str, tuple[str, str]] = {
    "binary-pipeline": ("binary", "from_document"),
    "davidson": ("davidson", "from_document"),
    "escalation": ("escalation", "from_document"),
    "fcps": ("fcps", "from_document"),
    "linear-corrector": ("continuous", "linear_from_document"),
    "ot-corrector": ("continuous", "ot_from_document"),
    "flow-corrector": ("continuous", "flow_from_document"),
    "flow-per-rubric": ("continuous", "flows_per_rubric_from_document"),
}
#: Kinds whose document names files beside it (read through ``read_file``).
_WITH_FILES = {"flow-corrector", "flow-per-rubric"}


def _split(url: str) -> tuple[str, str]:
    folder, _, name = url.rstrip("/").rpartition("/")
    return folder or ".", name


def load_model(url: str, *, storage_options: Mapping[str, Any] | None = None) -> Any:
    """The model of a committed run folder (``model/model.json``, or ``model/calibration.json`` of an earlier
    version), or of a ``.json`` URL.

    Raises
    ------
    InputError
        No such run or file, an unfinished run, a file that is not JSON, or a document its kind refuses.
    """
    options = dict(storage_options or {})
    if url.rstrip("/").endswith(".json"):
        folder, name = _split(url)
        store = RunStore(folder, storage_options=options)
    else:
        store = RunStore(url, storage_options=options)
        name = next((n for n in (MODEL_FILE, LEGACY_FILE) if store.exists(n)), "")
        if not name:
            raise InputError(f"{url}: {MODEL_FILE}: not found (not a run folder with an exported model)")
        store.require_success()
    raw = store.read_bytes(name, max_bytes=MAX_DOCUMENT_BYTES)
    if json_depth(raw, limit=MAX_DOCUMENT_DEPTH) > MAX_DOCUMENT_DEPTH:
        raise InputError(
            f"{store.url_of(name)}: nested deeper than the {MAX_DOCUMENT_DEPTH} levels a model document has; "
            "not a model: export it again from its run"
        )
    try:
        state = json.loads(raw.decode("utf-8"))  # NaN / Infinity literals parse, and the schema names their field
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(
            f"{store.url_of(name)}: not valid JSON ({err}); the file is truncated or not a model: "
            "export it again from its run"
        ) from err
    folder = name.rpartition("/")[0]

    def beside(file: str) -> bytes:  # a file the document names in its own folder (never a path out of it)
        path = f"{folder}/{file}" if folder else file
        if not store.exists(path):
            raise FileNotFoundError(path)
        return store.read_bytes(path)

    digest = hashlib.sha256(raw).hexdigest()
    return model_from_dict(state, source=store.url_of(name), digest=digest, read_file=beside)


def save_model(
    model: Any, url: str, *, storage_options: Mapping[str, Any] | None = None, overwrite: bool = False
) -> str:
    """Write ``model`` (or its document) as JSON at ``url`` (a ``.json`` URL, or a folder: ``<folder>/model.json``).

    The document is checked as a reader would check it before anything is written, and each file appears whole
    (written under a temporary name, then moved). A model with files beside its document (a flow's weights,
    ``model.files``) writes them into the same folder first. Returns the document's URL.

    Raises
    ------
    InputError
        The document fails its schema, or the file exists and ``overwrite`` is False (a model is never replaced
        by accident).
    """
    doc = model_document(model)
    files: dict[str, bytes] = dict(getattr(model, "files", None) or {})
    target = url.rstrip("/") if url.rstrip("/").endswith(".json") else f"{url.rstrip('/')}/model.json"
    model_from_dict(doc, source=target, read_file=files.__getitem__)  # refuse what a reader would refuse
    fs, path = open_fs(target, dict(storage_options or {}))
    folder = path.rsplit("/", 1)[0]
    for name in [path, *(f"{folder}/{f}" for f in files)]:
        if fs.exists(name) and not overwrite:
            raise InputError(f"{name}: exists; choose another path, or pass overwrite=True to replace it")
    fs.makedirs(folder, exist_ok=True)
    # Files beside the document first, the document last: a reader never finds a document without its files.
    for name, blob in [*((f"{folder}/{f}", b) for f, b in files.items()), (path, (to_json(doc) + "\n").encode())]:
        tmp = f"{folder}/.{name.rsplit('/', 1)[1]}.{uuid.uuid4().hex}.tmp"
        with fs.open(tmp, "wb") as handle:
            handle.write(blob)
        fs.mv(tmp, name)
    return target
