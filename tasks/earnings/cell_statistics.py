"""The cell statistics product (pseom_all.csv, a pseo-das extension): mean earnings 1, 5 and
10 years after graduation and earnings growth from 1 to 5 years, per institution x degree
level x graduation cohort (all fields), by maximum observed sensitivity (MOS, Chetty and
Friedman 2019) or its formally private variant mos-dp.

Privacy:
  * mos: per statistic, the value of each cell with N_g >= min_count gets
    Laplace(chi / (epsilon N_g)), chi = max N_g LS_g over the scope (mos.py), and every
    observable cell's N_g gets two-sided geometric noise at epsilon. 2 epsilon per
    statistic (cells in parallel, statistics in sequence). NOT a formal DP guarantee: chi
    is computed from the data and published without noise, the scale uses the true N_g,
    and which cells reach min_count depends on the true N_g. The ledger marks the values'
    entries `formal_guarantee = no`.
  * mos-dp: per statistic, every observable cell's sum of (x - lower) gets
    Laplace((upper - lower) / epsilon) and its N_g geometric noise at epsilon; the
    published mean is lower + noisy sum / noisy count where the noisy count reaches
    min_count (post-processing). epsilon-DP per measurement (up to the floating-point
    Laplace sampler), 2 epsilon per statistic.
True values never leave `measure_cell_statistics`: it returns noisy values, the ledger
entries and chi (which MOS publishes by design).

Each statistic is a question of the release plan (cell_statistics_plan.py): the measuring
task measures only the plan's pending measurements (populations never measured for the
question), each over the cells of its own populations, with noise streams keyed by the
measurement id; the values are kept in the privacy store and every later release reads
them back (`tasks/measurements/stored_cell_statistics.py`) at zero epsilon. Under mos, chi is the
maximum over the cells measured together (those of one measurement, per scope group).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig
from pseo_das.epsilon import epsilon_text
from pseo_das.schemas.codes import STATUS_NOT_AVAILABLE, STATUS_OK, STATUS_SUPPRESSED
from pseo_das.schemas.pseo_layout import Product, layout
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.earnings.mos import (ChiScope, MosVariant, chi_by_scope,
                                         mean_local_sensitivity, mos_dp_mean, mos_noise_scale)
from pseo_das.tasks.earnings.cell_statistics_plan import (PRODUCT, STORED_COLUMNS,
                                                          CellStatisticsQuestion,
                                                          StatisticSettings, statistic_domain)
from pseo_das.tasks.inputs.cell_moments import CELL_STATISTICS_CIP_LEVEL, CellMoments
from pseo_das.tasks.inputs.cells import CELL_COLUMNS, MEASURED_CELL_COLUMNS, in_populations
from pseo_das.tasks.privacy.geometric import measure_with_geometric_noise
from pseo_das.tasks.privacy.laplace import measure_with_laplace_noise
from pseo_das.tasks.privacy.ledger import (LedgerEntry, NoisyMeasurement, entry_of_ledger_row,
                                           ledger_row)
from pseo_das.tasks.codes.official_codes import ALL_INDUSTRIES, NATIONAL, agg_level, official_cells

if TYPE_CHECKING:
    from pseo_das.tasks.inputs.true_counts import TrueCounts

CELL_STATISTICS_FILE = "pseom_all.csv"
COMPOSITION = ("parallel across the cells of this tabulation (each graduate one observation "
               "of one cell); sequential with every other tabulation")


def values_composition(settings: StatisticSettings) -> str:
    """The ledger's composition text of a statistic's values."""
    if settings.formal:
        return (f"{COMPOSITION}; noise Laplace((U - L) / epsilon) on each cell's sum of x - L, "
                "mean = L + noisy sum / noisy count (mos-dp: epsilon-DP)")
    return (f"{COMPOSITION}; noise Laplace(chi / (epsilon N_g)) with chi = max N_g x LS_g "
            f"over the cells of each {settings.chi_scope} measured together (published without "
            f"noise), cells with N_g >= {settings.min_count}: NOT a formal DP guarantee")


@dataclass(frozen=True)
class NoisyCellStatistics:
    """What the measuring task returns: only noisy values, chi and the ledger entries."""
    variant: str
    table: pd.DataFrame        # CELL_COLUMNS, statistic, noisy_count, value, chi, published
    entries: list[LedgerEntry]
    chi: dict[str, dict[str, float]]   # statistic -> scope group -> chi (published)
    epsilon: str
    lower: float
    upper: float
    min_count: int
    chi_scope: str
    # How the release used the privacy store for them (read from its plan): units
    # (statistic x population) measured and reused, and the new epsilon of any population.
    # None: a release of an earlier version, which measured them outside the store.
    store_use: dict | None = None

    def record(self) -> dict:
        """The JSON form kept in the publication record (noisy values only)."""
        return {"variant": self.variant, "chi": self.chi, "epsilon": self.epsilon,
                "lower": self.lower, "upper": self.upper, "min_count": self.min_count,
                "chi_scope": self.chi_scope,
                "entries": [ledger_row(e) for e in self.entries]}

    @classmethod
    def from_record(cls, record: dict, table: pd.DataFrame) -> "NoisyCellStatistics":
        entries = [entry_of_ledger_row(e) for e in record["entries"]]
        return cls(record["variant"], table, entries, record["chi"], record["epsilon"],
                   record["lower"], record["upper"], record["min_count"], record["chi_scope"])


def _scope_labels(cells: pd.DataFrame, scope: ChiScope) -> np.ndarray:
    if scope == ChiScope.RELEASE:
        return np.full(len(cells), "all", dtype=object)
    return cells["degree_level"].astype(str).to_numpy()


def measure_statistic(moments: CellMoments, question: CellStatisticsQuestion,
                      release_seed: bytes, measurement_id: str, last_earnings_year: int,
                      populations: pd.DataFrame | None = None
                      ) -> tuple[pd.DataFrame, list[LedgerEntry], dict[str, float]]:
    """One statistic over its observable cells (of `populations`, when given: the cells
    measured together, over which chi is the maximum), noise from the streams of
    `measurement_id` (module doc), as the question's statements declare. Returns the cells
    (MEASURED_CELL_COLUMNS) with their noisy values, the ledger entries and chi per scope
    group. Privacy cost: 2 x epsilon (values and counts) on the populations measured."""
    settings = StatisticSettings.of(question)
    values_statement, counts_statement = question.statements(measurement_id)
    statistic, epsilon = settings.statistic, settings.epsilon
    if (moments.lower, moments.upper) != (settings.lower, settings.upper):
        raise ValueError(f"{measurement_id}: the moments were read with the bounds "
                         f"{moments.lower}, {moments.upper}, the question has {settings.lower}, "
                         f"{settings.upper}")
    lower, upper = statistic_domain(statistic, moments.lower, moments.upper)
    observable = moments.frame.observable(statistic.years_after, last_earnings_year)
    if populations is not None:
        observable = observable & in_populations(moments.frame.cells, populations)
    cells = moments.frame.cells[observable].reset_index(drop=True)
    m = moments.statistics[statistic]
    n, total = m.n[observable], m.total[observable]
    counted = measure_with_geometric_noise(release_seed, counts_statement, cells,
                                           n.reshape(-1, 1))
    noisy_count = np.asarray(counted.values)[:, 0]
    value = np.full(len(cells), np.nan)
    chi_cell = np.full(len(cells), np.nan)
    if not settings.formal:
        eligible = n >= settings.min_count
        sensitivity = mean_local_sensitivity(n[eligible], total[eligible],
                                             m.lowest[observable][eligible],
                                             m.highest[observable][eligible], lower, upper)
        scope = _scope_labels(cells[eligible], ChiScope(settings.chi_scope))
        chi_eligible, groups = chi_by_scope(n[eligible], sensitivity, scope)
        theta = total[eligible] / n[eligible]
        noisy, entry = measure_with_laplace_noise(
            release_seed, values_statement, theta,
            mos_noise_scale(chi_eligible, n[eligible], float(epsilon)),
            values_composition(settings), float(groups.max()) if len(groups) else 0.0)
        value[eligible], chi_cell[eligible] = noisy, chi_eligible
        published = eligible
        chi = {str(k): float(v) for k, v in groups.items()}
    else:
        width = upper - lower
        noisy_sum, entry = measure_with_laplace_noise(
            release_seed, values_statement, total - n * lower,
            np.full(len(cells), width / float(epsilon)), values_composition(settings))
        value, published = mos_dp_mean(noisy_sum, noisy_count, lower, upper, settings.min_count)
        chi_cell[:] = width
        chi = {"all": width}
    table = cells[MEASURED_CELL_COLUMNS].assign(statistic=statistic.value,
                                                noisy_count=noisy_count, value=value,
                                                chi=chi_cell, published=published)
    return table, [entry, counted.entry], chi


@release_task("measure cell statistics (MOS)")
def measure_cell_statistics(pending: dict[int, list], counts: TrueCounts,
                            cfg: ReleaseConfig) -> list[NoisyMeasurement]:
    """The plan's pending cell-statistics measurements (by years after; populations never
    measured for the question), each over its own populations, from the
    moments the counting pass counted (`counts.moments`), noise from the seed of the
    attempt that planned (and paid for) it. Returns the noisy values to keep in the privacy
    store (cells x STORED_COLUMNS, float). Privacy cost: the question's epsilon (2 x
    mos.epsilon) on each population measured, the values' part NOT formally DP under the
    "mos" variant; nothing for populations already measured. True values stay inside."""
    started = time.perf_counter()
    measured, said = [], []
    moments = counts.moments
    for mine in pending.values():
        for measurement in mine:
            if moments is None:
                raise ValueError(f"{measurement.measurement_id}: the cell statistics are planned "
                                 "but their sufficient statistics were not read")
            table, entries, _ = measure_statistic(
                moments, measurement.question, measurement.seed.bits,
                measurement.measurement_id, cfg.cells.last_earnings_year,
                measurement.populations)
            values = table[list(STORED_COLUMNS)].to_numpy(np.float64)
            measured.append(NoisyMeasurement(measurement.measurement_id,
                                             table[MEASURED_CELL_COLUMNS], values, entries[0]))
            said.append(f"{measurement.measurement_id} {int(table['published'].sum()):,} of "
                        f"{len(table):,} cells")
    progress("measured the cell statistics: " + (", ".join(said) or "nothing new (all reused "
                                                 "from the privacy store)")
             + f" ({time.perf_counter() - started:.1f} s)")
    return measured


def round_cents(values: np.ndarray) -> np.ndarray:
    """Whole dollars, halves up (as the percentiles)."""
    return np.floor(np.asarray(values, np.float64) + 0.5)


def cell_statistics_table(measured: NoisyCellStatistics, dollar_factor: float) -> pd.DataFrame:
    """pseom_all.csv: one row per cell with the official identifier columns of
    pseoe_all.csv (agg_level_pseo of the institution x degree x all fields x cohort level),
    then per statistic the value (whole dollars of the publication year), its noisy count,
    its chi and a status flag (1 published, 5 suppressed: under min_count, -1 not
    available). Privacy cost: none (post-processing)."""
    table = measured.table
    cells = table[CELL_COLUMNS].drop_duplicates(["institution", "degree_level", "cipcode",
                                                 "grad_cohort"])
    cells = cells.sort_values(["institution", "degree_level", "grad_cohort"],
                              kind="stable").reset_index(drop=True)
    frame = official_cells(cells, "I", CELL_STATISTICS_CIP_LEVEL)
    frame.insert(0, "agg_level_pseo", agg_level(Product.PSEOE, "I", CELL_STATISTICS_CIP_LEVEL, True))
    frame = frame.assign(geo_level=NATIONAL[0], geography=NATIONAL[1],
                         ind_level=ALL_INDUSTRIES[0], industry=ALL_INDUSTRIES[1])
    frame = frame[list(layout(Product.PSEOE).identifiers)]
    keys = pd.MultiIndex.from_frame(cells[["institution", "degree_level", "grad_cohort"]]
                                    .astype({"institution": str, "degree_level": str}))
    columns = {}
    for statistic in dict.fromkeys(table["statistic"]):
        mine = table[table["statistic"] == statistic]
        aligned = mine.set_index(pd.MultiIndex.from_frame(
            mine[["institution", "degree_level", "grad_cohort"]]
            .astype({"institution": str, "degree_level": str}))).reindex(keys)
        present = aligned["noisy_count"].notna().to_numpy()
        published = aligned["published"].fillna(False).to_numpy(dtype=bool)
        value = aligned["value"].to_numpy(np.float64) * dollar_factor
        columns[statistic] = pd.array(np.where(published, round_cents(value), np.nan),
                                      dtype="Int64")
        columns[f"{statistic}_count"] = pd.array(aligned["noisy_count"].to_numpy(np.float64),
                                                 dtype="Int64")
        columns[f"{statistic}_chi"] = np.where(published, np.round(
            aligned["chi"].to_numpy(np.float64) * dollar_factor, 2), np.nan)
        columns[f"status_{statistic}"] = np.select([published, present],
                                                   [STATUS_OK, STATUS_SUPPRESSED],
                                                   STATUS_NOT_AVAILABLE)
    return pd.concat([frame, pd.DataFrame(columns)], axis=1)


STATISTIC_MEANINGS = {
    "mean_y1": "mean annual earnings 1 year after graduation",
    "mean_y5": "mean annual earnings 5 years after graduation",
    "mean_y10": "mean annual earnings 10 years after graduation",
    "growth_1_5": "mean change of a graduate's annual earnings from 1 to 5 years after "
                  "graduation, over the graduates with earnings in the universe both years "
                  "(4 x the within-graduate OLS slope on years after)",
}


def cell_statistics_layout(statistics: list[str], publication_year: int | None) -> list[tuple[str, str]]:
    """The columns of pseom_all.csv after the identifiers, with their meaning."""
    dollars = f"{publication_year} dollars" if publication_year else "dollars"
    rows = []
    for s in statistics:
        rows += [(s, f"{STATISTIC_MEANINGS[s]}, whole {dollars}, noisy; empty unless status 1"),
                 (f"{s}_count", "the noisy number of observations of the statistic in the cell "
                                "(two-sided geometric noise)"),
                 (f"{s}_chi", f"the chi of the cell's noise ({dollars}): the noise added to "
                              f"`{s}` is Laplace with scale chi / (epsilon N), N the true "
                              "number of observations (mos); for mos-dp the public worst case "
                              "U - L"),
                 (f"status_{s}", "1 published; 5 suppressed (fewer observations than the "
                                 "minimum); -1 not available (the cohort cannot have the "
                                 "years after yet)")]
    return rows


def cell_statistics_context(measured: NoisyCellStatistics, pseom: pd.DataFrame,
                            dollar_factor: float, publication_year: int | None) -> dict:
    """What the release notes, the DRB report and MLflow say about pseom_all.csv (the
    release's guarantee, formal and non-formal parts apart, is the ledger's)."""
    statistics = list(dict.fromkeys(measured.table["statistic"]))
    return {
        "file": CELL_STATISTICS_FILE, "rows": len(pseom), "variant": measured.variant,
        "formal": measured.variant == MosVariant.MOS_DP.value,
        "epsilon": measured.epsilon, "lower": measured.lower, "upper": measured.upper,
        "min_count": measured.min_count, "chi_scope": measured.chi_scope,
        "store_use": measured.store_use,
        "statistics": [{"name": s, "meaning": STATISTIC_MEANINGS[s],
                        "published": int((pseom[f"status_{s}"] == STATUS_OK).sum()),
                        "suppressed": int((pseom[f"status_{s}"] == STATUS_SUPPRESSED).sum()),
                        "chi": {group: round(value * dollar_factor, 2)
                                for group, value in measured.chi[s].items()}}
                       for s in statistics],
        "layout": cell_statistics_layout(statistics, publication_year),
    }


def cell_statistics_summary(measured: NoisyCellStatistics) -> dict:
    """release_summary.json's entry: the variant, the epsilon its values carry (ledger) and
    how much of it this release newly spent (the privacy store's lifetime budget per
    population: reused measurements cost nothing). The release's guarantee, formal and
    non-formal parts apart, is release_summary.json's `guarantee`."""
    spent = sum((e.epsilon for e in measured.entries), Fraction(0))
    if measured.store_use is not None:
        return {"file": CELL_STATISTICS_FILE, "variant": measured.variant,
                "formal_guarantee": measured.variant == MosVariant.MOS_DP.value,
                "epsilon": measured.epsilon, "ledger_epsilon": epsilon_text(spent),
                **measured.store_use, "chi": measured.chi}
    # a release of an earlier version (measured outside the store)
    return {"file": CELL_STATISTICS_FILE, "variant": measured.variant,
            "formal_guarantee": measured.variant == MosVariant.MOS_DP.value,
            "epsilon_spent": epsilon_text(spent), "chi": measured.chi}
