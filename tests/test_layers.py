"""The package keeps its shape (ARCHITECTURE.md, Layers): every top-level package and module on one floor, no import
running up a floor, no import circle between modules, Spark and Ray in ``engine/`` only, no private name reached.

Read from the source with ``ast`` (every import statement, function-local and ``TYPE_CHECKING`` ones included: a
function-level import that only dodges a circle is still the circle), so a new arrow up a floor, a circle or a Spark
import outside the engine fails here rather than in review.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TypeGuard

import pytest

# -- the allowances: each names what it lets through, and may only shrink ------------------------------------------
#: Files outside ``engine/`` that still import pyspark (issue 28: Spark lives in ``engine/`` only). Scoring moves
#: its Spark jobs into ``engine/`` and deletes the entries here as it does (a stale entry fails, so it shrinks).
PYSPARK_OUTSIDE_ENGINE: set[str] = set()
#: The one import allowed to run up a floor (importer -> imported module), and why.
UPWARD = {
    # The package's root sits on the lowest floor (everything may read ``__version__``); its ``__getattr__``
    # imports the notebook API on first use, so that ``from judgecal_dist import CalibratedAggregator`` works.
    ("judgecal_dist", "judgecal_dist.api"): "lazy top-level re-export of the notebook API",
}
#: Upward imports being removed (issue 28, one scoring path: model kinds stop checking tables themselves). Emptied
#: by the scoring work; nothing may be added.
UPWARD_BEING_REMOVED: set[tuple[str, str]] = set()

#: A library's private attribute that shares its name with one of ours (so the private-name scan sees it), and why.
LIBRARY_PRIVATE = {
    # pyspark Connect retries an unreachable server for minutes; its retry policy is only on the session's client
    ("judgecal_dist/engine/sql/client.py", "spark._client"): "pyspark Connect session's gRPC client",
}

PACKAGE = Path(__file__).resolve().parents[1] / "judgecal_dist"
ROOT = "judgecal_dist"

#: The floors from the bottom up: a module may import its own top-level unit and those below it. The root package
#: (``__version__``) and the small shared modules (errors, settings, the engine config, progress, splits) sit at the
#: bottom; ``scoring`` and ``history`` are the floor above the models (history may read scoring, not the reverse);
#: the labelling commands above the studies (advise reads the inclusion machinery); the notebook API and the three
#: CLI modules on top (all share ``cli_common``).
FLOORS = [
    ROOT,
    "errors",
    "progress",
    "splits",
    "extras",
    "settings",
    "config",
    "io",
    "stats",
    "methods",
    "engine",
    "models",
    "scoring",
    "history",
    "studies",
    "labels",
    "api",
    "cli_common",
    "cli_sql",
    "cli_labels",
    "cli",
]
#: Engines that live in ``engine/`` only (not even a type hint elsewhere).
ENGINES = {"pyspark", "ray"}


# -- the graph -------------------------------------------------------------------------------------------------
def module_name(path: Path, package: Path) -> str:
    """``judgecal_dist.engine.votes.codec`` for ``<package>/engine/votes/codec.py``; a package is its ``__init__``."""
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import statement in ``path`` (``from x import y``: ``x`` and ``x.y``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [(node.lineno, node.module)]
            # ``from judgecal_dist import studies`` imports a package by name
            if node.module.split(".")[0] == ROOT:
                out += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
        elif _literal_import_module(node):  # importlib.import_module("judgecal_dist.x"): an import all the same
            out += [(node.lineno, node.args[0].value)]  # type: ignore[attr-defined]
    return out


def _literal_import_module(node: ast.AST) -> TypeGuard[ast.Call]:
    """``import_module("<literal>")`` (as ``importlib.import_module`` or imported by name)."""
    if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
        return False
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    return name == "import_module" and isinstance(node.args[0].value, str)


def _resolve(name: str, modules: Iterable[str]) -> str | None:
    """The package's module that ``name`` (a module, or a name imported from one) is: the longest known prefix."""
    known = set(modules)
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def module_graph(package: Path) -> dict[str, dict[str, int]]:
    """For each module of ``package``: the package's modules it imports, with the first line that does.

    ``from a.b import c`` is an arrow to ``a.b.c`` when that is a module and to ``a.b`` otherwise; a relative import
    is resolved against the importing module. Parent packages that Python runs on the way are not arrows (every
    module would otherwise import every ``__init__`` above it).
    """
    paths = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    graph: dict[str, dict[str, int]] = {}
    for name, path in paths.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        arrows: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*here[: len(here) - node.level + 1], *([node.module] if node.module else [])])
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base for alias in node.names]
            elif _literal_import_module(node):  # a lazy import by name is an arrow all the same
                targets = [node.args[0].value]  # type: ignore[attr-defined]
            else:
                continue
            for target in targets:
                module = _resolve(target, paths) if target.split(".")[0] == package.name else None
                if module is not None and module != name:
                    arrows.setdefault(module, node.lineno)
        graph[name] = arrows
    return graph


def circles(graph: Mapping[str, Mapping[str, int]]) -> list[list[str]]:
    """The import circles of ``graph``: its strongly connected components of more than one module, sorted.

    Two modules are in one circle when each reaches the other; the graph is a few hundred modules, so the
    reachability of each (a depth-first search) is cheap and plainly right.
    """
    reach = {}
    for start in graph:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), {}):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        reach[start] = seen
    components = {frozenset({m} | {o for o in reach[m] if m in reach[o]}) for m in graph}
    return sorted(sorted(c) for c in components if len(c) > 1)


def unit(module: str) -> str:
    """The top-level package or module a module belongs to (``engine`` for ``judgecal_dist.engine.votes``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def upward_imports(graph: Mapping[str, Mapping[str, int]], floors: list[str]) -> dict[tuple[str, str], int]:
    """(importer, imported) -> line of every arrow to a higher floor than the importer's."""
    rank = {name: i for i, name in enumerate(floors)}
    return {
        (src, dst): line
        for src, arrows in graph.items()
        for dst, line in arrows.items()
        # a unit on no floor fails the first check; it is left out here rather than guessed
        if rank.get(unit(dst), -1) > rank.get(unit(src), len(floors))
    }


GRAPH = module_graph(PACKAGE)


# -- the checks ------------------------------------------------------------------------------------------------
def test_every_top_level_package_and_module_is_on_a_floor():
    units = {unit(m) for m in GRAPH}
    assert units == set(FLOORS), f"place these in FLOORS: {sorted(units - set(FLOORS))}; gone: {set(FLOORS) - units}"


def test_no_import_circle_between_modules():
    found = circles(GRAPH)
    assert not found, "import circles (move what both need into a lower module):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_no_import_runs_up_a_floor_but_the_one_allowed():
    upward = upward_imports(GRAPH, FLOORS)
    allowed = set(UPWARD) | UPWARD_BEING_REMOVED
    offending = [
        f"{src} -> {dst} (line {line})" for (src, dst), line in sorted(upward.items()) if (src, dst) not in allowed
    ]
    assert not offending, "imports running up a floor (FLOORS, bottom first):\n" + "\n".join(offending)
    assert len(UPWARD) <= 1, "at most one import may run up a floor"
    stale = sorted(allowed - set(upward))
    assert not stale, f"remove from the allowance (no longer imported): {stale}"


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_spark_and_ray_are_imported_in_engine_only(engine):
    importers = {
        path.relative_to(PACKAGE.parent).as_posix()
        for path in PACKAGE.rglob("*.py")
        if not path.relative_to(PACKAGE).as_posix().startswith("engine/")
        and any(module.split(".")[0] == engine for _, module in imported_modules(path))
    }
    allowed = PYSPARK_OUTSIDE_ENGINE if engine == "pyspark" else set()
    assert sorted(importers - allowed) == [], f"{engine} is imported outside engine/"
    assert sorted(allowed - importers) == [], "no longer imports pyspark: remove it from PYSPARK_OUTSIDE_ENGINE"


# -- the scanners on probes ------------------------------------------------------------------------------------
def test_the_scan_sees_imports_inside_functions(tmp_path):
    # the probe itself: a function-local import and a package import by name are both found
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    import pyspark.sql\n    from judgecal_dist import studies\n")
    assert imported_modules(source) == [(2, "pyspark.sql"), (3, "judgecal_dist"), (3, "judgecal_dist.studies")]


def _probe_package(root: Path, files: dict[str, str]) -> Path:
    package = root / ROOT
    for name, text in {"__init__.py": "", **files}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    return package


def test_the_circle_check_fails_on_a_two_file_circle(tmp_path):
    # the second half of the circle hides in a function and under TYPE_CHECKING: both are arrows
    package = _probe_package(
        tmp_path,
        {
            "io/__init__.py": "",
            "io/a.py": "from judgecal_dist.io.b import thing\n",
            "io/b.py": "def thing():\n    from . import a\n",
            "io/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from judgecal_dist.io import a\n",
            "io/d.py": "import importlib\n\ndef load():\n    return importlib.import_module('judgecal_dist.io.e')\n",
            "io/e.py": "from judgecal_dist.io.d import load\n",
        },
    )
    graph = module_graph(package)
    assert graph["judgecal_dist.io.b"] == {"judgecal_dist.io.a": 2}
    assert circles(graph) == [
        ["judgecal_dist.io.a", "judgecal_dist.io.b"],
        ["judgecal_dist.io.d", "judgecal_dist.io.e"],
    ]
    (package / "io" / "b.py").write_text("def thing():\n    pass\n")
    (package / "io" / "e.py").write_text("")
    assert circles(module_graph(package)) == []


def test_the_floor_check_sees_an_import_up_a_floor(tmp_path):
    package = _probe_package(
        tmp_path,
        {
            "errors.py": "",
            "io/__init__.py": "",
            "io/x.py": "import judgecal_dist.errors\n\ndef f():\n    from judgecal_dist.engine.y import z\n",
            "engine/__init__.py": "",
            "engine/y.py": "from ..io import x\nz = 1\n",
        },
    )
    graph = module_graph(package)
    assert upward_imports(graph, FLOORS) == {("judgecal_dist.io.x", "judgecal_dist.engine.y"): 4}
    assert circles(graph) == [["judgecal_dist.engine.y", "judgecal_dist.io.x"]]


# -- private names ---------------------------------------------------------------------------------------------
def private_names(path: Path) -> set[str]:
    """Private names ``path`` defines: functions, classes, module names and attributes it assigns."""
    defined = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            defined.add(node.attr)
    return {name for name in defined if _is_private(name)}


def private_reaches(path: Path, package_private: set[str]) -> list[tuple[int, str]]:
    """(line, text) of every use in ``path`` of another module's private name: ``from judgecal_dist.x import _y``,
    or ``obj._y`` where ``_y`` is a private name of the package (``package_private``) that ``path`` does not define
    itself. A subclass's ``self._y`` is its own business; a library's internals (py4j's ``_jvm``) are not ours."""
    tree = ast.parse(path.read_text())
    own = private_names(path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("judgecal_dist"):
            out += [(node.lineno, f"import {a.name}") for a in node.names if _is_private(a.name)]
        elif isinstance(node, ast.Attribute) and node.attr in package_private - own:
            receiver = node.value
            if not (isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")):
                out.append((node.lineno, ast.unparse(node)))
    return sorted(out)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_reaches_another_modules_private_names():
    paths = sorted(PACKAGE.rglob("*.py"))
    package_private = set().union(*(private_names(path) for path in paths))
    offending = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text}"
        for path in paths
        for line, text in private_reaches(path, package_private)
        if (path.relative_to(PACKAGE.parent).as_posix(), text) not in LIBRARY_PRIVATE
    ]
    assert not offending, "private names used across modules (give them a public name):\n" + "\n".join(offending)


def test_the_private_scan_sees_imports_and_attribute_reaches(tmp_path):
    source = tmp_path / "probe.py"
    source.write_text(
        "from judgecal_dist.methods.aggregation.dawid_skene import _clamp\n"
        "def f(model, store, spark):\n"
        "    model._e_step()\n"
        "    store._own = 1\n"
        "    return store._own, self_like._e_step, spark._jvm\n"
    )
    found = private_reaches(source, {"_e_step", "_own", "_clamp"})
    assert found == [(1, "import _clamp"), (3, "model._e_step"), (5, "self_like._e_step")]
