"""Release configuration: the TOML file, validated, with the defaults in default_config.toml."""
from __future__ import annotations

import math
import re
import tomllib
from decimal import Decimal
from enum import StrEnum
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator,
                      ValidationError, model_serializer, model_validator)
from pydantic_core import PydanticCustomError

from pseo_das.epsilon import (MAX_EPSILON, MAX_TOTAL_EPSILON, epsilon_range_problem,
                              epsilon_text, exact_epsilon)
from pseo_das.errors import PseoDasError
from pseo_das.schemas.codes import DEGREE_LEVELS, STATE_FIPS
from pseo_das.schemas.distribution import TableFormat
from pseo_das.schemas.pseo_layout import published_percentiles

DEFAULT_CONFIG_PATH = Path(__file__).with_name("default_config.toml")

CIP_LEVELS = ("4", "2", "A")  # finest to coarsest: 4-digit, 2-digit, all fields


class ConfigError(PseoDasError, ValueError):
    """The release configuration is unusable."""

    quotes_records = False


RELEASE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# Keys that earlier versions read from a release configuration and that now belong to the
# privacy store's policy (a release configuration cannot raise them).
STORE_POLICY_KEYS = {("privacy", "lifetime_epsilon_cap"): "--lifetime-cap"}


def check_release_id(release_id: str) -> str:
    """A release id names folders, measurements and MLflow runs: letters, digits, '.',
    '_' and '-', starting with a letter or digit, at most 64 characters."""
    if not isinstance(release_id, str) or not RELEASE_ID.fullmatch(release_id):
        raise ConfigError(f"release id {release_id!r} is not allowed: use 1 to 64 letters, "
                          "digits, '.', '_' or '-', starting with a letter or digit "
                          "(e.g. 2027Q1)")
    return release_id


def _exact_epsilon(largest: Fraction, zero_allowed: bool = False) -> PlainValidator:
    """An epsilon as the exact number written: a TOML decimal (read as Decimal: 0.1 is 1/10),
    an integer or a Fraction, or a float of a recorded configuration (JSON: the decimal it
    prints as, the one `_as_json` wrote). Within [MIN_EPSILON, largest] (0 passes where
    `zero_allowed`: "none measured"), and exactly the decimal its double prints as, so that
    config.json, its SHA-256 and the MLflow parameters, which write it as a double, hold it
    exactly. Text and booleans are refused (a configuration writes numbers)."""
    def validate(value: object) -> Fraction:
        if isinstance(value, bool) or not isinstance(value, (Decimal, int, float, Fraction)):
            raise PydanticCustomError("float_type", "Input should be a valid number")
        if not (value.is_finite() if isinstance(value, Decimal) else math.isfinite(value)):
            raise PydanticCustomError("finite_number", "Input should be a finite number")
        if value < 0 or (value == 0 and not zero_allowed):
            raise (PydanticCustomError("greater_than_equal", "Input should be greater than or "
                                       "equal to 0") if zero_allowed else
                   PydanticCustomError("greater_than", "Input should be greater than 0"))
        if value == 0:
            return Fraction(0)
        problem = epsilon_range_problem(value, largest)
        if problem:
            raise PydanticCustomError("epsilon_range", problem)
        exact = exact_epsilon(value)
        if Fraction(repr(float(exact))) != exact:
            raise PydanticCustomError(
                "epsilon_digits", "more digits than a double holds (config.json would record "
                "it as {double}); write at most 15 significant digits",
                {"double": repr(float(exact))})
        return exact
    return PlainValidator(validate)


def _as_json(epsilon: Fraction) -> float:
    """An epsilon in config.json and the MLflow parameters: the double that prints as its
    decimal (`_exact_epsilon` accepts no other), as configurations have always been written."""
    return float(epsilon)


_AS_JSON = PlainSerializer(_as_json, return_type=float, when_used="json")
# The epsilon of one measurement (0: none measured, where allowed), and a release's cap
# (pseo_das/epsilon.py): exact rationals, in whichever section a field has the type.
Epsilon = Annotated[Fraction, _exact_epsilon(MAX_EPSILON), _AS_JSON]
EpsilonOrZero = Annotated[Fraction, _exact_epsilon(MAX_EPSILON, zero_allowed=True), _AS_JSON]
EpsilonCap = Annotated[Fraction, _exact_epsilon(MAX_TOTAL_EPSILON), _AS_JSON]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class FrameNotInIpeds(StrEnum):
    """What a release does with the cells of its frame that the public IPEDS completions do
    not show (tasks/inputs/frame_check.py)."""
    WITHHOLD = "withhold"   # not measured, not published: the frame is the public one
    FLAG = "flag"           # measured and published, IPEDS counts flagged 3 (not available)


class CellsConfig(_Strict):
    first_cohort_year: int = Field(ge=1900, le=2100)
    last_earnings_year: int = Field(ge=1900, le=2100)
    years_after: tuple[Literal[1, 5, 10], ...] = Field(min_length=1)
    default_cohort_years: int = Field(ge=1, le=10)
    cohort_years_by_degree: dict[str, int] = {}
    # FrameNotInIpeds' values (text: the configuration is validated strictly). The default
    # configuration (default_config.toml) says "withhold", which is written out. A missing
    # key means "flag", what releases did before the check existed, and "flag" dumps
    # without the key (config.json and the configuration's SHA-256 as before; a stored
    # configuration of an earlier version reads as what it did).
    frame_not_in_ipeds: Literal["withhold", "flag"] = FrameNotInIpeds.FLAG.value

    @model_validator(mode="after")
    def _consistent(self) -> "CellsConfig":
        if len(set(self.years_after)) != len(self.years_after):
            raise ValueError(f"cells.years_after = {list(self.years_after)}: each years-after "
                             "may be listed once")
        if self.first_cohort_year > self.last_earnings_year:
            raise ValueError(f"cells.first_cohort_year = {self.first_cohort_year} is after "
                             f"cells.last_earnings_year = {self.last_earnings_year}")
        bad = {k: v for k, v in self.cohort_years_by_degree.items() if not 1 <= v <= 10}
        if bad:
            raise ValueError(f"cells.cohort_years_by_degree = {bad}: cohort windows are 1 to "
                             "10 years long")
        unknown = sorted(set(self.cohort_years_by_degree) - set(DEGREE_LEVELS))
        if unknown:
            raise ValueError(f"cells.cohort_years_by_degree: {unknown} are not degree levels "
                             f"(expected some of {', '.join(DEGREE_LEVELS)})")
        return self

    def cohort_years(self, degree_level: str) -> int:
        return self.cohort_years_by_degree.get(degree_level, self.default_cohort_years)

    def cohort_definition(self) -> dict:
        """The cohort windows as every question records them (its `cohorts` parameter): the
        privacy store charges a measurement to the graduation years of these windows."""
        return {"first_cohort_year": self.first_cohort_year,
                "default_cohort_years": self.default_cohort_years,
                "cohort_years_by_degree": dict(sorted(self.cohort_years_by_degree.items()))}


class EarningsConfig(_Strict):
    sample_floor: float = Field(ge=0)
    bin_edges: tuple[int, ...] = Field(min_length=2)
    top_bin_upper: int
    percentiles: tuple[int, ...] = Field(min_length=1)
    min_publish_count: int = Field(ge=1)
    dollar_year: int = Field(default=2016, ge=1997, le=2100)  # of the floor, edges and bound
    publication_dollar_year: int = Field(default=2023, ge=1997, le=2100)

    @model_validator(mode="after")
    def _bins_increase(self) -> "EarningsConfig":
        edges = list(self.bin_edges)
        for a, b in zip(edges, edges[1:]):
            if b <= a:
                raise ValueError(f"earnings.bin_edges must be strictly increasing ({a} then {b})")
        if self.top_bin_upper <= edges[-1]:
            raise ValueError("earnings.top_bin_upper must exceed the last bin edge")
        if edges[0] != self.sample_floor:
            raise ValueError("earnings.bin_edges[0] must equal earnings.sample_floor "
                             "(the first bin starts at the floor of the earnings universe)")
        listed = list(self.percentiles)
        if len(set(listed)) != len(listed):
            raise ValueError(f"earnings.percentiles = {listed}: each percentile may be "
                             "listed once")
        official = published_percentiles()
        if set(listed) != set(official):
            raise ValueError(
                f"earnings.percentiles = {listed}: the official earnings file pseoe_all.csv "
                f"has columns for the percentiles {list(official)} only (y1_p"
                f"{official[0]}_earnings, ...); give exactly those")
        return self

    @property
    def n_bins(self) -> int:
        return len(self.bin_edges)

    @property
    def bin_upper(self) -> tuple[int, ...]:
        """Upper bound of each bin; the top bin's is the interpolation bound."""
        return tuple(self.bin_edges[1:]) + (self.top_bin_upper,)


# The largest contribution bound accepted (a person with more degrees keeps the earliest).
MAX_DEGREES_PER_PERSON = 10


class PrivacyConfig(_Strict):
    epsilon_per_tabulation: Epsilon
    epsilon_cap: EpsilonCap
    store: str = ""   # the privacy store folder, if neither --store nor PSEO_DAS_STORE names one
    cip_levels: dict[Literal["4", "2", "A"], Literal["measure", "derive"]]
    # Contribution bound: a person counts with at most this many degree records (the
    # earliest; tasks/inputs/degree_records.py), and every measured count is noised for
    # sensitivity k (geometric: q = exp(-epsilon / k)). Part of every question when above 1.
    max_degrees_per_person: int = Field(default=1, ge=1, le=MAX_DEGREES_PER_PERSON)

    @model_validator(mode="after")
    def _levels(self) -> "PrivacyConfig":
        if set(self.cip_levels) != set(CIP_LEVELS):
            raise ValueError(f"privacy.cip_levels must name each of {CIP_LEVELS}")
        if self.cip_levels["4"] != "measure":
            raise ValueError('privacy.cip_levels: the finest level "4" must be "measure"')
        return self

    def measured_levels(self) -> list[str]:
        return [lvl for lvl in CIP_LEVELS if self.cip_levels[lvl] == "measure"]


# How the noisy flows of an origin cell are made non-negative integers with a total:
# "appendix": technical appendix A.3.1-A.3.2 as written, the total is the sum of the cell's
# noisy flows; "measured-total": the same weighted removal, but the total is the cell's
# graduate count measured as its own tabulation (flows.total_epsilon_per_tabulation), and a
# deficit is added in proportion to the kept flows (docs/method/flows-accuracy.md).
APPENDIX_CORRECTION = "appendix"
MEASURED_TOTAL_CORRECTION = "measured-total"


EMPLOYER_KEYS = ("mechanism", "employer_alpha", "employer_delta", "log_laplace_unbiased")


class FlowsConfig(_Strict):
    epsilon_per_tabulation: Epsilon
    cip_levels: dict[Literal["4", "2", "A"], Literal["measure", "derive"]] = Field(min_length=1)
    nonemployed_weight: float = Field(gt=0)
    division_unobserved_share_max: float = Field(ge=0, le=1)
    # Defaults: what releases of earlier versions did (their recorded configurations have
    # neither key); default_config.toml sets the measured total.
    correction: Literal["appendix", "measured-total"] = APPENDIX_CORRECTION
    total_epsilon_per_tabulation: EpsilonOrZero = Fraction(0)
    # How the flows are measured (tasks/privacy/establishment.py): "geometric" protects the
    # graduates (epsilon-DP); "log-laplace", "smooth-gamma" and "smooth-laplace" protect the
    # employers too ((alpha, epsilon) employer-employee privacy, Haney et al. 2017), at
    # flows.epsilon_per_tabulation, and need the outcomes column employer_id.
    mechanism: Literal["geometric", "log-laplace", "smooth-gamma", "smooth-laplace"] = "geometric"
    employer_alpha: float = Field(default=0.1, gt=0)
    employer_delta: float = Field(default=0, ge=0, lt=1)   # smooth-laplace only
    log_laplace_unbiased: bool = False

    @model_validator(mode="after")
    def _levels(self) -> "FlowsConfig":
        levels = [lvl for lvl in CIP_LEVELS if lvl in self.cip_levels]
        if self.cip_levels[levels[0]] != "measure":
            raise ValueError(f'flows.cip_levels: the finest level listed ("{levels[0]}") '
                             'must be "measure"')
        if self.correction == MEASURED_TOTAL_CORRECTION and self.total_epsilon_per_tabulation <= 0:
            raise ValueError('flows.correction = "measured-total" measures each origin cell\'s '
                             'graduate count: flows.total_epsilon_per_tabulation must be above 0')
        if self.correction == APPENDIX_CORRECTION and self.total_epsilon_per_tabulation != 0:
            raise ValueError('flows.correction = "appendix" uses the noisy sum of the flows as '
                             'the total and measures none: set flows.total_epsilon_per_tabulation '
                             '= 0 (or flows.correction = "measured-total")')
        protection = self.employer_protection()
        if protection is not None:
            from pseo_das.tasks.privacy.establishment import InfeasibleParameters
            try:
                protection.check()
            except InfeasibleParameters as exc:
                raise ValueError(f"flows.mechanism = \"{self.mechanism}\" (employer_alpha "
                                 f"{self.employer_alpha:g}, epsilon_per_tabulation "
                                 f"{epsilon_text(self.epsilon_per_tabulation)}, employer_delta "
                                 f"{self.employer_delta:g}) cannot be given: {exc}") from None
        elif self.employer_delta or self.log_laplace_unbiased:
            raise ValueError('flows.employer_delta and flows.log_laplace_unbiased are for the '
                             'employer-protecting flows.mechanism values only')
        return self

    @model_serializer(mode="wrap")
    def _without_unused_employer_keys(self, handler):
        """With the geometric mechanism the employer keys are unused and left out, so the
        configuration (config.json, its SHA-256, the MLflow parameters) is the same as
        before they existed."""
        data = handler(self)
        if not self.protects_employers:
            for key in EMPLOYER_KEYS:
                data.pop(key, None)
        return data

    @property
    def protects_employers(self) -> bool:
        return self.mechanism != "geometric"

    def employer_protection(self):
        """The EmployerProtection of the flows measurements, or None (geometric)."""
        if not self.protects_employers:
            return None
        from pseo_das.tasks.privacy.establishment import EmployerProtection, FlowsMechanism
        return EmployerProtection(FlowsMechanism(self.mechanism), self.employer_alpha,
                                  float(self.epsilon_per_tabulation), self.employer_delta,
                                  self.log_laplace_unbiased)

    @property
    def measures_total(self) -> bool:
        return self.correction == MEASURED_TOTAL_CORRECTION

    def levels(self) -> list[str]:
        """The CIP levels of the flows, finest first."""
        return [lvl for lvl in CIP_LEVELS if lvl in self.cip_levels]

    def measured_levels(self) -> list[str]:
        return [lvl for lvl in self.levels() if self.cip_levels[lvl] == "measure"]


class CipConfig(_Strict):
    """The CIP vintages of the data and the recast of CIP-2010 codes to CIP-2020 (technical
    appendix B)."""
    switch_year: int = Field(default=2020, ge=1990, le=2100)
    unseen_transition_weight: float = Field(default=1e-6, gt=0, lt=1)


class ReleaseSection(_Strict):
    """What kind of release this is."""
    production: bool = False   # refuse the packaged SYNTHETIC demo reference files
    # every release is held for the disclosure review board (`release --hold-for-review`).
    # How a release is cleared, not what it computes: left out of the configuration's
    # dump, so config.json, its SHA-256 and the run's parameters are those of before.
    require_review: bool = Field(default=False, exclude=True)


class PublicationConfig(_Strict):
    """How the public files are written (schemas/distribution.py): the data tables gzipped
    as the Census Bureau distributes them (`csv.gz`) or plain CSV (`csv`)."""
    format: Literal["csv.gz", "csv"] = TableFormat.CSV_GZ.value
    xlsx: bool = True          # all/pseoe_all.xlsx, the labelled earnings file
    parquet: bool = True       # all/parquet/ and all/datapackage.json (pseo-das's extension)
    # the partners files' data providers, by state FIPS code (pseo_[st]_partners.txt)
    data_providers: dict[str, tuple[str, ...]] = {}

    @property
    def table_format(self) -> TableFormat:
        return TableFormat(self.format)

    @model_validator(mode="after")
    def _states(self) -> "PublicationConfig":
        unknown = sorted(set(self.data_providers) - set(STATE_FIPS))
        if unknown:
            raise ValueError(f"publication.data_providers: {', '.join(unknown)} not the 2-digit "
                             "FIPS code of one of the 50 states or DC")
        return self


MOS_ACKNOWLEDGEMENT_KEY = "acknowledge_not_formally_dp"


class MosConfig(_Strict):
    """The optional cell statistics product pseom_all.csv (mean earnings 1, 5 and 10 years
    after graduation and earnings growth from 1 to 5 years per cell) by maximum observed
    sensitivity (Chetty and Friedman 2019; docs/method/cell-statistics.md). Off by default.
    The "mos" variant is NOT a formal differential-privacy guarantee (its scale chi is
    computed from the data and published without noise): enabling it requires
    `acknowledge_not_formally_dp = true`. "mos-dp" replaces chi by the public worst case
    (upper - lower) and is epsilon-DP."""
    enabled: bool = False
    acknowledge_not_formally_dp: bool = False
    variant: Literal["mos", "mos-dp"] = "mos"
    # epsilon of each statistic's values and, again, of its noisy counts (2 x epsilon per
    # statistic; statistics add up: 4 statistics = 8 x epsilon)
    epsilon: Epsilon = Fraction(1, 10)
    # public bounds of one graduate's earnings, in the bins' constant dollars; 0 = the
    # earnings floor (lower) and the histograms' interpolation bound (upper)
    lower: float = Field(default=0, ge=0)
    upper: float = Field(default=0, ge=0)
    min_count: int = Field(default=3, ge=2)   # cells with fewer observations publish nothing
    chi_scope: Literal["degree_level", "release"] = "degree_level"

    @model_validator(mode="after")
    def _acknowledged(self) -> "MosConfig":
        if self.enabled and self.variant == "mos" and not self.acknowledge_not_formally_dp:
            raise ValueError(
                "mos.enabled = true with mos.variant = \"mos\": maximum observed sensitivity is "
                "NOT a formal differential-privacy guarantee (its scale chi is computed from "
                "the confidential data and published without noise). Set "
                f"mos.{MOS_ACKNOWLEDGEMENT_KEY} = true to publish it anyway, or use "
                "mos.variant = \"mos-dp\" (formally epsilon-DP, noisier); nothing was read "
                "or spent")
        if self.upper and self.upper <= self.lower:
            raise ValueError(f"mos.upper = {self.upper} must exceed mos.lower = {self.lower}")
        return self

    def bounds(self, earnings: "EarningsConfig") -> tuple[float, float]:
        """(lower, upper): the configured bounds, or the floor and interpolation bound."""
        lower = self.lower or float(earnings.sample_floor)
        upper = self.upper or float(earnings.top_bin_upper)
        if upper <= lower:
            raise ValueError(f"mos bounds: upper {upper} must exceed lower {lower}")
        return lower, upper

    def n_statistics(self, years_after: tuple[int, ...]) -> int:
        """mean_yk for each k of {1, 5, 10} tabulated, and growth_1_5 with 1 and 5."""
        kept = set(years_after) & {1, 5, 10}
        return len(kept) + (1 if {1, 5} <= kept else 0)


class EmployerTableConfig(_Strict):
    """The optional employer-side table pseoemp_all.csv (a pseo-das extension): employed
    graduates by state x NAICS sector of the job, per graduation cohort and years after,
    measured with an employer-protecting mechanism ((alpha, epsilon) employer-employee
    privacy, Haney et al. 2017; tasks/employment_flows/employer_table.py). Off by default;
    needs the outcomes column employer_id. Each (cohort, years after) is a durable question
    of the privacy store charged `epsilon` to every population of the cohort."""
    enabled: bool = False
    mechanism: Literal["log-laplace", "smooth-gamma", "smooth-laplace"] = "smooth-laplace"
    alpha: float = Field(default=0.01, gt=0)
    epsilon: Epsilon = Fraction(1, 2)
    delta: float = Field(default=1e-3, ge=0, lt=1)   # smooth-laplace only (ignored otherwise)
    unbiased: bool = False                           # log-laplace only

    @model_validator(mode="after")
    def _feasible(self) -> "EmployerTableConfig":
        if self.enabled:
            from pseo_das.tasks.privacy.establishment import InfeasibleParameters
            try:
                self.protection().check()
            except InfeasibleParameters as exc:
                raise ValueError(f"employer_table.mechanism = \"{self.mechanism}\" (alpha "
                                 f"{self.alpha:g}, epsilon {epsilon_text(self.epsilon)}, delta "
                                 f"{self.delta:g}) cannot be given: {exc}") from None
        return self

    def protection(self):
        """The EmployerProtection of the table's measurements."""
        from pseo_das.tasks.privacy.establishment import EmployerProtection, FlowsMechanism
        return EmployerProtection(FlowsMechanism(self.mechanism), self.alpha,
                                  float(self.epsilon),
                                  self.delta if self.mechanism == "smooth-laplace" else 0.0,
                                  self.unbiased)


class ReleaseConfig(_Strict):
    cells: CellsConfig
    earnings: EarningsConfig
    privacy: PrivacyConfig
    flows: FlowsConfig
    cip: CipConfig = CipConfig()
    release: ReleaseSection = ReleaseSection()
    mos: MosConfig = MosConfig()
    employer_table: EmployerTableConfig = EmployerTableConfig()
    publication: PublicationConfig = PublicationConfig()

    @model_serializer(mode="wrap")
    def _without_default_mos(self, handler):
        """A configuration without the cell statistics (or the employer-side table) dumps as
        earlier versions' did (its SHA-256, config.json and the recorded plans stay the same)."""
        dumped = handler(self)
        if self.mos == MosConfig():
            dumped.pop("mos", None)
        if self.employer_table == EmployerTableConfig():
            dumped.pop("employer_table", None)
        if self.publication == PublicationConfig():
            dumped.pop("publication", None)
        if self.privacy.max_degrees_per_person == 1 and isinstance(dumped.get("privacy"), dict):
            dumped["privacy"].pop("max_degrees_per_person", None)   # as before the bound existed
        if self.cells.frame_not_in_ipeds == FrameNotInIpeds.FLAG and \
                isinstance(dumped.get("cells"), dict):
            dumped["cells"].pop("frame_not_in_ipeds", None)   # as before the frame check existed
        return dumped

    @model_validator(mode="after")
    def _bounded_products(self) -> "ReleaseConfig":
        """Sensitivity k > 1 is calibrated for the geometric counts only: the products
        whose mechanisms assume sensitivity 1 are refused with it."""
        k = self.privacy.max_degrees_per_person
        if k == 1:
            return self
        refused = ([f'flows.mechanism = "{self.flows.mechanism}"']
                   if self.flows.protects_employers else []) \
            + (["employer_table.enabled = true"] if self.employer_table.enabled else []) \
            + (["mos.enabled = true"] if self.mos.enabled else [])
        if refused:
            raise ValueError(
                f"privacy.max_degrees_per_person = {k} needs every measurement noised for "
                f"sensitivity {k}; only the two-sided geometric counts (earnings histograms, "
                "geometric flows and their origin totals) are calibrated for it, not "
                f"{', '.join(refused)}: set privacy.max_degrees_per_person = 1 or turn "
                "those off; nothing was read or spent")
        return self

    @model_validator(mode="after")
    def _budget(self) -> "ReleaseConfig":
        total = self.planned_total_epsilon()
        if total > self.privacy.epsilon_cap:
            raise ValueError(
                f"planned total epsilon {epsilon_text(total)} (earnings: "
                f"{self.n_earnings_tabulations()} tabulations x "
                f"{epsilon_text(self.privacy.epsilon_per_tabulation)}; flows: "
                f"{self.n_flows_tabulations()} x {epsilon_text(self.flows.epsilon_per_tabulation)}"
                + (f"; flows origin counts: {self.n_flows_total_tabulations()} x "
                   f"{epsilon_text(self.flows.total_epsilon_per_tabulation)}"
                   if self.flows.measures_total else "")
                + (f"; cell statistics (MOS): {self.n_mos_tabulations()} x "
                   f"{epsilon_text(self.mos.epsilon)}" if self.mos.enabled else "")
                + (f"; employer-side table: {self.n_employer_table_tabulations()} x "
                   f"{epsilon_text(self.employer_table.epsilon)}"
                   if self.employer_table.enabled else "") + ")"
                f" exceeds privacy.epsilon_cap {epsilon_text(self.privacy.epsilon_cap)}")
        return self

    def measured_cip_levels(self) -> list[str]:
        """The CIP levels either product measures (the cell frames a release builds)."""
        return sorted(set(self.privacy.measured_levels()) | set(self.flows.measured_levels()))

    def n_earnings_tabulations(self) -> int:
        return len(self.cells.years_after) * len(self.privacy.measured_levels())

    def n_flows_tabulations(self) -> int:
        return len(self.cells.years_after) * len(self.flows.measured_levels())

    def n_flows_total_tabulations(self) -> int:
        """Measured origin-cell graduate counts: one per flows tabulation with the
        measured-total correction, none with the appendix's."""
        return self.n_flows_tabulations() if self.flows.measures_total else 0

    def n_mos_tabulations(self) -> int:
        """The cell statistics' measurements: per statistic its values and its counts."""
        return 2 * self.mos.n_statistics(self.cells.years_after) if self.mos.enabled else 0

    def n_employer_table_tabulations(self) -> int:
        """The employer-side table: one tabulation per years after (its cohorts are
        disjoint graduates: parallel for them)."""
        return len(self.cells.years_after) if self.employer_table.enabled else 0

    def planned_total_epsilon(self) -> Fraction:
        """The release's total epsilon, exactly (sequential composition)."""
        return (self.n_employer_table_tabulations() * self.employer_table.epsilon
                + self.n_mos_tabulations() * self.mos.epsilon
                + self.n_earnings_tabulations() * self.privacy.epsilon_per_tabulation
                + self.n_flows_tabulations() * self.flows.epsilon_per_tabulation
                + self.n_flows_total_tabulations() * self.flows.total_epsilon_per_tabulation)

    def flat(self) -> dict[str, object]:
        """Every configuration value as a flat {section.key: value} mapping (for MLflow)."""
        out: dict[str, object] = {}
        for section, values in self.model_dump(mode="json").items():
            for key, value in values.items():
                out[f"{section}.{key}"] = value
        return out


def _merge(base: dict, override: dict) -> dict:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


# Keys a configuration dumps without at a model default that default_config.toml does not
# share: a dump (config.json, an audit run's parameters) without them meant that default.
MISSING_MEANS = {"cells": {"frame_not_in_ipeds": FrameNotInIpeds.FLAG.value}}


def meaning_of_missing(config: dict) -> dict:
    """A dumped configuration with the MISSING_MEANS values of the keys it lacks, so that
    loading it over default_config.toml (`load_config`) gives what it meant."""
    return {**config, **{section: {**values, **config.get(section, {})}
                         for section, values in MISSING_MEANS.items()}}


def load_config(path: Path | None = None) -> ReleaseConfig:
    """Defaults from default_config.toml, overridden by the values in `path` if given."""
    raw = tomllib.loads(DEFAULT_CONFIG_PATH.read_text(), parse_float=Decimal)
    source = "default configuration"
    if path is not None:
        source = str(path)
        try:
            raw = _merge(raw, tomllib.loads(Path(path).read_bytes().decode("utf-8"),
                                            parse_float=Decimal))
        except FileNotFoundError as exc:
            raise ConfigError(f"{path}: cannot read configuration: file not found") from exc
        except UnicodeDecodeError as exc:
            line = exc.object.count(b"\n", 0, exc.start) + 1
            raise ConfigError(f"{path}: cannot read configuration: not UTF-8 text (byte "
                              f"0x{exc.object[exc.start]:02x} on line {line}); TOML files "
                              "are UTF-8") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: cannot read configuration: not valid TOML: {exc}") from exc
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read configuration: {exc}") from exc
    try:
        # strict: numbers given as text or booleans are refused; decimals stay exact for the
        # epsilons (Decimal), and become doubles for every other number
        return ReleaseConfig.model_validate(_tuples(raw), strict=True)
    except ValidationError as exc:
        problems = "\n".join(f"  {_describe(error)}" for error in exc.errors())
        raise ConfigError(f"{source}: invalid configuration:\n{problems}") from exc


def _tuples(value: object) -> object:
    """TOML arrays as the tuples the configuration's fields are."""
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _shown(value: object) -> str:
    """An offending value as the configuration wrote it: a decimal as the double it reads as
    (its own digits when a double cannot hold them), an array as a list."""
    if isinstance(value, Decimal):
        held = not value.is_finite() or Decimal(repr(float(value))) == value
        return repr(float(value)) if held else str(value)
    return repr(list(value) if isinstance(value, tuple) else value)


def _describe(error) -> str:
    """One configuration error as `section.key = value: what is wrong`."""
    loc = tuple(str(part) for part in error["loc"])
    where = ".".join(loc)
    if error["type"] == "extra_forbidden" and loc in STORE_POLICY_KEYS:
        return (f"{where}: the lifetime cap is the privacy store's policy, not a release "
                f"setting; the agency changes it with `pseo-das store set-policy "
                f"{STORE_POLICY_KEYS[loc]} VALUE --by WHO --reason WHY`")
    if error["type"] == "extra_forbidden":
        known = ReleaseConfig.model_fields
        for part in loc[:-1]:
            known = getattr(known[part].annotation, "model_fields", {})
        kind = "section" if len(loc) == 1 else "key"
        return f"{where}: unknown {kind}; expected one of {', '.join(known)}"
    if error["type"] in ("model_type", "dict_type"):
        return f"{where} = {_shown(error['input'])}: must be a TOML table (a [section] or {{ key = value }})"
    if error["type"] == "value_error":  # our own validators: the message names the keys
        return error["msg"].removeprefix("Value error, ")
    return f"{where} = {_shown(error['input'])}: {error['msg']}"
