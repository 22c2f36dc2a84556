"""Legal and plausible ranges of the numbers of a model document, stated once in its typed schema, and the one
line that names a refused field (:func:`describe`).

A number of a document type is annotated with :class:`Bounded`: outside its legal range the document is refused
(the field named by its dotted path), outside its plausible range it is applied and :func:`implausible` names it.
Both ranges are written into the kind's JSON Schema (``minimum``/``maximum`` and ``x-plausible``), which
``docs/models.md`` prints, with the table of :func:`ranges`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, Field, GetCoreSchemaHandler, GetJsonSchemaHandler, ValidationError, ValidationInfo
from pydantic_core import PydanticCustomError, core_schema

from judgecal_dist.errors import InputError

log = logging.getLogger(__name__)

__all__ = ["Bounded", "implausible", "describe", "ranges"]


@dataclass(frozen=True)
class Bounded:
    """A number's legal range (closed: outside it the document is refused) and, inside it, its plausible range
    (outside it scoring warns, naming the field). Both are printed in the kind's JSON Schema (``minimum`` /
    ``maximum`` and ``x-plausible``), so ``docs/models.md`` states them from this one source.

    A finite number can still be nonsense: a slope of 1e308 or a class prior of 1e-300 gives every item p = 0 or 1.
    The legal ranges are wide (no fit of this package comes near them); the plausible ones are what a fit on real
    data gives, so a value beyond them is worth a look but is applied.
    """

    low: float
    high: float
    plausible: tuple[float, float] | None = None

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.with_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        out = dict(handler(schema))
        out["minimum"], out["maximum"] = self.low, self.high
        if self.plausible is not None:
            out["x-plausible"] = list(self.plausible)
        return out

    def _check(self, value: float, info: ValidationInfo) -> float:
        if not self.low <= value <= self.high:
            raise PydanticCustomError(
                "outside_range", "{value} is outside [{low}, {high}]", _shown(value, self.low, self.high)
            )
        if self.plausible is not None and _PLAUSIBLE in (info.context or {}):
            low, high = self.plausible
            if not low <= value <= high:
                raise PydanticCustomError(
                    "implausible", "{value} is outside the plausible range [{low}, {high}]", _shown(value, low, high)
                )
        return value


def _shown(value: float, low: float, high: float) -> dict[str, str]:
    return {"value": _g(value), "low": _g(low), "high": _g(high)}


def _g(x: float) -> str:
    return f"{x:.12g}"  # 12 digits: 1 - 1e-12 is not shown as 1


#: The validation context key that turns the plausible-range checks on (:func:`implausible`).
_PLAUSIBLE = "plausible"

#: A coefficient on the log-odds scale (judge weight, calibrator slope or intercept, stacker coefficient).
Coef = Annotated[float, Field(allow_inf_nan=False), Bounded(-1e3, 1e3, plausible=(-100.0, 100.0))]
#: A location on a score or logit axis (breakpoints, ranges, knots).
Axis = Annotated[float, Field(allow_inf_nan=False), Bounded(-1e6, 1e6)]
#: A class prior: 1e-300 is finite but makes every item's p 0 or 1.
Prior = Annotated[
    float, Field(gt=0.0, lt=1.0, allow_inf_nan=False), Bounded(1e-12, 1 - 1e-12, plausible=(1e-4, 1 - 1e-4))
]
#: The clipping of probabilities: below 1e-15, 1 - eps rounds to 1 and the clipped logit is infinite.
Eps = Annotated[float, Field(gt=0.0, lt=0.5, allow_inf_nan=False), Bounded(1e-15, 0.5, plausible=(1e-12, 0.05))]
#: A temperature of temperature scaling.
Temperature = Annotated[float, Field(gt=0.0, allow_inf_nan=False), Bounded(1e-3, 1e3, plausible=(0.05, 20.0))]
#: A variance, or a threshold on a dispersion.
Variance = Annotated[float, Field(ge=0.0, allow_inf_nan=False), Bounded(0.0, 1e6)]
#: MC-dropout passes of a flow (0: the deterministic map).
Passes = Annotated[int, Field(ge=0, le=10_000), Bounded(0, 10_000, plausible=(0, 1_000))]
#: A price in $ per million tokens.
Price = Annotated[float, Field(ge=0.0, allow_inf_nan=False), Bounded(0.0, 1e6, plausible=(0.0, 1e3))]
#: A non-negative scale (a Davidson margin, beta calibration's a and b).
Scale = Annotated[float, Field(ge=0.0, allow_inf_nan=False), Bounded(0.0, 1e3, plausible=(0.0, 100.0))]


#: Fields holding a union tagged by ``name``: pydantic puts the tag into the error's path, which we leave out.
TAGGED = {"aggregator", "calibrator", "family", "base"}


def dotted(path: tuple[int | str, ...]) -> str:
    """A pydantic error location as the dotted field path of a document (``aggregator.weights.2``; the tag of a
    union tagged by ``name`` left out)."""
    kept = [p for i, p in enumerate(path) if not (i > 0 and path[i - 1] in TAGGED and isinstance(p, str))]
    return ".".join(str(p) for p in kept) or "document"


def implausible(model: type[BaseModel], state: Mapping[str, Any]) -> list[str]:
    """One line per value of a document (already valid for ``model``) outside its plausible range:
    ``calibrator.slope = 250 is outside the plausible range [-100, 100]``. Empty for a document a fit gives."""
    try:
        model.model_validate(dict(state), context={_PLAUSIBLE: True})
    except ValidationError as err:
        return [f"{dotted(e['loc'])} = {e['msg']}" for e in err.errors() if e["type"] == "implausible"]
    return []


def ranges(schemas: Mapping[str, dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """``(format, dotted field, legal range, plausible range or -)`` of every number with both bounds in the JSON
    Schema of each format (``*``: any list index or key; ``[name]``: the branch of a union tagged by ``name``)."""
    rows = {(fmt, *row) for fmt, schema in schemas.items() for row in _bounded(schema, schema.get("$defs", {}), "")}
    order = list(schemas)
    return sorted(rows, key=lambda r: (order.index(r[0]), r[1]))


def _bounded(node: Any, defs: dict[str, Any], path: str) -> list[tuple[str, str, str]]:
    # The documents hold no recursive type, so every reference is followed.
    if not isinstance(node, dict):
        return []
    if "$ref" in node:
        return _bounded(defs[node["$ref"].rsplit("/", 1)[1]], defs, path)
    out: list[tuple[str, str, str]] = []
    if "minimum" in node and "maximum" in node:
        plausible = node.get("x-plausible")
        shown = f"[{_g(plausible[0])}, {_g(plausible[1])}]" if plausible else "-"
        out.append((path, f"[{_g(node['minimum'])}, {_g(node['maximum'])}]", shown))
    for key, sub in node.get("properties", {}).items():
        out += _bounded(sub, defs, f"{path}.{key}" if path else key)
    for sub in node.get("anyOf", []):
        out += _bounded(sub, defs, path)
    for sub in node.get("oneOf", []):  # a union tagged by name: the branch's name in the path
        tag = defs[sub["$ref"].rsplit("/", 1)[1]]["properties"]["name"]
        names = [tag["const"]] if "const" in tag else tag.get("enum", [])
        out += _bounded(sub, defs, f"{path}[{'/'.join(names)}]")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            out += _bounded(node[key], defs, f"{path}.*")
    return out


def describe(err: ValidationError) -> str:
    """One line for a refused document: the first bad field's dotted path, what is wrong, and the value."""
    first = err.errors()[0]
    loc = dotted(first["loc"])
    more = len(err.errors()) - 1
    if first["type"] == "value_error":
        text = str(first["msg"]).removeprefix("Value error, ")
        return text if ":" in text.split(" ")[0] else f"{loc}: {text}"
    if first["type"] == "outside_range":  # a finite number no fit gives: refuse, naming field, value and range
        return f"{loc} = {first['msg']}; refit the model or restore the file"
    if first["type"] == "missing":
        return f"{loc}: required, and missing; refit the model or restore the file (nothing is assumed for it)"
    value = first.get("input")
    shown = repr(value) if not isinstance(value, dict | list) else type(value).__name__
    return f"{loc}: {first['msg'].lower()} (got {shown[:60]})" + (f"; {more} more error(s)" if more else "")


def checked(kind: type[BaseModel], state: Mapping[str, Any], source: str) -> Any:
    """The typed document of ``state``: refused naming the first bad field (its legal range included), and a
    warning naming each value outside its plausible range. Every model of every kind is read through here.

    Raises
    ------
    InputError
        A field that fails ``kind``'s schema: a missing required field, a wrong type, a value out of its legal
        range (``<source>: calibrator.slope = 1e+308 is outside [-1000, 1000]; refit the model or ...``).
    """
    try:
        doc = kind.model_validate(dict(state))
    except ValidationError as err:
        raise InputError(f"{source}: {describe(err)}") from err
    for line in implausible(kind, state):
        log.warning("%s: %s; applied as it is (check the fit that wrote it)", source, line)
    return doc
