"""Settings of the regime-map study: what its modules share."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field, model_validator

from judgecal_dist.io.growth import INTERACTION_REGIMES, N_JUDGES, REGIMES
from judgecal_dist.io.rubric_panel import DOC_ROWS
from judgecal_dist.methods.fcps.frontier import MAX_FRONTIER_JUDGES
from judgecal_dist.methods.fcps.joint_table import FALLBACKS
from judgecal_dist.methods.fcps.paths import PATH_RULES
from judgecal_dist.methods.fcps.scalar_families import SCALAR_FAMILIES
from judgecal_dist.methods.fcps.select import MENUS
from judgecal_dist.settings import (
    MAX_REPLICATES,
    Count,
    NonNegative,
    Positive,
    SplitFields,
    Url,
    integer,
    listed,
    number,
    one_of,
    refuse,
)

#: Spec 002 §6.2's label-blind default pool of shared LLMBar evaluators (six backbones + one correlated judge).
LLMBAR7 = (
    "GPT-4/Vanilla",
    "ChatGPT/Vanilla",
    "ChatGPT-0301/Vanilla",
    "PaLM2/Vanilla",
    "LLaMA2/Vanilla",
    "Falcon/Vanilla",
    "GPT-4/CoT",
)
#: Spec 002 §3.4's tau grid of the hybrid (tau = inf, the pure scalar, is the scalar menu itself).
HYBRID_TAUS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
#: Spec 002 §3.5's main low-dimensional alternatives.
SCALAR_MAIN = ("mean_iso", "ridge_iso", "logistic")
#: Menus whose selections the run cannot export (the unsupervised jury).
NOT_EXPORTABLE = ("jury",)
#: Prefix of a `data` value that names a simulated regime instead of a dataset URL (`synthetic:<regime>`).
SYNTHETIC = "synthetic:"
#: Prefix of the ``path`` of the single-judge rows (Table 3's best single judge); no menu selects among them.
SINGLE = "single:"
#: Settings that synthetic data never reads (its blocks are drawn fresh and its path is the pool order) ...
_SYNTHETIC_UNREAD = (
    "paths",
    "lam",
    "selection_rows",
    "validation_rows",
    "test_rows",
    "single_judges",
    "cfps",
    "cfps_cap",
    "cold_start_sizes",
    "cold_start_folds",
    "cold_start_prior",
    "cold_start_families",
    "alpha_grid",
    "split_variants",
)
#: ... and settings it reads only to resample real patterns (semi_real_source).
_SEMI_REAL_ONLY = ("pool", "position_balance", "sample")
#: The rubric regime: 1-5 score judges and a [0, 1] target (the scalar verdict schema), documents of 16 rows.
RUBRIC = "scalar"
#: Settings of the binary-target growth generators (their law, the exact-risk parts), which only they read.
_GROWTH_ONLY = (
    "growth_a",
    "growth_w",
    "growth_noise",
    "growth_gamma",
    "growth_b",
    "growth_c",
    "interaction_weights",
    "semi_real_source",
    "population_rows",
    "decomposition",
    "boundary_reps",
)
#: Settings that the rubric regime never reads.
_RUBRIC_UNREAD = _GROWTH_ONLY
#: Settings that real data never reads.
_REAL_UNREAD = ("synthetic_validation_rows", "synthetic_test_rows", *_GROWTH_ONLY)


class Config(SplitFields):
    """Settings of the regime-map study (``studies/configs/regime_map.yaml``); every key can be ``--set``."""

    data_required: ClassVar[str] = "a dataset URL, or synthetic:additive|mixed|parity|xor|and|scalar"

    data: Url = Field(
        default=None,
        examples=["synthetic:additive"],
        description="a dataset URL, or synthetic:additive|mixed|parity|xor|and|scalar (scalar: 1-5 rubric judges)",
    )
    pool: Annotated[tuple[str, ...], listed(min_length=1)] = LLMBAR7
    verdict_schema: Annotated[str, one_of(("pairwise", "scalar"))] = Field(
        default="pairwise",
        description="a dataset URL's verdicts: pairwise A/B/tie, or scalar 1-5 rubric scores (verdicts.score, "
        "target labels.label_score)",
    )
    position_balance: bool = True
    sample: Count = 0
    replicates: Annotated[int, integer(2, MAX_REPLICATES)] = Field(
        default=30, description="splits (>= 2 for paired intervals)"
    )
    budgets: Annotated[tuple[Annotated[int, integer(2)], ...], listed(min_length=1)] = (20, 50, 100, 200, 300)
    selection_rows: Annotated[int, integer(1)] = 100
    validation_rows: Annotated[int, integer(1)] = 100
    test_rows: Annotated[int, integer(1)] = 200
    paths: Annotated[tuple[Annotated[str, one_of(PATH_RULES)], ...], listed(min_length=1)] = (
        "information_first",
        "complexity_penalised",
        "random",
    )
    families: Annotated[tuple[Annotated[str, one_of(SCALAR_FAMILIES)], ...], listed(min_length=1)] = SCALAR_FAMILIES
    max_k: Annotated[int, integer(1)] | None = None
    alpha: NonNegative = 1.0
    fallback: Annotated[str, one_of(FALLBACKS)] = "global"
    fallbacks: Annotated[tuple[Annotated[str, one_of(FALLBACKS[1:])], ...], listed()] = Field(
        default=FALLBACKS[1:],
        description="extra table menus with these unseen-pattern fallbacks ; [] for none",
    )
    hybrid_taus: Annotated[tuple[Annotated[float, number(gt=0.0)], ...], listed()] = Field(
        default=HYBRID_TAUS,
        description="hybrid residual shrinkage taus (tau = inf is the scalar menu); [] for none",
    )
    jury: bool = Field(default=True, description="the unsupervised Dawid-Skene jury menu")
    nll_selection: bool = Field(default=True, description="also select the scalar menu on validation NLL")
    main_families: Annotated[tuple[Annotated[str, one_of(SCALAR_FAMILIES)], ...], listed(min_length=1)] = Field(
        default=SCALAR_MAIN, description="the scalar_main menu (the main scalar families)"
    )
    single_judges: bool = Field(default=True, description="the best-single-judge comparator (real data)")
    cfps: bool = Field(default=True, description="calibration-frontier judge subsets as table candidates (real data)")
    cfps_cap: Annotated[int, integer(1)] = Field(
        default=8, description="most frontier subsets kept per split and budget"
    )
    cold_start_sizes: Annotated[tuple[Annotated[int, integer(4)], ...], listed()] = Field(
        default=(16, 64),
        description="cold start: labelled rows (whole groups) that both build paths and fit (real data); [] for none",
    )
    cold_start_folds: Annotated[int, integer(2)] = Field(
        default=4, description="grouped folds of the cold start's out-of-fold losses"
    )
    cold_start_prior: Annotated[str, one_of(SCALAR_FAMILIES)] = Field(
        default="one_coin_iso", description="the task-type prior the guard falls back on (all judges)"
    )
    cold_start_families: Annotated[
        tuple[Annotated[str, one_of((*SCALAR_FAMILIES, "table"))], ...], listed(min_length=1)
    ] = Field(
        default=("mean_iso", "one_coin_iso", "ridge_iso", "table"),
        description="families the cold start's naive selector searches (every path and k)",
    )
    alpha_grid: Annotated[tuple[NonNegative, ...], listed()] = Field(
        default=(),
        description="table pseudo-counts crossed with the global and lower-prefix fallbacks on the "
        "information-first path, a test-side sensitivity (real data; e.g. [0, 0.5, 1, 2, 5]); [] for none",
    )
    split_variants: Annotated[tuple[Annotated[str, one_of(("selection_heavy", "validation_heavy"))], ...], listed()] = (
        Field(
            default=(),
            description="re-plan every split with selection/validation rows x1.5/x0.5 (selection_heavy) or the reverse "
            "and select the full menu at the largest budget (real data); [] for none",
        )
    )
    lam: NonNegative = 0.25
    ridge_lam: NonNegative = 1.0
    logistic_c: Positive = 1.0
    synthetic_validation_rows: Annotated[int, integer(1, 10_000_000)] = 512
    synthetic_test_rows: Annotated[int, integer(1, 10_000_000)] = 20_000
    growth_a: Annotated[float, number()] = 0.8
    growth_w: Annotated[float, number()] = 0.5
    growth_noise: NonNegative = 0.0
    growth_gamma: Annotated[float, number()] = 0.0
    growth_b: NonNegative = Field(default=2.0, description="XOR interaction strength b")
    growth_c: NonNegative = Field(default=2.0, description="AND interaction strength c")
    interaction_weights: (
        Annotated[tuple[Annotated[float, number(ge=0.0, le=1.0)], ...], listed(min_length=1)] | None
    ) = Field(
        default=None,
        description="with synthetic:xor|and|parity, the sweep eta_w = (1-w) eta_add + w eta_regime",
    )
    semi_real_source: str | None = None
    ci_level: Annotated[float, number(gt=0.5, lt=1.0)] = 0.95
    export: str = Field(
        default="auto",
        description="the menu whose selection (first split, largest budget) is exported as model/model.json: auto "
        "(the recommended menu: table, scalar, or union when neither wins) or a menu such as table, scalar, union, "
        "scalar_main, full, table_hierarchical, hybrid",
    )
    decomposition: bool = Field(
        default=True, description="synthetic: split the selected candidates' risk into prefix, approximation, fit"
    )
    population_rows: Annotated[int, integer(1_000)] = Field(
        default=1_000_000, description="synthetic: rows of the population fit of each family (its best member)"
    )
    boundary_reps: Count = Field(
        default=40,
        description="synthetic: Monte Carlo refits per budget and main family of the regime boundary; 0: off",
    )
    proxy_bootstrap: Count = Field(
        default=2000, description="cluster-bootstrap resamples of the proxy score's AUC and gap; 0: no interval"
    )
    proxy_permutations: Count = Field(
        default=10_000, description="within-budget permutations of the proxy score's AUC test; 0: no test"
    )

    @model_validator(mode="after")
    def _check(self) -> Config:
        if self.synthetic and self.regime not in (*REGIMES, RUBRIC):
            raise refuse(
                "data",
                self.data,
                f"must be a URL or synthetic:REGIME with REGIME one of {', '.join(REGIMES)}, {RUBRIC}",
            )
        if list(self.budgets) != sorted(set(self.budgets)):
            raise refuse("budgets", list(self.budgets), "must be distinct ascending row counts >= 2")
        if len(set(self.pool)) != len(self.pool):
            raise refuse("pool", list(self.pool), "must name distinct judge ids")
        if self.synthetic and self.semi_real_source and len(self.pool) != N_JUDGES:
            raise refuse("pool", list(self.pool), f"must name {N_JUDGES} judges with semi_real_source")
        self._refuse_what_does_not_apply()
        exportable = ("auto", *MENUS, *(m for m in extra_menus(self) if m not in NOT_EXPORTABLE))
        if self.export not in exportable:
            raise refuse(
                "export",
                self.export,
                f"must be one of {', '.join(exportable)} (the jury menu exports no model)",
            )
        panel = N_JUDGES if self.synthetic else len(self.pool)
        if self.main_families != SCALAR_MAIN and not set(self.main_families) <= set(self.families):
            raise refuse("main_families", list(self.main_families), f"must be among families {list(self.families)}")
        if not self.synthetic and self.cfps and len(self.pool) > MAX_FRONTIER_JUDGES:
            raise refuse("cfps", True, f"must be false with a pool of more than {MAX_FRONTIER_JUDGES} judges")
        if list(self.cold_start_sizes) != sorted(set(self.cold_start_sizes)):
            raise refuse("cold_start_sizes", list(self.cold_start_sizes), "must be distinct ascending row counts")
        if self.alpha_grid and "information_first" not in self.paths:
            raise refuse("alpha_grid", list(self.alpha_grid), "needs the information_first path in paths (or [])")
        if self.max_k is not None and self.max_k > panel:
            raise refuse("max_k", self.max_k, f"must be at most the panel's {panel} judges (or null)")
        return self

    def _refuse_what_does_not_apply(self) -> None:
        """A setting changed from its default that the chosen data never reads is refused, never ignored."""
        if self.regime == RUBRIC:
            self._refuse_for_rubric()
        if self.synthetic and self.verdict_schema != "pairwise":
            raise refuse(
                "verdict_schema",
                self.verdict_schema,
                f"applies to a dataset URL; synthetic:{RUBRIC} is the 1-5 rubric panel; remove it",
            )
        if not self.synthetic and self.verdict_schema == "scalar" and self.position_balance:
            raise refuse(
                "position_balance",
                self.position_balance,
                "does not apply to 1-5 rubric scores (no presentation order); set position_balance: false",
            )
        if self.synthetic:
            regime = self.regime
            if self.interaction_weights is not None and regime not in INTERACTION_REGIMES:
                raise refuse(
                    "interaction_weights",
                    list(self.interaction_weights),
                    f"must be null unless data is synthetic:{'|'.join(INTERACTION_REGIMES)} "
                    "(it mixes an interaction with the additive regime)",
                )
            unread = _SYNTHETIC_UNREAD if self.semi_real_source else (*_SYNTHETIC_UNREAD, *_SEMI_REAL_ONLY)
        else:
            unread = _REAL_UNREAD
        changed = [key for key in unread if getattr(self, key) != type(self).model_fields[key].default]
        if changed:
            key = changed[0]
            if not self.synthetic:
                why = "does not apply to a dataset URL (it configures the synthetic generators)"
            elif key in _SEMI_REAL_ONLY:
                why = "does not apply to synthetic data without semi_real_source (the generator draws the judges)"
            else:
                why = "does not apply to synthetic data (fresh blocks; the pool order is the only path)"
            more = f" (nor do {', '.join(changed[1:])})" if len(changed) > 1 else ""
            raise refuse(key, getattr(self, key), f"{why}{more}; remove it")

    def _refuse_for_rubric(self) -> None:
        """The rubric regime: whole documents of 16 rows and no binary-target generator settings (the jury menu,
        the risk bookkeeping and the regime boundary, which model a binary target, are left out and the report
        says so)."""
        changed = [key for key in _RUBRIC_UNREAD if getattr(self, key) != type(self).model_fields[key].default]
        if changed:
            more = f" (nor do {', '.join(changed[1:])})" if len(changed) > 1 else ""
            raise refuse(
                changed[0],
                getattr(self, changed[0]),
                f"does not apply to synthetic:{RUBRIC} (its judges and targets are fixed){more}; remove it",
            )
        for key in ("budgets", "synthetic_validation_rows", "synthetic_test_rows"):
            value = getattr(self, key)
            if any(int(v) % DOC_ROWS for v in (value if isinstance(value, tuple | list) else [value])):
                raise refuse(
                    key,
                    value,
                    f"must be multiples of {DOC_ROWS} with synthetic:{RUBRIC} (whole documents of {DOC_ROWS} rows), "
                    "e.g. budgets=[32,64,128,256,512,800]",
                )

    # Shadows pydantic's deprecated classmethod `schema` (v1's name of model_json_schema, which nothing here calls).
    @property
    def schema(self) -> str:  # type: ignore[override]
        """Verdict schema of the data: ``scalar`` for the rubric regime and ``verdict_schema: scalar``."""
        if self.synthetic:
            return "scalar" if self.regime == RUBRIC else "pairwise"
        return str(self.verdict_schema)

    @property
    def synthetic(self) -> bool:
        return bool(self.data and self.data.startswith(SYNTHETIC))

    @property
    def regime(self) -> str:
        """The simulated regime ``REGIME`` of ``data: synthetic:REGIME`` ("" for a dataset URL)."""
        return self.data[len(SYNTHETIC) :] if self.data and self.synthetic else ""


def extra_menus(config: Config) -> dict[str, tuple[tuple[str, ...], str]]:
    """Menus beside table/scalar/union: name -> (families, validation criterion) (spec 002 §6.5)."""
    # The default scalar_main keeps the configured families it names (none: no scalar_main/full menus).
    main = tuple(f for f in config.main_families if f in config.families)
    menus = {"scalar_main": (main, "val_mse"), "full": (("table", *main), "val_mse")} if main else {}
    menus |= {f"table_{f}": ((f"table_{f}",), "val_mse") for f in config.fallbacks}
    if config.hybrid_taus:
        menus["hybrid"] = (("hybrid", *config.families), "val_mse")  # tau = inf is the scalar itself
    if config.jury and config.schema == "pairwise":  # the jury models A/B votes only
        menus["jury"] = (("jury",), "val_mse")
    if config.nll_selection:
        menus["scalar_nll"] = (tuple(config.families), "val_nll")
    if config.cfps and not config.synthetic and config.schema == "pairwise":  # A/B/tie/err pattern codes
        menus |= {"cfps": (("cfps",), "val_mse"), "table_cfps": (("table", "cfps"), "val_mse")}
    return menus
