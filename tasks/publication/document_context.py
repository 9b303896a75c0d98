"""What the release documents say: facts gathered from the configuration, the ledger and
the noisy cell summary (never from true counts)."""
from __future__ import annotations

import pandas as pd

import numpy as np

from pseo_das.config import ReleaseConfig
from pseo_das.schemas.codes import CENSUS_DIVISIONS, NAICS_SECTORS, STATE_FIPS
from pseo_das.schemas.outputs import pseoh_schema
from pseo_das.schemas.pseo_layout import ALL_COHORTS, SCHEMA_DIR, SCHEMA_VERSION, Product, layout
from pseo_das.tasks.employment_flows.division_flows import FlowsRelease, OriginTable
from pseo_das.tasks.codes.official_codes import agg_level
from pseo_das.tasks.codes.destinations import N_DESTINATIONS
from pseo_das.tasks.privacy.geometric import geometric_variance
from pseo_das.tasks.privacy.ledger import PrivacyLedger
from pseo_das.tasks.earnings.cell_statistics import CELL_STATISTICS_FILE
from pseo_das.tasks.earnings.cell_statistics_plan import PRODUCT as CELL_STATISTICS_PRODUCT
from pseo_das.tasks.earnings.noisy_histograms import PRODUCT as EARNINGS_PRODUCT
from pseo_das.tasks.employment_flows.employer_table import PRODUCT as EMPLOYER_TABLE_PRODUCT
from pseo_das.tasks.employment_flows.noisy_flows import PRODUCT as FLOWS_PRODUCT
from pseo_das.tasks.employment_flows.noisy_flows import TOTAL_PRODUCT as FLOWS_TOTAL_PRODUCT
from pseo_das.tasks.publication.employer_table_file import EMPLOYER_TABLE_FILE

CODES_AS_WRITTEN = {
    "agg_level_pseo": "aggregation level of label_agg_level_pseo.csv: which of the columns "
                      "below are totals",
    "inst_level": "I institution, S state of institution",
    "institution": "8-digit OPEID (inst_level I); 2-digit state FIPS code (inst_level S)",
    "degree_level": "PSEO degree level (label_degree_level.csv; see Degree levels)",
    "cip_level": "A all fields, 2 two-digit CIP, 4 four-digit CIP",
    "cipcode": "CIP-2020 code: 00 (all fields), 11 (2-digit), 11.07 (4-digit)",
    "grad_cohort": "first graduation year of the cohort window; 0000 for all cohorts",
    "grad_cohort_years": "length of the cohort window in years (3 for bachelor's, 5 otherwise)",
    "geo_level": "N nation, D Census division (of the job)",
    "geography": "00 nation; Census division 1-9",
    "ind_level": "A all industries, S NAICS sector (of the job)",
    "industry": "00 all industries; NAICS sector code (11, 21, ..., 31-33, ..., 92)",
}
PSEOH_LAYOUT = [("agg_level_pseo ... industry", "cell identifiers, as in pseoe_all.csv")] + [
    (name, column.description) for name, column in pseoh_schema().columns.items()
    if column.description]   # the columns after the identifiers, as its schema describes them


# The files each product's measurements are published in (the guarantee names them).
HISTOGRAMS_FILE = "pseoh_all.csv"   # pseo-das's extension: the noisy earnings histograms
PRODUCT_FILES = {EARNINGS_PRODUCT: (Product.PSEOE.file_name, HISTOGRAMS_FILE),
                 FLOWS_PRODUCT: (Product.PSEOF.file_name,),
                 FLOWS_TOTAL_PRODUCT: (f"{Product.PSEOF.file_name}'s origin counts",),
                 EMPLOYER_TABLE_PRODUCT: (EMPLOYER_TABLE_FILE,),
                 CELL_STATISTICS_PRODUCT: (CELL_STATISTICS_FILE,)}


def guarantee_summary(ledger: PrivacyLedger) -> dict:
    """The release's guarantee as the documents, release_summary.json, MLflow and the CLI
    state it: derived from the statements of its measurements (the ledger's)."""
    return ledger.guarantee().summary(PRODUCT_FILES)


def official_layout(product: Product) -> list[tuple[str, str]]:
    """(column, meaning) of an official file: identifiers as pseo-das writes them, then the
    schema's own descriptions of the indicators and their status flags."""
    product_layout = layout(product)
    described = pd.read_csv(SCHEMA_DIR / f"variables_{product.value}.csv", dtype=str)
    rows = [(name, CODES_AS_WRITTEN[name]) for name in product_layout.identifiers]
    rows += list(zip(described["Indicator Variable"], described["Description"]))
    rows += [(flag, "status flag of " + ", ".join(i.name for i in product_layout.indicators
                                                 if i.status_flag == flag))
             for flag in product_layout.status_flags]
    return rows


def bins(cfg: ReleaseConfig) -> list[dict]:
    return [{"bin": i + 1, "lower": lo, "upper": hi}
            for i, (lo, hi) in enumerate(zip(cfg.earnings.bin_edges, cfg.earnings.bin_upper))]


def _spread(levels: dict, n: np.ndarray, unit: float, how: str) -> dict:
    return {**levels, "how": how,
            "n_min": int(n.min()), "n_median": float(np.median(n)), "n_max": int(n.max()),
            "var_min": unit * n.min(), "var_median": unit * float(np.median(n)),
            "var_max": unit * n.max()}


def variance_summary(cells: pd.DataFrame, cfg: ReleaseConfig) -> list[dict]:
    """Per earnings aggregation level: measured or derived, and the noise variance of a bin
    (measured bins summed per bin, times one measured bin's variance)."""
    unit = geometric_variance(cfg.privacy.epsilon_per_tabulation,
                              cfg.privacy.max_degrees_per_person)
    rows = []
    for (level, inst, cip, cohort), group in cells.assign(
            cohorts=np.where(cells["grad_cohort"] == ALL_COHORTS, "all", "by cohort")).groupby(
            ["agg_level_pseo", "inst_level", "cip_level", "cohorts"], sort=True):
        measured = inst == "I" and cohort == "by cohort" and cfg.privacy.cip_levels[cip] == "measure"
        rows.append(_spread({"agg_level_pseo": level, "inst_level": inst, "cip_level": cip,
                             "cohorts": cohort}, group["noise_terms"].to_numpy(), unit,
                            "measured" if measured else "derived (sum of noisy bins)"))
    return rows


def flows_variance_summary(origins: list[OriginTable], cfg: ReleaseConfig) -> list[dict]:
    """Per pseof aggregation level: measured flows summed into one published value (origin
    cells summed x destinations summed) and the variance of that sum's noise, before the
    correction (which is not linear: the published value's error also carries it)."""
    unit = geometric_variance(cfg.flows.epsilon_per_tabulation,
                              cfg.privacy.max_degrees_per_person)
    states = np.array([len(CENSUS_DIVISIONS[d][1]) for d in CENSUS_DIVISIONS])
    per_value = {("N", "A"): np.array([len(NAICS_SECTORS) * len(STATE_FIPS)]),
                 ("N", "S"): np.array([len(STATE_FIPS)]),
                 ("D", "A"): len(NAICS_SECTORS) * states, ("D", "S"): states}
    terms: dict[tuple, list[np.ndarray]] = {}
    for table in origins:
        cells = table.cells["noise_terms"].to_numpy()
        for (geo, ind), destinations in per_value.items():
            level = agg_level(Product.PSEOF, table.inst_level, table.cip_level, table.by_cohort,
                              geo, ind)
            key = (level, table.inst_level, table.cip_level, table.by_cohort, geo, ind)
            terms.setdefault(key, []).append(np.outer(cells, destinations).reshape(-1))
    rows = []
    for (level, inst, cip, by_cohort, geo, ind), parts in sorted(terms.items()):
        n = np.concatenate(parts)
        if len(n):
            measured = inst == "I" and by_cohort and cfg.flows.cip_levels[cip] == "measure"
            rows.append(_spread({"agg_level_pseo": level, "inst_level": inst, "cip_level": cip,
                                 "cohorts": "by cohort" if by_cohort else "all",
                                 "geo_level": geo, "ind_level": ind}, n, unit,
                                "measured origin cells, destinations summed" if measured
                                else "origin cells and destinations summed"))
    return rows


def suppression_summary(cells: pd.DataFrame) -> list[dict]:
    grouped = cells.assign(
        cohorts=np.where(cells["grad_cohort"] == ALL_COHORTS, "all", "by cohort")).groupby(
        ["agg_level_pseo", "inst_level", "cip_level", "cohorts", "years_after"])["published"]
    return [{"agg_level_pseo": a, "inst_level": i, "cip_level": c, "cohorts": h,
             "years_after": y, "cells": int(g.size), "published": int(g.sum()),
             "suppressed": int(g.size - g.sum())}
            for (a, i, c, h, y), g in grouped]


def release_context(cfg: ReleaseConfig, ledger: PrivacyLedger, cells: pd.DataFrame, *,
                    release_id: str, code_version: str, seed_sha256: str, config_sha256: str,
                    n_pseoe_rows: int, n_pseoh_rows: int) -> dict:
    """Everything the public release notes show."""
    entries = ledger.entries
    measured = [e for e in entries if e.statement is not None]
    return {
        "cfg": cfg, "release_id": release_id, "code_version": code_version,
        "seed_sha256": seed_sha256, "config_sha256": config_sha256,
        "bins": bins(cfg), "measured": measured,
        "epsilon_by_product": {product: sum(e.epsilon for e in measured if e.product == product)
                               for product in dict.fromkeys(e.product for e in measured)},
        "derived": [e for e in entries if e.statement is None],
        "total_epsilon": ledger.total_epsilon, "guarantee": guarantee_summary(ledger),
        "bin_variance": geometric_variance(cfg.privacy.epsilon_per_tabulation,
                                           cfg.privacy.max_degrees_per_person),
        "variances": variance_summary(cells, cfg),
        "suppressed_cell_years": int((~cells["published"]).sum()),
        "total_cell_years": len(cells),
        "n_pseoe_rows": n_pseoe_rows, "n_pseoh_rows": n_pseoh_rows,
        "pseoe_layout": official_layout(Product.PSEOE), "pseoh_layout": PSEOH_LAYOUT,
        "schema_version": SCHEMA_VERSION,
    }


# Why the default correction: the flows accuracy study on the default demo data
# (`pseo-das synth`, 200,000 graduates; `pseo-das evaluate --product flows --data DIR
# --out DIR --epsilons 1.5 --total-shares 0.2 --draws 2`), summed over the all-fields
# institution cells at 1, 5 and 10 years after graduation.
STUDY_EVIDENCE = (
    "The flows accuracy study (`pseo-das evaluate --product flows`: true flows of synthetic "
    "data against what each candidate correction publishes; 200,000 graduates, epsilon 1.5 "
    "per years after in all, 2 noise draws) found that the appendix's total, the sum of "
    "1,021 noisy flows, carries the noise of all of them and clipping adds spurious "
    "graduates to every cell, which the removal then takes from real flows, the "
    "non-employed first: with it (and non-employed weight 1), employed is overstated by "
    "15%, 10% and 11% and not employed understated by 67%, 74% and 74% at 1, 5 and 10 "
    "years; the mean absolute error of a cell's not-employed count is 18.4 graduates. "
    "Measuring each origin cell's graduate count at 0.3 of the 1.5 and weighting the "
    "non-employed destination at 3e-6 gives +0.2%, -0.4%, 0.0% (employed) and -0.5%, "
    "+0.8%, 0.0% (not employed), with a mean absolute error of 2.2 graduates.")
CORRECTION_REASON = {
    "measured-total": STUDY_EVIDENCE + " That is the default.",
    "appendix": "This release uses the appendix's procedure as written, by configuration. "
                + STUDY_EVIDENCE + " The default configuration uses the measured count.",
}


def flows_context(cfg: ReleaseConfig, flows: FlowsRelease) -> dict:
    """What the release notes and the DRB report say about the flows product."""
    correction = flows.correction
    totals = {key: sum(c[key] for c in correction) for key in
              ("origin_cells", "negative_flows_set_to_zero", "cells_with_negative_total",
               "units_removed", "units_added", "cells_corrected")}
    return {
        "epsilon": cfg.flows.epsilon_per_tabulation,
        "measures_total": cfg.flows.measures_total,
        "why": CORRECTION_REASON[cfg.flows.correction],
        "total_epsilon": cfg.flows.total_epsilon_per_tabulation,
        "total_variance": (geometric_variance(cfg.flows.total_epsilon_per_tabulation,
                                              cfg.privacy.max_degrees_per_person)
                           if cfg.flows.measures_total else None),
        "flow_variance": geometric_variance(cfg.flows.epsilon_per_tabulation,
                                            cfg.privacy.max_degrees_per_person),
        "n_destinations": N_DESTINATIONS, "n_sectors": len(NAICS_SECTORS),
        "n_states": len(STATE_FIPS), "divisions": CENSUS_DIVISIONS,
        "levels_sentence": "; ".join(
            f"CIP level {level} is " + ("measured" if cfg.flows.cip_levels[level] == "measure"
                                        else "derived by summing the next finer level's noisy flows")
            for level in cfg.flows.levels()) + ".",
        "correction": correction, "totals": totals,
        "suppression": flows.suppression,
        "n_pseof_rows": flows.n_pseof_rows, "n_state_rows": flows.n_state_rows,
        "layout": official_layout(Product.PSEOF),
        "variances": flows_variance_summary(flows.origins, cfg),
        "reference_files": flows.reference_fingerprints,
    }

