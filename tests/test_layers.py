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
