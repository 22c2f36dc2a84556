"""Typed settings: every setting of every study and of the engine, declared once with its type and allowed range.

A study's ``Config`` subclasses :class:`TypedSettings` (a frozen pydantic model): YAML values are coerced to the
declared types (``--set panels=top3`` is the list ``['top3']``), ranges are checked before anything is read or
written, and the JSON Schema comes for free (``judgecal config schema STUDY``). A rejected setting is one
:class:`~judgecal_dist.errors.ConfigError` line naming the key, the value, the allowed range and the fix::

    n_bins=0: must be an integer >= 2 (set n_bins in a copy of `judgecal config show inclusion` or --set n_bins=10)

Settings shared by several studies are defined here once: the run fields (:data:`Replicates`, :data:`Resamples`,
:data:`Seed`, :data:`CiLevel`), and the pipeline hyperparameters (:class:`PipelineFields`,
:class:`AggregationFields`), which studies inherit so that their YAML keys stay flat (``eps: 1.0e-6``).
"""

from __future__ import annotations

import contextvars
import difflib
import re
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, Self, Union, get_args, get_origin

import annotated_types as at
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    ValidationError,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError, core_schema

from judgecal_dist.errors import ConfigError
from judgecal_dist.splits import SEED_MAX

__all__ = [
    "MAX_REPLICATES",
    "SEED_MAX",
    "MAX_RESAMPLES",
    "CALIBRATOR_INPUTS",
    "TypedSettings",
    "StudyFields",
    "SplitFields",
    "PipelineFields",
    "AggregationFields",
    "Replicates",
    "Resamples",
    "Seed",
    "CiLevel",
    "Fraction",
    "Probability",
    "Positive",
    "NonNegative",
    "Count",
    "CalibratorInput",
    "Url",
    "Strings",
    "OneOf",
    "integer",
    "number",
    "listed",
    "one_of",
    "refuse",
    "check_panels",
    "check_export",
    "describe_error",
]

#: Replicates (splits, seeds, work units) a run may plan: each is a task and a committed part.
MAX_REPLICATES = 10_000
#: Resamples (bootstrap, permutation, sign-flip, max-t draws) per test: each costs memory of the size of the data.
MAX_RESAMPLES = 100_000
#: What Step 1 hands to the calibrators: P(Y=1) clipped at eps (spec §3.4) or the unclipped log-odds.
CALIBRATOR_INPUTS = ("probability", "logit")


def _not_bool(value: Any) -> Any:
    # YAML reads `yes`/`true` as a bool, which pydantic would take as 1 for a number.
    if isinstance(value, bool):
        raise PydanticCustomError("bool_as_number", "a bool where a number is expected")
    return value


def _as_list(value: Any) -> Any:
    # A scalar where a list is expected is a list of one (`--set panels=top3`), never a sequence of characters.
    if value is None or isinstance(value, list | tuple):
        return value
    return [value]


class OneOf:
    """A string setting's allowed values (``Annotated[str, OneOf(CHOICES)]``): validated and published in the JSON
    Schema as ``Literal[CHOICES]`` would be, while the choices stay a tuple constant of the module that defines them
    and type checkers read the field as ``str``."""

    def __init__(self, choices: Iterable[str]) -> None:
        self.choices = tuple(choices)

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.literal_schema(list(self.choices))

    def __repr__(self) -> str:
        return f"OneOf({self.choices!r})"


def _with(info: FieldInfo, *validators: Any) -> FieldInfo:
    # A FieldInfo's metadata is applied in order after its constraints, as the same items in `Annotated` would be.
    info.metadata.extend(validators)
    return info


def integer(ge: int | None = None, le: int | None = None, **field: Any) -> FieldInfo:
    """The constraints of an integer setting in ``[ge, le]`` (bools refused): ``Annotated[int, integer(2)]``."""
    return _with(Field(ge=ge, le=le, **field), BeforeValidator(_not_bool))


def number(**bounds: Any) -> FieldInfo:
    """The constraints of a real setting with ``gt``/``ge``/``lt``/``le`` bounds (bools, inf and nan refused):
    ``Annotated[float, number(gt=0.0)]``."""
    return _with(Field(allow_inf_nan=False, **bounds), BeforeValidator(_not_bool))


def listed(*, min_length: int = 0, **field: Any) -> FieldInfo:
    """The constraints of a list setting, stored as a tuple, in which a scalar is a list of one:
    ``Annotated[tuple[str, ...], listed(min_length=1)]``."""
    return _with(Field(min_length=min_length or None, **field), BeforeValidator(_as_list))


def one_of(choices: Iterable[str]) -> OneOf:
    """The allowed values of a string setting: ``Annotated[str, one_of(CHOICES)]``."""
    return OneOf(choices)


# The shared settings, as aliases a type checker reads (int, float, str, tuple) with the range pydantic checks.
Replicates = Annotated[int, integer(1, MAX_REPLICATES, description=f"replicates of the run (at most {MAX_REPLICATES})")]
Resamples = Annotated[int, integer(1, MAX_RESAMPLES, description=f"resamples per test (at most {MAX_RESAMPLES})")]
Seed = Annotated[int, integer(0, SEED_MAX, description=f"random seed, in [0, {SEED_MAX}] (int64-safe with offsets)")]
CiLevel = Annotated[float, number(gt=0.0, lt=1.0, description="confidence level of the intervals")]
Fraction = Annotated[float, number(gt=0.0, lt=1.0)]
Probability = Annotated[float, number(ge=0.0, le=1.0)]
Positive = Annotated[float, number(gt=0.0)]
NonNegative = Annotated[float, number(ge=0.0)]
Count = Annotated[int, integer(0)]
#: What Step 1 hands to the calibrators (the studies, the fitted model documents and the API read it as one).
CalibratorInput = Annotated[str, one_of(CALIBRATOR_INPUTS)]
Url = Annotated[str | None, Field(examples=["URL"], description="an ingested dataset URL")]
Strings = Annotated[tuple[str, ...], listed()]
TopK = re.compile(r"top([1-9][0-9]*)")
_PARTIAL: contextvars.ContextVar[bool] = contextvars.ContextVar("judgecal_settings_partial", default=False)
_VALIDATING: contextvars.ContextVar[bool] = contextvars.ContextVar("judgecal_settings_validating", default=False)


class TypedSettings(BaseModel):
    """Base of the typed settings: frozen (hashable, immutable), unknown keys refused, errors one line.

    Build from files with :meth:`from_mapping` (errors name the file); keyword construction in code raises the
    same :class:`ConfigError`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=False)
    #: How the error message tells the user to fix a setting: ``{key}``, ``{source}``, ``{example}``.
    fix_hint: ClassVar[str] = "set {key} in {source} or --set {key}={example}"
    #: What the ``data`` setting must name when a run needs it ("" = the settings have no required ``data``).
    data_required: ClassVar[str] = ""

    @model_validator(mode="after")
    def _data_given(self) -> Any:
        if self.data_required and not getattr(self, "data", None) and not _PARTIAL.get():
            raise refuse("data", None, f"required ({self.data_required})")
        return self

    def __init__(self, /, **values: Any) -> None:
        if _VALIDATING.get():  # inside from_mapping (pydantic calls a custom __init__): it reports the error
            super().__init__(**values)
            return
        try:
            super().__init__(**values)
        except ValidationError as err:
            raise ConfigError(describe_error(err, type(self), values, source=None)) from err

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], *, source: str, partial: bool = False) -> Self:
        """Validate ``values`` (a YAML mapping after ``--set`` overrides) read from ``source``.

        ``partial`` leaves ``data`` optional (``judgecal config show`` of a config without data); every other
        setting is checked.
        """
        tokens = _VALIDATING.set(True), _PARTIAL.set(partial)
        try:
            return cls.model_validate(dict(values))
        except ValidationError as err:
            raise ConfigError(describe_error(err, cls, values, source=source)) from err
        finally:
            _VALIDATING.reset(tokens[0])
            _PARTIAL.reset(tokens[1])

    def values(self) -> dict[str, Any]:
        """The settings as plain data (lists as tuples), every default filled: the run's recorded config."""
        return self.model_dump()


class StudyFields(TypedSettings):
    """Settings every study has: the data it reads and the level of the intervals it reports."""

    data: Url = None
    ci_level: CiLevel = 0.95

    @property
    def data_url(self) -> str:
        """``data`` where a run reads it: validation refuses a run without it (``data_required``)."""
        if not self.data:
            raise ConfigError(
                f"data: required ({self.data_required or 'a dataset URL'}; set data in the config or --set data=URL)"
            )
        return self.data


class SplitFields(StudyFields):
    """Settings of a study that repeats its evaluation over seeded replicates (splits or fresh draws)."""

    replicates: Replicates = 100
    seed: Seed = 0

    @property
    def seeds(self) -> list[int]:
        """The replicates' seeds: ``seed``, ``seed + 1``, ..., one per replicate."""
        return [self.seed + i for i in range(self.replicates)]


class PipelineFields(TypedSettings):
    """Hyperparameters of the aggregate -> calibrate pipeline, shared by the panel studies (flat YAML keys)."""

    eps: Annotated[float, number(gt=0.0, lt=0.5, description="probability clipping floor")] = 1e-6
    alpha0: Positive = Field(default=1.0, description="Beta prior of one-coin accuracies: alpha")
    beta0: Positive = Field(default=1.0, description="Beta prior of one-coin accuracies: beta")
    class_prior: Annotated[str, one_of(("half", "empirical"))] = "half"
    beta_penalty: NonNegative = Field(default=0.01, description="elastic net toward the identity (beta calibration)")
    beta_l1_ratio: Probability = 0.5
    beta_penalty_scale: Annotated[str, one_of(("mean", "sum"))] = "mean"
    n_bins: Annotated[int, integer(2, 10_000, description="ECE bins")] = 10
    calibrator_input: CalibratorInput = Field(
        default="logit", description="what the calibrators read: the aggregator's log-odds or its probability"
    )


class AggregationFields(TypedSettings):
    """Hyperparameters of the iterative and stacked aggregators (Dawid-Skene, logistic stacking)."""

    ds_n_iter: Annotated[int, integer(1, 100_000, description="Dawid-Skene iteration cap")] = 100
    stacking_c: Positive = Field(default=1.0, description="inverse L2 penalty of logistic stacking")
    stacking_folds: Annotated[int, integer(2, 100, description="cross-fitting folds of stacking")] = 5


def refuse(key: str, value: Any, allowed: str) -> PydanticCustomError:
    """The error a cross-field check raises inside a model validator: ``key=value: allowed`` (``allowed`` reads
    ``must be ...`` or ``required ...``)."""
    return PydanticCustomError("setting", "{key}: {allowed}", {"key": key, "value": value, "allowed": allowed})


def check_panels(panels: Sequence[str], known: Sequence[str]) -> None:
    """Panels hold ``all`` and otherwise ``known`` names or ``topK`` with K >= 1."""
    bad = [p for p in panels if p not in known and not TopK.fullmatch(p)]
    if bad or "all" not in panels:
        named = ", ".join(k for k in known if k != "all" and not TopK.fullmatch(k))
        allowed = f"must be a list holding all and otherwise {named + ', ' if named else ''}topK (K >= 1)"
        raise refuse("panels", list(panels), allowed)


def check_export(export: str, aggregators: Sequence[str], calibrators: Sequence[str], panels: Sequence[str]) -> None:
    """``export`` is ``auto`` or a candidate ``aggregator+calibrator@panel`` of the configured lists (the pipeline a
    run exports as ``model/model.json`` instead of its recommended one)."""
    if export == "auto":
        return
    agg, _, rest = export.partition("+")
    cal, _, panel = rest.partition("@")
    if (
        agg not in aggregators
        or cal not in calibrators
        or panel not in panels
        or panel not in ("all", "dedup")
        and not TopK.fullmatch(panel)
    ):
        raise refuse(
            "export",
            export,
            "must be auto or a candidate aggregator+calibrator@panel of the configured aggregators, calibrators "
            "and fixed panels (e.g. one_coin+beta@all)",
        )


# -- error messages ---------------------------------------------------------------------------------------------


def describe_error(
    err: ValidationError, cls: type[TypedSettings], values: Mapping[str, Any], *, source: str | None
) -> str:
    """One line for a rejected configuration: the first bad setting (and how many more), or the unknown keys."""
    errors = err.errors()
    known = sorted(cls.model_fields)
    unknown = sorted(str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden")
    where = f"{source}: " if source else ""
    if unknown:
        close = [m for key in unknown for m in difflib.get_close_matches(key, known, n=1)]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        return f"{where}unknown setting(s) {unknown}{hint}; known: {known}"
    first = errors[0]
    if first["type"] == "setting":
        key, value, allowed = first["ctx"]["key"], first["ctx"]["value"], first["ctx"]["allowed"]
    elif _mapping_entry(cls, first["loc"], values):  # a bad entry of a mapping setting: name the dotted key
        name, entry = str(first["loc"][0]), str(first["loc"][1])
        key, value = f"{name}.{entry}", values[name][entry]
        allowed = "must be " + _describe(get_args(cls.model_fields[name].annotation)[1])
        default = cls.model_fields[name].get_default(call_default_factory=True) or {}
        example = default.get(entry, next(iter(default.values()), None))
        fix = f"set {key} in {source} or --set {key}={show(example)}" if source else f"e.g. {key}={show(example)}"
        return f"{key}={show(value)}: {allowed} ({fix})"
    else:
        key = str(first["loc"][0]) if first["loc"] else "settings"
        value = values.get(key, first.get("input"))
        allowed = _allowed(cls.model_fields[key]) if key in cls.model_fields else first["msg"]
        # A missing entry of a fixed-length list (loc key, index) is a short list, not a missing setting.
        missing = (first["type"] == "missing" and len(first["loc"]) == 1) or (
            value is None and "or null" not in allowed
        )
        allowed = f"required, {allowed}" if missing else f"must be {allowed}"
    line = f"{key}={show(value)}: {allowed} ({_fix(cls, key, source)})"
    more = sorted({str(e["loc"][0]) for e in errors[1:] if e["loc"]} - {key})
    return line + (f"; also rejected: {', '.join(more)}" if more else "")


def _mapping_entry(cls: type[TypedSettings], loc: tuple[Any, ...], values: Mapping[str, Any]) -> bool:
    """Whether ``loc`` points into an entry of a mapping setting (``prices.full``) given in ``values``."""
    field = cls.model_fields.get(str(loc[0])) if loc else None
    given = values.get(str(loc[0])) if loc else None
    return (
        field is not None
        and get_origin(field.annotation) is dict
        and len(loc) >= 2
        and isinstance(given, Mapping)
        and loc[1] in given
    )


def _fix(cls: type[TypedSettings], key: str, source: str | None) -> str:
    field = cls.model_fields.get(key.split(",")[0].strip())
    if field is None:
        return f"fix {key} in {source}" if source else f"fix {key}"
    example = field.examples[0] if field.examples else field.get_default(call_default_factory=True)
    if source is None:
        return f"e.g. {key}={show(example)}"
    return cls.fix_hint.format(key=key, source=source, example=show(example))


def show(value: Any, limit: int = 80) -> str:
    """A setting's value as a user would write it after ``--set`` (lists in brackets; long values cut)."""
    if isinstance(value, list | tuple):
        text = "[" + ", ".join(show(v, limit) for v in value) + "]"
    elif isinstance(value, Mapping):
        text = "{" + ", ".join(f"{k}: {show(v, limit)}" for k, v in value.items()) + "}"
    elif value is None:
        text = "null"
    elif isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, str):
        text = value if re.fullmatch(r"[\w.:/@+-]+", value) else repr(value)
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _allowed(field: FieldInfo) -> str:
    """What a field accepts, in words, from its type and constraints (``an integer >= 2``)."""
    return _describe(field.annotation, field.metadata)


def _describe(tp: Any, metadata: Sequence[Any] = ()) -> str:
    choices = next((m.choices for m in metadata if isinstance(m, OneOf)), None)
    if choices is not None:
        return "one of " + ", ".join(choices)
    origin = get_origin(tp)
    if origin is Annotated:
        base, *extra = get_args(tp)
        flat = [m for item in extra for m in (item.metadata if isinstance(item, FieldInfo) else [item])]
        return _describe(base, [*flat, *metadata])
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(tp) if a is not type(None)]
        text = " or ".join(_describe(a, metadata) for a in options)
        return text + " or null" if len(options) < len(get_args(tp)) else text
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in get_args(tp))
    if origin is tuple:
        args = get_args(tp)
        size = next((m.min_length for m in metadata if isinstance(m, at.MinLen)), 0)
        head = "a non-empty list" if size else "a list"
        if len(args) == 2 and args[1] is Ellipsis:
            return f"{head}, each {_describe(args[0])}"
        return f"a list of {len(args)}, each {_describe(args[0])}"
    if origin in (dict, Mapping):
        return f"a mapping, each value {_describe(get_args(tp)[1])}"
    if tp in (dict, Mapping):
        return "a mapping"
    base = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(tp, str(tp))
    return base + _bounds(metadata)


def _bounds(metadata: Sequence[Any]) -> str:
    low = high = None
    for m in metadata:
        if isinstance(m, at.Ge | at.Gt):
            low = ("[", m.ge) if isinstance(m, at.Ge) else ("(", m.gt)
        elif isinstance(m, at.Le | at.Lt):
            high = ("]", m.le) if isinstance(m, at.Le) else (")", m.lt)
    if low and high:
        return f" in {low[0]}{_bound(low[1])}, {_bound(high[1])}{high[0]}"
    if low:
        return f" {'>=' if low[0] == '[' else '>'} {_bound(low[1])}"
    if high:
        return f" {'<=' if high[0] == ']' else '<'} {_bound(high[1])}"
    return ""


def _bound(value: Any) -> str:
    # An integer bound is shown exactly (a seed's 4611686018427387903, not 4.61169e+18); a real one as %g.
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else f"{value:g}"
