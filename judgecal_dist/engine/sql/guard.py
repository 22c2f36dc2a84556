"""The read-only guard of ``judgecal sql``: each statement is checked on Spark's own parsed plan before it runs.

A statement is parsed with the session's parser (``sessionState.sqlParser.parsePlan``, through py4j, so the plan
is exactly the one Spark would run) and its tree is walked: plan nodes, the expressions of each node, subqueries
and common table expressions. The rule is an allowlist:

* **plan nodes**: only query nodes (:data:`QUERY_NODES`), plus ``EXPLAIN`` / ``DESCRIBE`` of a query or view,
  ``SHOW TABLES``, ``SHOW COLUMNS`` and ``SET`` of a setting in :data:`SETTABLE`. Any command (DDL, DML,
  ``CACHE``, ``ADD JAR``, ``EXECUTE IMMEDIATE``, ...) is refused unless writes are allowed;
* **relations**: a view of the dataset (or a CTE in scope); a path read such as ``parquet.`<path>``` only inside
  the dataset's folder (``text.`/etc/passwd``` is refused). Over a catalog (no dataset: ``views`` is None) any
  table or view of the catalog may be read, and no path;
* **functions**: any but :data:`DENIED_FUNCTIONS` (static Java calls); a function named by ``IDENTIFIER(...)``
  is refused since its name is unknown until it runs; table-valued functions only from :data:`TABLE_FUNCTIONS`
  (``read_files`` reads any path).

With writes allowed, commands run, but some rules stay: no denied function or table function, no
``TRANSFORM ... USING`` (a shell command), ``ADD JAR``/``CREATE FUNCTION`` (code loading), ``EXECUTE IMMEDIATE``
(an unchecked statement), no ``SET`` outside :data:`SETTABLE`, no path read outside the dataset, and no write
whose target (a location, a path option, a table or view name) is the dataset's folder, inside it, or above it.

The session must not substitute ``${env:...}`` variables (``spark.sql.variable.substitute``): Spark does it in
the parser, before any plan exists, so :class:`SqlGuard` turns it off.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from judgecal_dist.engine.sql.jvm import drain, seq, simple_name
from judgecal_dist.errors import InputError
from judgecal_dist.io.filesystem import is_inside, location_key

__all__ = [
    "QUERY_NODES",
    "READ_COMMANDS",
    "NEVER_NODES",
    "DENIED_FUNCTIONS",
    "TABLE_FUNCTIONS",
    "SETTABLE",
    "SqlGuard",
    "split_statements",
]

#: Logical plan nodes of a query as the parser builds them (simple class names).
QUERY_NODES: frozenset[str] = frozenset(
    {
        "Aggregate",
        "Distinct",
        "Except",
        "Filter",
        "Generate",
        "GlobalLimit",
        "Intersect",
        "Join",
        "LateralJoin",
        "LocalLimit",
        "LocalRelation",
        "Offset",
        "OneRowRelation",
        "Pivot",
        "Project",
        "RebalancePartitions",
        "Repartition",
        "RepartitionByExpression",
        "Sample",
        "Sort",
        "SubqueryAlias",
        "Tail",
        "Union",
        "UnresolvedHaving",
        "UnresolvedHint",
        "UnresolvedInlineTable",
        "UnresolvedRelation",
        "UnresolvedSubqueryColumnAliases",
        "UnresolvedTableValuedFunction",
        "UnresolvedTVFAliases",
        "Unpivot",
        "UnresolvedWith",
        "WithWindowDefinition",
    }
)
#: Commands that only describe: allowed read-only, their query or view checked like a query.
READ_COMMANDS: frozenset[str] = frozenset(
    {
        "ExplainCommand",
        "DescribeRelation",
        "DescribeQueryCommand",
        "ShowTables",
        "ShowColumns",
        "SetCommand",
        "CurrentNamespace",
        "UnresolvedTableOrView",
        "ShowNamespaces",
        "ShowNamespacesCommand",
        "UnresolvedNamespace",
        "SetCatalogAndNamespace",
    }
)
#: Nodes refused even with writes allowed: a shell command, code loading, an unchecked statement string.
NEVER_NODES: frozenset[str] = frozenset(
    {
        "ScriptTransformation",
        "AddJarsCommand",
        "AddFilesCommand",
        "AddArchivesCommand",
        "CreateFunction",
        "CreateFunctionCommand",
        "CreateUserDefinedFunction",
        "UnresolvedExecuteImmediate",
        "ExecuteImmediateQuery",
        "ExecuteImmediateCommand",
        "PlanWithUnresolvedIdentifier",
    }
)
#: Functions that call arbitrary static Java methods (``reflect('java.lang.System', 'getenv', ...)``).
DENIED_FUNCTIONS: frozenset[str] = frozenset({"reflect", "java_method", "try_reflect"})
#: Table-valued functions (and ``LATERAL VIEW`` generators) allowed; ``read_files`` reads any path.
TABLE_FUNCTIONS: frozenset[str] = frozenset(
    {
        "range",
        "explode",
        "explode_outer",
        "inline",
        "inline_outer",
        "posexplode",
        "posexplode_outer",
        "stack",
        "json_tuple",
        "variant_explode",
        "variant_explode_outer",
    }
)
#: Settings ``SET key[=value]`` may read or change: query tuning and formatting, nothing that reaches files,
#: credentials or the parser (``SET`` alone lists every setting, so it is refused).
SETTABLE: frozenset[str] = frozenset(
    {
        "spark.sql.shuffle.partitions",
        "spark.sql.session.timeZone",
        "spark.sql.ansi.enabled",
        "spark.sql.adaptive.enabled",
        "spark.sql.autoBroadcastJoinThreshold",
        "spark.sql.caseSensitive",
        "spark.sql.legacy.timeParserPolicy",
    }
)
#: Commands that write nothing although they name a view (caching is memory only).
_CACHE_COMMANDS = frozenset({"CacheTable", "CacheTableAsSelect", "UncacheTable", "ClearCacheCommand"})
#: Relation-like leaves whose identifier names a view or a path.
_RELATIONS = frozenset({"UnresolvedRelation", "UnresolvedTableOrView"})
#: A write command's fields are searched for locations to this depth and node count (then refused: fail closed).
_MAX_DEPTH = 16
_MAX_VISITS = 5_000


def split_statements(spark: SparkSession, text: str) -> list[str]:
    """Split ``text`` at the semicolons Spark's own lexer sees (not those in strings, identifiers or comments).

    Parameters
    ----------
    spark : SparkSession
    text : str
        One or more statements separated by ``;``.

    Returns
    -------
    list of str
        The statements, stripped; empty ones (only blanks or comments) dropped.

    Notes
    -----
    Without a ``;`` the text is one statement and the lexer is not called. The lexer is Spark's ANTLR
    ``SqlBaseLexer``, so quoting, escapes and nested ``/* */`` comments follow Spark's grammar exactly.
    """
    if ";" not in text:
        return [text.strip()] if text.strip() else []
    jvm = spark._jvm  # noqa: SLF001 - py4j is the only way to Spark's lexer
    assert jvm is not None, "a classic (py4j) SparkSession"
    lexer_class = jvm.org.apache.spark.sql.catalyst.parser.SqlBaseLexer
    lexer = lexer_class(jvm.org.antlr.v4.runtime.CharStreams.fromString(text))
    semicolon = lexer_class.SEMICOLON
    statements, start, has_tokens = [], 0, False
    for token in lexer.getAllTokens():
        kind = token.getType()
        if kind == semicolon:
            stop = token.getStartIndex()
            if has_tokens:
                statements.append(text[start:stop].strip())
            start, has_tokens = stop + 1, False
        elif token.getChannel() == 0:  # the default channel: not a blank or a comment
            has_tokens = True
    if has_tokens:
        statements.append(text[start:].strip())
    return statements


@dataclass
class _Walk:
    """What one statement's walk found; the first offence ends it."""

    statement: str
    commands: list[Any] = field(default_factory=list)
    visits: int = 0


class SqlGuard:
    """Refuse statements that are not queries over a dataset's views (see the module docstring).

    Parameters
    ----------
    spark : SparkSession
        Its parser is used; ``spark.sql.variable.substitute`` is set to false on it.
    views : collection of str or None
        Names of the dataset's views (case-insensitive); None over a catalog: any of its tables may be read.
    data_url : str or None
        The dataset's root: path reads must stay inside it, writes must stay out of it; None: no path is read.
    allow_writes : bool, default False
        Let commands run (``--allow-writes``), under the rules that always hold.

    Examples
    --------
    >>> guard = SqlGuard(spark, views=["verdicts"], data_url="/data/d")  # doctest: +SKIP
    >>> guard.check("SELECT reflect('java.lang.System', 'getenv', 'HOME')")  # doctest: +SKIP
    Traceback (most recent call last):
    InputError: sql: function reflect is refused (it calls Java methods)
    """

    def __init__(
        self,
        spark: SparkSession,
        *,
        views: Collection[str] | None,
        data_url: str | None,
        allow_writes: bool = False,
    ) -> None:
        self.spark = spark
        self.catalog = views is None
        self.views = frozenset(v.lower() for v in views or ())
        self.data_url = data_url
        self.allow_writes = allow_writes
        self._root = location_key(data_url) if data_url is not None else None
        self._access: Any = None
        spark.conf.set("spark.sql.variable.substitute", "false")
        jvm = spark._jvm  # noqa: SLF001 - py4j is the only way to the parsed plan
        assert jvm is not None, "a classic (py4j) SparkSession"
        self._parser = spark._jsparkSession.sessionState().sqlParser()  # noqa: SLF001
        self._classes = {
            name: jvm.java.lang.Class.forName(name)
            for name in (
                "org.apache.spark.sql.catalyst.plans.logical.LogicalPlan",
                "org.apache.spark.sql.catalyst.expressions.Expression",
                "org.apache.spark.sql.catalyst.expressions.PlanExpression",
                "scala.Option",
                "scala.collection.Iterable",
                "scala.Product",
            )
        }

    # -- entry points --------------------------------------------------------------------------------------------
    def check(self, statement: str, number: int | None = None) -> None:
        """Parse ``statement`` and refuse it (``InputError``) unless the rules allow it.

        Raises
        ------
        InputError
            ``sql: [statement <number>: ]<what is refused and why>``, or Spark's parse error.
        """
        where = f"sql: statement {number}: " if number is not None else "sql: "
        try:
            plan = self._parser.parsePlan(statement)
        except AnalysisException as err:  # pyspark converts the JVM's ParseException
            raise InputError(f"{where}{str(err).strip().splitlines()[0]}") from err
        walk = _Walk(statement)
        try:
            self._plan(plan, frozenset(), walk)
            for command in walk.commands:
                self._write_targets(command)
        except _Refused as refused:
            raise InputError(f"{where}{refused}") from None

    def check_plan(self, statement: str, number: int | None = None) -> None:
        """Refuse ``statement`` (``InputError``) when its analyzed plan reads or writes where it must not.

        The plan is Spark's analyzed one (globs expanded, relative paths qualified, views resolved): reads only
        inside the dataset (or, over a catalog, the registered databases' URLs), writes never into them; see
        :mod:`.access`. A statement Spark cannot analyse is left to fail when it runs, with Spark's own error.
        """
        from judgecal_dist.engine.sql.access import Access, Refused, analyzed, check_plan, registered

        where = f"sql: statement {number}: " if number is not None else "sql: "
        if self._access is None:
            databases = registered(self.spark._jsparkSession)  # noqa: SLF001
            urls = tuple(databases.values())
            data = (self.data_url,) if self.data_url is not None else ()
            self._access = Access(
                readable=data or urls,
                protected=(*urls, *data),
                writable=None if self.allow_writes else (),
                databases=frozenset(databases),
            )
        try:
            plan = analyzed(self.spark, statement)
        except AnalysisException:
            return
        try:
            check_plan(plan, self._access)
        except Refused as refused:
            raise InputError(f"{where}{refused}") from None

    def check_output(self, url: str, what: str = "--out") -> None:
        """Refuse an output location that is the dataset's folder, inside it or above it."""
        if self._overlaps(url):
            raise InputError(f"{what} {url}: is inside or above the dataset's folder {self.data_url}; write elsewhere")

    # -- plans ---------------------------------------------------------------------------------------------------
    def _is(self, obj: Any, class_name: str) -> bool:
        return bool(self._classes[class_name].isInstance(obj))

    def _plan(self, plan: Any, ctes: frozenset[str], walk: _Walk) -> None:
        walk.visits += 1
        if walk.visits > _MAX_VISITS:
            raise _Refused(f"the plan has more than {_MAX_VISITS} nodes")
        name = simple_name(plan)
        if name in NEVER_NODES:
            raise _Refused(f"{name} is refused ({_never_reason(name)})")
        if name == "SetCommand":
            self._set(plan)
        elif name not in QUERY_NODES and name not in READ_COMMANDS:
            if not self.allow_writes:
                how = "" if self.catalog else "; pass --allow-writes to run commands"
                raise _Refused(
                    f"{name} is not a query: judgecal sql is read-only (queries over {self._readable()}){how}"
                )
            walk.commands.append(plan)
        if name in _RELATIONS:
            self._relation(name, seq(plan.multipartIdentifier()), ctes)
        elif name == "UnresolvedTableValuedFunction":
            self._table_function(".".join(seq(plan.name())))
        elif name == "UnresolvedWith":
            ctes = self._with(plan, ctes, walk)
        elif name == "ExplainCommand":
            self._plan(plan.logicalPlan(), ctes, walk)
        elif name == "DescribeQueryCommand":
            self._plan(plan.plan(), ctes, walk)
        elif name == "Generate":
            self._generator(plan.generator())
        for expression in seq(plan.expressions()):
            self._expression(expression, ctes, walk)
        for child in seq(plan.children()):
            self._plan(child, ctes, walk)

    def _with(self, plan: Any, ctes: frozenset[str], walk: _Walk) -> frozenset[str]:
        # Each CTE sees those before it and itself (WITH RECURSIVE); the body sees them all.
        for relation in seq(plan.cteRelations()):
            cte_name = str(relation._1()).lower()
            ctes = ctes | {cte_name}
            self._plan(relation._2(), ctes, walk)
        return ctes

    def _readable(self) -> str:
        return "the catalog's tables" if self.catalog else f"the views {', '.join(sorted(self.views))}"

    def _relation(self, kind: str, parts: list[str], ctes: frozenset[str]) -> None:
        if len(parts) == 1 and (parts[0].lower() in self.views or parts[0].lower() in ctes):
            return
        if len(parts) == 2 and ("/" in parts[1] or ":" in parts[1]):
            if self._root is not None and is_inside(location_key(parts[1]), self._root):
                return
            where = f"outside --data {self.data_url}" if self._root is not None else "(only the catalog's tables)"
            raise _Refused(f"reads the path {parts[1]!r} (data source {parts[0]!r}) {where}; query {self._readable()}")
        if self.allow_writes or self.catalog:  # tables of the catalog, or made by earlier statements of this call
            return
        shown = ".".join(parts)
        raise _Refused(f"{shown!r} is not a view of this dataset; the views are {', '.join(sorted(self.views))}")

    def _table_function(self, name: str) -> None:
        if name.lower() not in TABLE_FUNCTIONS:
            raise _Refused(
                f"table function {name} is refused (allowed: {', '.join(sorted(TABLE_FUNCTIONS))}); "
                "query the dataset's views instead"
            )

    def _generator(self, generator: Any) -> None:
        if simple_name(generator) == "UnresolvedGenerator":
            self._table_function(str(generator.name().funcName()))

    def _set(self, plan: Any) -> None:
        pair = plan.kv()
        key = str(pair.get()._1()) if pair.isDefined() else None
        if key is None or key not in SETTABLE:
            shown = "SET (list every setting)" if key is None else f"SET {key}"
            raise _Refused(f"{shown} is refused; settable: {', '.join(sorted(SETTABLE))}")

    # -- expressions ---------------------------------------------------------------------------------------------
    def _expression(self, expression: Any, ctes: frozenset[str], walk: _Walk) -> None:
        walk.visits += 1
        if walk.visits > _MAX_VISITS:
            raise _Refused(f"the plan has more than {_MAX_VISITS} nodes")
        name = simple_name(expression)
        if name == "UnresolvedFunction":
            self._function(seq(expression.nameParts()))
        elif name == "ExpressionWithUnresolvedIdentifier":
            raise _Refused("a function named by IDENTIFIER(...) is refused (its name is unknown until it runs)")
        elif self._is(expression, "org.apache.spark.sql.catalyst.expressions.PlanExpression"):
            self._plan(expression.plan(), ctes, walk)
        for child in seq(expression.children()):
            self._expression(child, ctes, walk)

    def _function(self, parts: list[str]) -> None:
        name = parts[-1].lower()
        if name in DENIED_FUNCTIONS:
            raise _Refused(f"function {parts[-1]} is refused (it calls Java methods)")
        qualifier = [p.lower() for p in parts[:-1]]
        if qualifier not in ([], ["builtin"], ["system", "builtin"], ["session"], ["system", "session"]):
            raise _Refused(f"function {'.'.join(parts)} is refused: only built-in functions are allowed")

    # -- writes --------------------------------------------------------------------------------------------------
    def _write_targets(self, command: Any) -> None:
        """Refuse a command naming a dataset view or a location inside or above the dataset's folder."""
        name = simple_name(command)
        for text in self._strings(command, 0, [0]):
            if name not in _CACHE_COMMANDS and text.lower() in self.views:
                raise _Refused(f"{name} targets the dataset's view {text}; the dataset's tables are never written")
            location = self._table_location(text) or text
            if self._overlaps(location):
                raise _Refused(
                    f"{name} writes to {text!r}, inside or above the dataset's folder {self.data_url}; write elsewhere"
                )

    def _table_location(self, name: str) -> str | None:
        """The location of a catalog table called ``name`` (a table made earlier, or one of a shared metastore)."""
        quoted = "`" + name.replace("`", "``") + "`"
        try:
            if not self.spark.catalog.tableExists(quoted):
                return None
            rows = self.spark.sql(f"DESCRIBE TABLE EXTENDED {quoted}").collect()
        except AnalysisException:
            return None
        return next((str(row["data_type"]) for row in rows if row["col_name"] == "Location"), None)

    def _overlaps(self, text: str) -> bool:
        if self._root is None:
            return False
        target = location_key(text)
        return is_inside(target, self._root) or is_inside(self._root, target)

    def _strings(self, obj: Any, depth: int, count: list[int]) -> Iterator[str]:
        """Every string in a command's fields (locations, options, identifiers); query plans are walked elsewhere."""
        count[0] += 1
        if depth > _MAX_DEPTH or count[0] > _MAX_VISITS:
            raise _Refused("a command too deeply nested to check")
        if isinstance(obj, str):
            if obj.strip() not in ("", "."):
                yield obj
            return
        if obj is None or isinstance(obj, bool | int | float):
            return
        class_name = str(obj.getClass().getName())
        if class_name in ("java.net.URI", "org.apache.hadoop.fs.Path", "org.apache.spark.unsafe.types.UTF8String"):
            yield str(obj.toString())
            return
        plan = "org.apache.spark.sql.catalyst.plans.logical.LogicalPlan"
        if depth > 0 and self._is(obj, plan) and simple_name(obj) in QUERY_NODES - _RELATIONS:
            return  # a query feeding the command: its reads were checked by the walk
        if self._is(obj, "scala.Option"):
            if obj.isDefined():
                yield from self._strings(obj.get(), depth + 1, count)
        elif self._is(obj, "scala.collection.Iterable"):
            for item in seq(obj):
                yield from self._strings(item, depth + 1, count)
        elif self._is(obj, "scala.Product"):
            if self._is(obj, "org.apache.spark.sql.catalyst.expressions.Expression") and simple_name(obj) == "Literal":
                value = obj.value()
                if value is not None and not isinstance(value, bool | int | float):
                    yield str(value) if isinstance(value, str) else str(value.toString())
                return
            for item in drain(obj.productIterator()):
                yield from self._strings(item, depth + 1, count)


def _never_reason(name: str) -> str:
    if name == "ScriptTransformation":
        return "TRANSFORM ... USING runs a shell command"
    if name == "PlanWithUnresolvedIdentifier":
        return "a table named by IDENTIFIER(...) is unknown until it runs"
    if "Immediate" in name:
        return "EXECUTE IMMEDIATE runs a statement that cannot be checked"
    return "it loads code into the session"


class _Refused(Exception):
    """A statement's offence (turned into an InputError with the statement's number)."""
