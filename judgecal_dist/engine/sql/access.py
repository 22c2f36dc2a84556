"""Where a SQL statement may read and write, decided on Spark's analyzed plan (after globs and relative paths).

The text guard (:mod:`.guard`) sees a statement as written: ``parquet.`<root>/*``` is a path inside the dataset
until Spark expands the glob, and ``parquet.`verdicts``` is relative to a folder the guard does not know. This
module decides on the plan Spark will run: every file relation's root paths (globs expanded, relative paths
qualified), every view's underlying relations, the output path of every write command and the location a table
command points a table at. The rule, :class:`Access`:

* **reads** only inside ``readable``: ``--data``, the registered databases' URLs (``judgecal.source``), the
  warehouse's own table folder, and what this session itself wrote;
* **writes** never inside ``protected`` (``--data`` and every registered URL: the user's data), and only inside
  ``writable`` (the warehouse's table folder for a plain client; anywhere else with ``--allow-writes``);
* **catalog changes** to a judgecal database (drop, alter, a table created in it, a database claiming
  ``judgecal.*`` properties) only by ``judgecal catalog`` (``admin``).

Two doors use it. A local ``judgecal sql`` analyses each statement (:func:`analyzed`) and checks it before it
runs. The server (:func:`install_check_rule`) adds a check rule to every session its clients open, JDBC and
Spark Connect alike, so Spark refuses the statement during analysis, before any command runs; a client proves it
is ``judgecal`` (and asks for ``--data``, ``--out``, ``--allow-writes`` or the catalog's rights) with the
server's token from the 0600 state file, in the session setting :data:`GRANT_KEY`.
"""

from __future__ import annotations

import hmac
import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from judgecal_dist.engine.sql.jvm import drain, seq, simple_name
from judgecal_dist.io.filesystem import is_inside, location_key

__all__ = ["GRANT_KEY", "Access", "Refused", "analyzed", "check_plan", "grant_value", "install_check_rule"]

#: Session setting carrying a judgecal client's grant (``token`` in the key: Spark redacts its value in logs).
GRANT_KEY = "spark.judgecal.grant.token"
#: Database property naming the URL a judgecal database was registered from (:mod:`.catalog`'s ``URL_KEY``).
SOURCE_KEY = "judgecal.source"

#: Leaves that read no file.
_SAFE_LEAVES = frozenset(
    {
        "LocalRelation",
        "OneRowRelation",
        "Range",
        "CTERelationRef",
        "ResolvedNamespace",
        "ResolvedIdentifier",
        "ResolvedTable",
        "ResolvedPersistentView",
        "ResolvedTempView",
        "ResolvedDBObjectName",
        "ResolvedNonPersistentFunc",
        "ResolvedPersistentFunc",
        "EmptyRelation",
    }
)
#: Commands that change nothing (a judgecal database may be named by them).
_READ_COMMANDS = frozenset(
    {
        "DescribeRelation",
        "DescribeTableCommand",
        "DescribeColumnCommand",
        "DescribeColumn",
        "DescribeNamespace",
        "DescribeDatabaseCommand",
        "DescribeQueryCommand",
        "ExplainCommand",
        "ShowTables",
        "ShowTablesCommand",
        "ShowTableExtended",
        "ShowColumns",
        "ShowColumnsCommand",
        "ShowCreateTable",
        "ShowCreateTableCommand",
        "ShowTableProperties",
        "ShowTablePropertiesCommand",
        "ShowPartitions",
        "ShowPartitionsCommand",
        "ShowNamespaces",
        "ShowNamespacesCommand",
        "ShowViews",
        "ShowFunctions",
        "SetCommand",
        "ResetCommand",
        "SetCatalogAndNamespace",
        "SetNamespaceCommand",
        "RefreshTableCommand",
        "RefreshTable",
        "CacheTable",
        "CacheTableAsSelect",
        "UncacheTable",
        "ClearCacheCommand",
    }
)
_FILE_FORMATS = frozenset({"parquet", "csv", "json", "orc", "text", "avro"})
#: Plan nodes and expressions that run code of the client's choosing (a shell command, a Java method, a UDF): no
#: plan check can say what they read or write, so they are refused from every client. Matched on the class name.
_CODE_NODES = ("ScriptTransformation", "AddJars", "AddFiles", "AddArchives", "CreateFunction", "CreateUserDefined")
_CODE_NODE_PREFIXES = ("MapIn", "FlatMap", "MapPartitions", "MapElements", "MapGroups", "CoGroup", "AppendColumns")
_CODE_EXPRESSIONS = ("Reflection", "UDF", "UDAF", "UDTF", "ScalaAggregator", "PythonFunction")


class Refused(Exception):
    """A plan reads or writes where its :class:`Access` does not allow (the message is one line)."""


@dataclass
class Access:
    """Where one session's statements may read and write.

    Attributes
    ----------
    readable : tuple of str
        Roots reads must stay inside (``--data``, registered URLs, the warehouse's table folder).
    protected : tuple of str
        Roots never written (``--data`` and registered URLs).
    writable : tuple of str or None
        Roots writes must stay inside; None: anywhere outside ``protected`` (``--allow-writes``).
    admin : bool
        May change judgecal databases (``judgecal catalog add`` / ``drop``).
    databases : frozenset of str
        The judgecal databases (lower case).
    written : set of str
        Locations this session wrote (readable afterwards: a table made by ``CREATE TABLE ... AS``).
    """

    readable: tuple[str, ...]
    protected: tuple[str, ...]
    writable: tuple[str, ...] | None = ()
    admin: bool = False
    databases: frozenset[str] = frozenset()
    written: set[str] = field(default_factory=set)

    def can_read(self, path: str) -> bool:
        return _under(path, [*self.readable, *self.written])

    def can_write(self, path: str) -> bool:
        key = location_key(path)
        if any(is_inside(key, location_key(p)) or is_inside(location_key(p), key) for p in self.protected):
            return False
        return self.writable is None or _under(path, self.writable)


def _under(path: str, roots: Iterable[str]) -> bool:
    key = location_key(path)
    return any(is_inside(key, location_key(root)) for root in roots)


def _under_any(roots: Iterable[str], path: str) -> bool:
    return any(_under(root, [path]) for root in roots)


def _display(path: str) -> str:
    """A local path as a plain path (``file:///x``, ``file:/x`` and ``/x`` alike), another URL as it is."""
    scheme, key = location_key(path)
    return key if scheme == "file" else path


def _shown(roots: Iterable[str]) -> str:
    return ", ".join(sorted(set(roots))) or "none"


# -- the plan ---------------------------------------------------------------------------------------------------
def analyzed(spark: Any, statement: str) -> Any:
    """Spark's analyzed plan of ``statement`` (a JVM object): globs expanded, paths qualified, nothing run."""
    jss = spark._jsparkSession  # noqa: SLF001 - the analyzer is reached through py4j only
    state = jss.sessionState()
    plan = state.analyzer().execute(state.sqlParser().parsePlan(statement))
    state.analyzer().checkAnalysis(plan)
    return plan


def check_plan(plan: Any, access: Access) -> None:
    """Refuse (:class:`Refused`) a plan reading outside ``access.readable`` or writing where it must not.

    Every node is visited: children, a command's inner query, subquery expressions and the plan a view stands
    for. The locations a plan writes are added to ``access.written`` once the whole plan passed.
    """
    writes: list[str] = []
    for node in _nodes(plan):
        _node(node, access, writes)
    access.written.update(writes)


def _nodes(plan: Any) -> Iterator[Any]:
    stack, seen = [plan], 0
    logical = None
    while stack:
        node = stack.pop()
        seen += 1
        if seen > 20_000:
            raise Refused("the plan has more than 20000 nodes")
        yield node
        if logical is None:
            logical = (
                node.getClass().getClassLoader().loadClass("org.apache.spark.sql.catalyst.plans.logical.LogicalPlan")
            )
        stack.extend(seq(node.children()))
        stack.extend(c for c in seq(node.innerChildren()) if logical.isInstance(c))
        stack.extend(seq(node.subqueries()))


def _node(node: Any, access: Access, writes: list[str]) -> None:
    name = simple_name(node)
    if any(code in name for code in _CODE_NODES) or name.startswith(_CODE_NODE_PREFIXES) or "Python" in name:
        raise Refused(f"{name} is refused: it runs code the plan check cannot follow")
    _expressions(node)
    if name == "LogicalRelation":
        relation = node.relation()
        if simple_name(relation) != "HadoopFsRelation":
            raise Refused(f"reads through {simple_name(relation)} (not files); only file tables may be read")
        _reads([str(p.toString()) for p in seq(relation.location().rootPaths())], access)
    elif name == "HiveTableRelation":
        _reads([str(node.tableMeta().location().toString())], access)
    elif name == "DataSourceV2Relation":
        _reads(_file_table_roots(node.table()), access)
    elif name == "InMemoryRelation":
        pass  # a cached plan: its relations were checked when it was cached, by this rule
    elif name == "CreateTempViewUsing":
        _temp_view_using(node, access)
    elif name == "LoadDataCommand" or "Streaming" in name:
        raise Refused(f"{name} is refused (it copies or streams files)")
    elif not seq(node.children()) and name not in _SAFE_LEAVES and ("Relation" in name or "Scan" in name):
        raise Refused(f"reads through {name}; only file tables may be read")
    _writes(node, name, access, writes)
    _catalog(node, name, access)


def _expressions(node: Any) -> None:
    stack = list(seq(node.expressions()))
    while stack:
        expression = stack.pop()
        name = simple_name(expression)
        if any(code in name for code in _CODE_EXPRESSIONS):
            shown = "reflect/java_method" if "Reflection" in name else name
            raise Refused(f"{shown} is refused: it runs code the plan check cannot follow")
        stack.extend(seq(expression.children()))


def _reads(paths: list[str], access: Access) -> None:
    for path in paths:
        if not access.can_read(path):
            raise Refused(f"reads {_display(path)}, outside the readable folders ({_shown(access.readable)})")


def _file_table_roots(table: Any) -> list[str]:
    from py4j.protocol import Py4JError

    try:
        return [str(p.toString()) for p in seq(table.fileIndex().rootPaths())]
    except Py4JError:
        raise Refused(f"reads through {simple_name(table)} (not files); only file tables may be read") from None


def _temp_view_using(node: Any, access: Access) -> None:
    provider = str(node.provider()).lower().rsplit(".", 1)[-1]
    if provider not in _FILE_FORMATS:
        raise Refused(f"CREATE TEMPORARY VIEW ... USING {node.provider()} is refused; only file formats")
    options = node.options()
    path = options.get("path")
    if not path.isDefined():
        raise Refused("CREATE TEMPORARY VIEW ... USING without a path is refused")
    _reads([str(path.get())], access)


def _option_uri(option: Any) -> str | None:
    return str(option.get().toString()) if option.isDefined() else None


def _writes(node: Any, name: str, access: Access, writes: list[str]) -> None:
    target: str | None = None
    if name == "InsertIntoHadoopFsRelationCommand":
        target = str(node.outputPath().toString())
    elif name in ("InsertIntoDataSourceDirCommand", "InsertIntoHiveDirCommand"):
        target = _option_uri(node.storage().locationUri())
    elif name == "InsertIntoHiveTable":
        target = str(node.table().location().toString())
    elif name in ("CreateDataSourceTableAsSelectCommand", "CreateHiveTableAsSelectCommand"):
        table = node.table() if name.startswith("CreateDataSource") else node.tableDesc()
        target = _option_uri(table.storage().locationUri())  # None: a managed table, in the warehouse
    elif name in ("CreateDataSourceTableCommand", "CreateTableCommand"):
        location = _option_uri(node.table().storage().locationUri())
        if location is not None:
            _reads([location], access)  # an external table over existing files: it will read them
        return
    elif name == "AlterTableSetLocationCommand":
        _reads([str(node.location())], access)
        return
    elif name in ("InsertIntoDataSourceCommand", "SaveIntoDataSourceCommand", "AppendData", "OverwriteByExpression"):
        raise Refused(f"{name} is refused: only file tables may be written")
    if target is None:
        return
    if _under(target, access.protected) or _under_any(access.protected, target):
        raise Refused(
            f"{name} writes {_display(target)}, inside or above a registered dataset or --data ({_shown(access.protected)}): "
            "they are read-only; write elsewhere"
        )
    if not access.can_write(target):
        raise Refused(
            f"{name} writes {_display(target)}, outside the writable folders ({_shown(access.writable or ())})"
        )
    writes.append(target)


def _catalog(node: Any, name: str, access: Access) -> None:
    if access.admin or name in _READ_COMMANDS or not _is_command(node):
        return
    if name in ("CreateNamespace", "SetNamespaceProperties"):
        keys = [str(k) for k in seq(node.properties().keys())]
        if any(k.lower().startswith("judgecal.") for k in keys):
            raise Refused(f"{name} sets judgecal.* properties: only `judgecal catalog add` registers a database")
    for database in _databases_named(node):
        if database.lower() in access.databases:
            raise Refused(
                f"{name} changes the registered database {database}: registered tables are read-only "
                "(`judgecal catalog drop` removes one)"
            )


def _is_command(node: Any) -> bool:
    loader = node.getClass().getClassLoader()
    return bool(loader.loadClass("org.apache.spark.sql.catalyst.plans.logical.Command").isInstance(node))


def _databases_named(node: Any) -> Iterator[str]:
    """Database names a command names: resolved identifiers among its children, TableIdentifier fields."""
    for child in [node, *seq(node.children())]:
        kind = simple_name(child)
        if kind == "ResolvedNamespace":
            parts = [str(p) for p in seq(child.namespace())]
            if parts:
                yield parts[-1]
        elif kind in ("ResolvedIdentifier", "ResolvedTable", "ResolvedPersistentView"):
            parts = [str(p) for p in child.identifier().namespace()]
            if parts:
                yield parts[-1]
    for item in drain(node.productIterator()):
        if item is None or isinstance(item, str | bool | int | float):
            continue
        try:
            kind = simple_name(item)
        except Exception:  # noqa: BLE001 - a py4j value without a class (a converted collection)
            continue
        if kind == "TableIdentifier" and item.database().isDefined():
            yield str(item.database().get())
        elif kind == "CatalogTable" and item.identifier().database().isDefined():
            yield str(item.identifier().database().get())


# -- the catalog and the server's rule ---------------------------------------------------------------------------
def registered(jss: Any) -> dict[str, str]:
    """``{database: URL}`` of every judgecal database of the session's catalog (the metastore, not a query)."""
    external = jss.sharedState().externalCatalog()
    found = {}
    for database in seq(external.listDatabases()):
        properties = external.getDatabase(database).properties()
        source = properties.get(SOURCE_KEY)
        if source.isDefined():
            found[str(database).lower()] = str(source.get())
    return found


def grant_value(
    token: str, *, data: str | None = None, out: str | None = None, writes: bool = False, admin: bool = False
) -> str:
    """The :data:`GRANT_KEY` value a judgecal client sets on its Connect session."""
    return json.dumps({"token": token, "data": data, "out": out, "writes": writes, "admin": admin})


class _Rule:
    """``LogicalPlan => Unit`` of one client session (a py4j proxy of ``scala.Function1``)."""

    def __init__(self, checker: _Checker, session: Any) -> None:
        self.checker, self.session = checker, session
        self.written: set[str] = set()

    def apply(self, plan: Any) -> None:
        from py4j.protocol import Py4JJavaError

        try:
            self.checker.check(self.session, plan, self.written)
        except Refused as refused:
            raise Py4JJavaError(str(refused), self.checker.exception(f"sql: {refused}")) from None

    class Java:
        implements = ["scala.Function1"]


class _Checker:
    """``SparkSession => (LogicalPlan => Unit)``: the check-rule builder the server injects."""

    def __init__(self, jvm: Any, token: str, warehouse_tables: str) -> None:
        self.jvm, self.token, self.tables = jvm, token, warehouse_tables
        self.lock = threading.Lock()

    def apply(self, session: Any) -> _Rule:
        return _Rule(self, session)

    def exception(self, message: str) -> Any:
        """The JVM exception carrying a refusal: unchecked (a checked one thrown through the proxy's
        ``apply`` would arrive wrapped, message lost), and one Spark Connect clients map to pyspark's own
        ``IllegalArgumentException``; JDBC clients print its message."""
        return self.jvm.java.lang.IllegalArgumentException(message)

    def access(self, session: Any, written: set[str]) -> Access:
        databases = registered(session)
        urls = tuple(databases.values())
        base = Access(
            readable=(*urls, self.tables),
            protected=urls,
            writable=(self.tables,),
            databases=frozenset(databases),
            written=written,
        )
        raw = str(session.sessionState().conf().getConfString(GRANT_KEY, ""))
        if not raw:
            return base
        try:
            grant = json.loads(raw)
            valid = hmac.compare_digest(str(grant.get("token", "")), self.token)
        except (ValueError, AttributeError):
            valid = False
        if not valid:
            raise Refused(f"{GRANT_KEY}: not this server's token (it is in the server's state file)")
        data, out = grant.get("data"), grant.get("out")
        if data is not None:  # --data: that dataset only, never written
            base = replace(base, readable=(str(data),), protected=(*urls, str(data)))
        if out is not None:
            base = replace(base, writable=(*(base.writable or ()), str(out)))
        if grant.get("writes"):
            base = replace(base, writable=None)
        return replace(base, admin=bool(grant.get("admin")))

    def check(self, session: Any, plan: Any, written: set[str]) -> None:
        check_plan(plan, self.access(session, written))

    class Java:
        implements = ["scala.Function1"]


def install_check_rule(spark: Any, token: str, warehouse_tables: str) -> None:
    """Check every plan of every session opened after this call (JDBC and Spark Connect clients) with
    :func:`check_plan`; a refusal is an ``IllegalArgumentException`` of one line (``sql: ...``), raised during
    analysis, before anything runs.

    The rule runs in this Python process (py4j calls it back); the Java exception a refusal carries is thrown
    on the JVM's side (py4j's ``propagate_java_exceptions``).
    """
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = spark.sparkContext._gateway  # noqa: SLF001 - py4j calls the rule back through pyspark's gateway
    gateway.callback_server_parameters.propagate_java_exceptions = True
    ensure_callback_server_started(gateway)  # the JDBC and Connect threads call from the JVM's side
    jss = spark._jsparkSession  # noqa: SLF001
    jss.extensions().injectCheckRule(_Checker(spark._jvm, token, warehouse_tables))  # noqa: SLF001
