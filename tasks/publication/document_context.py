"""What the release documents say: facts gathered from the configuration, the ledger and
the noisy cell summary (never from true counts)."""
from __future__ import annotations

import pandas as pd

from pseo_das.config import ReleaseConfig
from pseo_das.schemas.codes import CENSUS_DIVISIONS, NAICS_SECTORS, STATE_FIPS
from pseo_das.tasks.employment_flows.division_flows import FlowsRelease
from pseo_das.tasks.employment_flows.flow_counts import N_DESTINATIONS
from pseo_das.tasks.privacy.mechanism import GEOMETRIC, PrivacyLedger, geometric_variance
from pseo_das.tasks.earnings.noisy_histograms import NoisyHistograms

PSEOH_LAYOUT = [
    ("inst_level ... grad_cohort_years", "cell identifiers, as in pseoe.csv"),
    ("years_after", "years after graduation (1, 5 or 10)"),
    ("bin", "earnings bin, 1 = lowest"),
    ("bin_lower", "lower bound of the bin in the bins' dollars (inclusive; see Dollars)"),
    ("bin_upper", "upper bound of the bin in dollars (exclusive); for the last bin, the bound used for interpolation"),
    ("noisy_count", "noisy number of graduates with earnings in the bin; may be negative"),
]


def pseoe_layout(cfg: ReleaseConfig) -> list[tuple[str, str]]:
    layout = [
        ("inst_level", "I institution, S state, N national"),
        ("institution", "8-digit OPEID; state cells 000000 + state FIPS; national 00000000"),
        ("degree_level", "PSEO degree level code"),
        ("cip_level", "2 (2-digit CIP), 4 (4-digit CIP), A (all fields)"),
        ("cipcode", "CIP code (CIP-2020 for every year; see Fields of study) without the dot; 00 for all fields"),
        ("grad_cohort", "first graduation year of the cohort window"),
        ("grad_cohort_years", "length of the cohort window in years"),
    ]
    for k in cfg.cells.years_after:
        for p in cfg.earnings.percentiles:
            layout.append((f"y{k}_p{p}_earnings", f"{p}th percentile of annual earnings {k} year(s) after graduation, publication-year dollars (see Dollars)"))
        layout.append((f"y{k}_grads_earn", f"noisy number of graduates with earnings {k} year(s) after graduation"))
    for k in cfg.cells.years_after:
        layout.append((f"status_y{k}_earnings", "status flag of the percentiles (1, -1, 5)"))
        layout.append((f"status_y{k}_grads_earn", "status flag of the count (1, -1, 5)"))
    return layout


def bins(cfg: ReleaseConfig) -> list[dict]:
    return [{"bin": i + 1, "lower": lo, "upper": hi}
            for i, (lo, hi) in enumerate(zip(cfg.earnings.bin_edges, cfg.earnings.bin_upper))]


def variance_summary(cells: pd.DataFrame, cfg: ReleaseConfig) -> list[dict]:
    unit = geometric_variance(cfg.privacy.epsilon_per_tabulation)
    rows = []
    for (inst, cip), group in cells.groupby(["inst_level", "cip_level"], sort=False):
        n = group["noise_terms"]
        measured = inst == "I" and cfg.privacy.cip_levels[cip] == "measure"
        rows.append({"inst_level": inst, "cip_level": cip,
                     "how": "measured" if measured else "derived (sum)",
                     "n_min": int(n.min()), "n_median": float(n.median()), "n_max": int(n.max()),
                     "var_min": unit * n.min(), "var_median": unit * n.median(), "var_max": unit * n.max()})
    return rows


def suppression_summary(cells: pd.DataFrame) -> list[dict]:
    grouped = cells.groupby(["inst_level", "cip_level", "years_after"], sort=False)["published"]
    return [{"inst_level": i, "cip_level": c, "years_after": y, "cells": int(g.size),
             "published": int(g.sum()), "suppressed": int(g.size - g.sum())}
            for (i, c, y), g in grouped]


def release_context(cfg: ReleaseConfig, ledger: PrivacyLedger, tables: list[NoisyHistograms],
                    cells: pd.DataFrame, *,
                    release_id: str, code_version: str, seed_sha256: str, config_sha256: str,
                    n_pseoe_rows: int, n_pseoh_rows: int) -> dict:
    """Everything the public release notes show."""
    entries = ledger.entries
    measured = [e for e in entries if e.mechanism == GEOMETRIC]
    return {
        "cfg": cfg, "release_id": release_id, "code_version": code_version,
        "seed_sha256": seed_sha256, "config_sha256": config_sha256,
        "bins": bins(cfg), "measured": measured,
        "epsilon_by_product": {product: sum(e.epsilon for e in measured if e.product == product)
                               for product in dict.fromkeys(e.product for e in measured)},
        "derived": [e for e in entries if e.mechanism != GEOMETRIC],
        "total_epsilon": ledger.total_epsilon,
        "bin_variance": geometric_variance(cfg.privacy.epsilon_per_tabulation),
        "variances": variance_summary(cells, cfg),
        "suppressed_cell_years": int((~cells["published"]).sum()),
        "total_cell_years": len(cells),
        "n_pseoe_rows": n_pseoe_rows, "n_pseoh_rows": n_pseoh_rows,
        "pseoe_layout": pseoe_layout(cfg), "pseoh_layout": PSEOH_LAYOUT,
    }


def pseof_layout(cfg: ReleaseConfig) -> list[tuple[str, str]]:
    layout = [
        ("inst_level ... grad_cohort_years", "origin cell identifiers, as in pseoe.csv (institution level only)"),
        ("geo_level", "N national, D Census division"),
        ("geography", "00 national; 01-09 Census division"),
        ("ind_level", "A all industries, S NAICS sector"),
        ("industry", "00 all industries; NAICS sector code"),
    ]
    for k in cfg.cells.years_after:
        layout += [
            (f"y{k}_grads_emp", f"graduates employed in the geography and industry {k} year(s) after graduation"),
            (f"y{k}_grads_emp_instate", "of those, employed in the institution's state"),
            (f"y{k}_grads_nme", f"graduates of the origin cell not employed or marginally attached (earnings under the floor) {k} year(s) after graduation; the same on every row of the cell"),
        ]
    for k in cfg.cells.years_after:
        for name in ("grads_emp", "grads_emp_instate", "grads_nme"):
            layout.append((f"status_y{k}_{name}", "status flag (1, -1, 5)"))
    return layout


def flows_context(cfg: ReleaseConfig, flows: FlowsRelease) -> dict:
    """What the release notes and the DRB report say about the flows product."""
    correction = flows.correction
    totals = {key: sum(c[key] for c in correction) for key in
              ("origin_cells", "negative_flows_set_to_zero", "cells_with_negative_total",
               "units_removed", "cells_corrected")}
    return {
        "epsilon": cfg.flows.epsilon_per_tabulation,
        "flow_variance": geometric_variance(cfg.flows.epsilon_per_tabulation),
        "n_destinations": N_DESTINATIONS, "n_sectors": len(NAICS_SECTORS),
        "n_states": len(STATE_FIPS), "divisions": CENSUS_DIVISIONS,
        "levels_sentence": "; ".join(
            f"CIP level {level} is " + ("measured" if cfg.flows.cip_levels[level] == "measure"
                                        else "derived by summing the next finer level's noisy flows")
            for level in cfg.flows.levels()) + ".",
        "correction": correction, "totals": totals,
        "suppression": flows.suppression,
        "n_pseof_rows": len(flows.pseof), "n_state_rows": len(flows.flows_state),
        "layout": pseof_layout(cfg),
        "reference_files": flows.reference_fingerprints,
    }

