"""Public earnings tables (PSEO layout) from noisy histograms: noisy cell counts,
percentiles, suppression. Privacy cost: none (post-processing of noisy counts only).

Status flags follow the LEHD public-use convention:
  1  value published;  -1  not available (the cohort cannot have this years-after yet);
  5  suppressed: the noisy graduate count is below the publication minimum.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from pseo_das.config import EarningsConfig, ReleaseConfig
from pseo_das.schemas.codes import STATUS_NOT_AVAILABLE, STATUS_OK, STATUS_SUPPRESSED
from pseo_das.schemas.outputs import pseoe_schema, pseoh_schema
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.earnings.noisy_histograms import NoisyHistograms
from pseo_das.tasks.earnings.percentiles import protected_percentiles, round_dollars
from pseo_das.tasks.inputs.constant_dollars import DollarYears

ID_COLUMNS = ["inst_level", "institution", "degree_level", "cip_level", "cipcode",
              "grad_cohort", "grad_cohort_years"]
INST_LEVEL_ORDER = ["I", "S", "N"]
CIP_LEVEL_ORDER = ["A", "2", "4"]


def cell_years(table: NoisyHistograms, cfg: EarningsConfig, dollar_factor: float) -> pd.DataFrame:
    """One row per cell of `table`: identifiers, noisy count, percentiles (converted by
    `dollar_factor` to the publication year's dollars, then rounded), published flag."""
    total = table.counts.sum(axis=1)
    published = total >= cfg.min_publish_count
    values = round_dollars(dollar_factor * protected_percentiles(
        table.counts, np.array(cfg.bin_edges), np.array(cfg.bin_upper), cfg.percentiles))
    cells = table.cells
    frame = pd.DataFrame({
        "inst_level": table.inst_level,
        "institution": cells["institution"].astype(str),
        "degree_level": cells["degree_level"].astype(str),
        "cip_level": table.cip_level,
        "cipcode": cells["cipcode"].astype(str),
        "grad_cohort": cells["grad_cohort"].astype(np.int64),
        "grad_cohort_years": cells["grad_cohort_years"].astype(np.int64),
        "years_after": table.years_after,
        "grads_earn": total,
        "published": published,
        "noise_terms": cells["noise_terms"].to_numpy(),
    })
    for k, p in enumerate(cfg.percentiles):
        frame[f"p{p}_earnings"] = values[:, k]
    return frame


def _sort(frame: pd.DataFrame, extra: list[str]) -> pd.DataFrame:
    ordered = frame.assign(
        _inst=pd.Categorical(frame["inst_level"], INST_LEVEL_ORDER, ordered=True),
        _cip=pd.Categorical(frame["cip_level"], CIP_LEVEL_ORDER, ordered=True))
    keys = ["_inst", "institution", "degree_level", "_cip", "cipcode", "grad_cohort", *extra]
    return ordered.sort_values(keys, kind="stable", ignore_index=True).drop(columns=["_inst", "_cip"])


def earnings_table(cells: pd.DataFrame, cfg: EarningsConfig, years_after: tuple[int, ...]) -> pd.DataFrame:
    """pseoe: one row per cell; y{k}_ values, then status flags, per years-after."""
    value_names = [f"p{p}_earnings" for p in cfg.percentiles] + ["grads_earn"]
    out = _sort(cells[ID_COLUMNS].drop_duplicates(), [])
    index = pd.MultiIndex.from_frame(out)
    values, statuses = {}, {}
    for k in years_after:
        aligned = cells[cells["years_after"] == k].set_index(ID_COLUMNS).reindex(index)
        present = aligned["grads_earn"].notna().to_numpy()
        published = aligned["published"].fillna(False).to_numpy(dtype=bool)
        for name in value_names:
            column = aligned[name].to_numpy(dtype=np.float64)
            values[f"y{k}_{name}"] = pd.array(np.where(published, column, np.nan), dtype="Int64")
        status = np.select([published, present], [STATUS_OK, STATUS_SUPPRESSED], STATUS_NOT_AVAILABLE)
        statuses[f"status_y{k}_earnings"] = status
        statuses[f"status_y{k}_grads_earn"] = status
    return pd.concat([out, pd.DataFrame(values), pd.DataFrame(statuses)], axis=1)


def histogram_table(tables: list[NoisyHistograms], cfg: EarningsConfig,
                    cells: pd.DataFrame) -> pd.DataFrame:
    """pseoh: noisy histograms in long form, for the cells whose values are published.
    `cells` holds one row per histogram of `tables`, in the same order."""
    counts = np.concatenate([t.counts for t in tables])
    n_bins = counts.shape[1]
    published = cells.loc[cells["published"].to_numpy(), ID_COLUMNS + ["years_after"]]
    ordered = _sort(published.assign(_row=published.index), ["years_after"])  # sort cells, not rows
    rows = ordered.pop("_row").to_numpy()
    long = ordered.loc[ordered.index.repeat(n_bins)].reset_index(drop=True)
    long["bin"] = np.tile(np.arange(1, n_bins + 1), len(rows))
    long["bin_lower"] = np.tile(np.array(cfg.bin_edges), len(rows))
    long["bin_upper"] = np.tile(np.array(cfg.bin_upper), len(rows))
    long["noisy_count"] = counts[rows].reshape(-1)
    return long


def publication_tables(tables: list[NoisyHistograms], cfg: EarningsConfig,
                       years_after: tuple[int, ...], dollar_factor: float = 1.0
                       ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(pseoe, pseoh, per-cell summary for the audit report)."""
    cells = pd.concat([cell_years(t, cfg, dollar_factor) for t in tables], ignore_index=True)
    return earnings_table(cells, cfg, years_after), histogram_table(tables, cfg, cells), cells


def recheck_percentiles(pseoe: pd.DataFrame, pseoh: pd.DataFrame, cfg: EarningsConfig,
                        years_after: tuple[int, ...], dollar_factor: float = 1.0) -> int:
    """Recompute every published percentile and count from the published histograms, as a
    user would (percentiles in the bins' dollars times `dollar_factor`); return the number
    of disagreeing values (0 expected)."""
    n_bins = cfg.n_bins
    if not (pseoh["bin"].to_numpy() == np.tile(np.arange(1, n_bins + 1), len(pseoh) // n_bins)).all():
        raise RuntimeError("pseoh.csv is not in blocks of bins 1..n per cell")
    counts = pseoh["noisy_count"].to_numpy().reshape(-1, n_bins)
    keys = pseoh.iloc[::n_bins][ID_COLUMNS + ["years_after"]].reset_index(drop=True)
    values = round_dollars(dollar_factor * protected_percentiles(
        counts, np.array(cfg.bin_edges), np.array(cfg.bin_upper), cfg.percentiles))
    recomputed = keys.assign(grads_earn=counts.sum(axis=1),
                             **{f"p{p}_earnings": values[:, i] for i, p in enumerate(cfg.percentiles)})
    mismatches = 0
    for k in years_after:
        published = pseoe[pseoe[f"status_y{k}_earnings"] == STATUS_OK]
        mine = recomputed[recomputed["years_after"] == k]
        joined = published.merge(mine, on=ID_COLUMNS, how="left", validate="one_to_one")
        for name in [f"p{p}_earnings" for p in cfg.percentiles] + ["grads_earn"]:
            mismatches += int((joined[f"y{k}_{name}"].astype("float64") != joined[name]).sum())
    return mismatches


@release_task("build public earnings tables")
def build_publication_tables(tables: list[NoisyHistograms], cfg: ReleaseConfig,
                             dollars: DollarYears | None
                             ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, list[dict]]:
    """pseoe, pseoh, the per-cell summary, and the checks run on them; percentiles in the
    dollars of `dollars.publication_year` (None: in the bins' dollars, as releases of
    earlier versions published them). Privacy cost: none."""
    started = time.perf_counter()
    years_after = tuple(cfg.cells.years_after)
    factor = float(dollars.factor) if dollars is not None else 1.0
    pseoe, pseoh, cells = publication_tables(tables, cfg.earnings, years_after, factor)
    pseoe_schema(years_after, cfg.earnings.percentiles).validate(pseoe, lazy=True)
    pseoh_schema().validate(pseoh, lazy=True)
    mismatches = recheck_percentiles(pseoe, pseoh, cfg.earnings, years_after, factor)
    if mismatches:
        raise RuntimeError(f"{mismatches} published values differ from their recomputation "
                           "from the published histograms")
    checks = [
        {"name": "pseoe.csv and pseoh.csv pass their output schemas", "result": "passed"},
        {"name": "every published percentile and count recomputed from pseoh.csv", "result":
         f"passed ({int(cells['published'].sum()):,} cell-years, 0 differences)"},
    ]
    progress(f"public tables: pseoe {len(pseoe):,} rows, pseoh {len(pseoh):,} rows, "
             f"{int((~cells['published']).sum()):,} of {len(cells):,} cell-years suppressed "
             f"({time.perf_counter() - started:.1f} s)")
    return pseoe, pseoh, cells, checks
