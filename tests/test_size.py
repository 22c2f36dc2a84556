"""No new long function or long file, and the long ones only get shorter (issue 28).

A function's size is its code lines: lines holding code, not blank, not only a comment, not a docstring (nested
functions count in the function that holds them, and on their own). A file's size is its lines. Those over the
limits are listed below with their size today; a new one over a limit fails, a listed one that grows fails, and
one that got under its limit (or is gone) must leave the list, so it only shrinks. Target: at most 10 functions and
8 files listed.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

FUNCTION_LIMIT = 60
FILE_LIMIT = 500

# -- the allowances: name -> size today; lower a size when you shorten, delete the entry once under the limit ------
FUNCTIONS = {
    "judgecal_dist/engine/jobs/routes.py::routes_spark": 89,
    "judgecal_dist/engine/onepass/replicates.py::evaluate_replicates": 103,
    "judgecal_dist/engine/sql/server.py::start_server": 64,
    "judgecal_dist/io/adapters/llmbar.py::read_llmbar": 73,
    "judgecal_dist/io/adapters/long.py::read_long": 68,
    "judgecal_dist/io/score_collections.py::collection_of": 77,
    "judgecal_dist/scoring/apply.py::score_dataset": 89,
    "judgecal_dist/studies/ensemble/study.py::_routing": 98,
    "judgecal_dist/studies/inclusion/controls.py::control_rows": 68,
    "judgecal_dist/studies/inclusion/search.py::run_searches": 65,
}
FILES = {
    "judgecal_dist/cli.py": 662,
    "judgecal_dist/engine/jobs/counts.py": 523,
    "judgecal_dist/engine/results/store.py": 600,
    "judgecal_dist/methods/fcps/select.py": 537,
    "judgecal_dist/models/continuous.py": 719,
    "judgecal_dist/models/documents.py": 725,
}

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "judgecal_dist"
_NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}
_DEFINITIONS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def code_lines(text: str) -> set[int]:
    """The numbers of the lines of ``text`` that hold code (a token other than a comment, not a docstring)."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, _DEFINITIONS) and node.body and isinstance(node.body[0], ast.Expr):
            first = node.body[0]
            if isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type not in _NOT_CODE:
            lines.update(range(token.start[0], token.end[0] + 1))
    return lines - docstrings


def function_sizes(text: str, where: str) -> dict[str, int]:
    """``<where>::<qualified name>`` -> code lines of every function and method in ``text``."""
    lines = code_lines(text)
    sizes: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    end = child.end_lineno or child.lineno
                    sizes[f"{where}::{name}"] = sum(1 for n in lines if child.lineno <= n <= end)
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(text), "")
    return sizes


def _sources() -> dict[str, str]:
    return {path.relative_to(ROOT).as_posix(): path.read_text() for path in sorted(PACKAGE.rglob("*.py"))}


def over(sizes: dict[str, int], limit: int, allowed: dict[str, int]) -> list[str]:
    """What fails: a new entry over ``limit``, an allowed one grown past its size, an allowed one now under the limit
    or gone (its entry must leave ``allowed``)."""
    problems = [
        f"{name}: {size} > {limit} (shorten it; it is not in the allowance)"
        for name, size in sorted(sizes.items())
        if size > limit and name not in allowed
    ]
    problems += [
        f"{name}: grew from {allowed[name]} to {sizes[name]} (the allowance only shrinks)"
        for name in sorted(allowed)
        if sizes.get(name, 0) > allowed[name]
    ]
    problems += [
        f"{name}: now {sizes.get(name, 'gone')}, at or under {limit}: delete its entry from the allowance"
        for name in sorted(allowed)
        if sizes.get(name, 0) <= limit
    ]
    return problems


def test_no_new_long_function_and_the_long_ones_do_not_grow():
    sizes = {k: v for path, text in _sources().items() for k, v in function_sizes(text, path).items()}
    problems = over(sizes, FUNCTION_LIMIT, FUNCTIONS)
    assert not problems, f"functions over {FUNCTION_LIMIT} code lines:\n" + "\n".join(problems)


def test_no_new_long_file_and_the_long_ones_do_not_grow():
    sizes = {path: len(text.splitlines()) for path, text in _sources().items()}
    problems = over(sizes, FILE_LIMIT, FILES)
    assert not problems, f"files over {FILE_LIMIT} lines:\n" + "\n".join(problems)


def test_code_lines_leave_out_blank_lines_comments_and_docstrings():
    text = (
        '"""Module docstring\nover two lines."""\n'
        "\n"
        "def f(x):\n"
        '    """Docstring."""\n'
        "    # a comment\n"
        "\n"
        "    y = '''a string\n"
        "    # not a comment'''\n"
        "    return y  # trailing\n"
        "\n"
        "class C:\n"
        "    def g(self):\n"
        "        def inner():\n"
        "            return 1\n"
        "        return inner\n"
    )
    assert sorted(code_lines(text)) == [4, 8, 9, 10, 12, 13, 14, 15, 16]
    assert function_sizes(text, "p.py") == {"p.py::f": 4, "p.py::C.g": 4, "p.py::C.g.inner": 2}


def test_the_check_fails_on_a_new_grown_or_stale_entry():
    sizes = {"a::new": 61, "a::grown": 70, "a::kept": 65, "a::short": 60}
    allowed = {"a::grown": 69, "a::kept": 66, "a::short": 80, "a::gone": 90}
    assert over(sizes, 60, allowed) == [
        "a::new: 61 > 60 (shorten it; it is not in the allowance)",
        "a::grown: grew from 69 to 70 (the allowance only shrinks)",
        "a::gone: now gone, at or under 60: delete its entry from the allowance",
        "a::short: now 60, at or under 60: delete its entry from the allowance",
    ]
