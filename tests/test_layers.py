"""The package keeps its layers (ARCHITECTURE.md): cli -> studies/scoring -> engine -> methods/stats -> io.

Read from the source with ``ast`` (every import statement, function-local and ``TYPE_CHECKING`` ones included),
so a new arrow up a floor or a Spark import in methods/ fails here rather than in review.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "judgecal_dist"

#: For each layer, the packages of the layers above it, which it must never import.
ABOVE = {
    "io": {"stats", "methods", "engine", "studies", "scoring", "history", "cli"},
    "stats": {"methods", "engine", "studies", "scoring", "history", "cli"},
    "methods": {"engine", "studies", "scoring", "history", "cli"},
    "engine": {"studies", "scoring", "history", "cli"},
    "models": {"studies", "history", "cli"},
}
#: methods/ and stats/ are testable on a numpy array in milliseconds: no Spark, no Ray, not even for type hints.
ENGINES = {"pyspark", "ray"}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import statement in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [(node.lineno, node.module)]
            # ``from judgecal_dist import studies`` imports a package by name
            if node.module == "judgecal_dist":
                out += [(node.lineno, f"judgecal_dist.{alias.name}") for alias in node.names]
    return out


@pytest.mark.parametrize("layer", sorted(ABOVE))
def test_no_layer_imports_a_layer_above_it(layer):
    offending = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {module}"
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for line, module in imported_modules(path)
        if module.startswith("judgecal_dist.") and module.split(".")[1] in ABOVE[layer]
    ]
    assert not offending, f"{layer}/ imports a layer above it:\n" + "\n".join(offending)


@pytest.mark.parametrize("layer", ["methods", "stats"])
def test_methods_and_stats_import_no_spark_or_ray(layer):
    offending = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {module}"
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for line, module in imported_modules(path)
        if module.split(".")[0] in ENGINES
    ]
    assert not offending, f"{layer}/ imports an engine:\n" + "\n".join(offending)


def test_the_scan_sees_imports_inside_functions(tmp_path):
    # the probe itself: a function-local import and a package import by name are both found
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    import pyspark.sql\n    from judgecal_dist import studies\n")
    assert imported_modules(source) == [(2, "pyspark.sql"), (3, "judgecal_dist"), (3, "judgecal_dist.studies")]


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
