"""The published flows quantities of an origin cell and their accuracy measures, for the
flows accuracy study. Privacy cost: none (sums of flows; measures of simulated outputs).

Quantities (as pseof publishes them from the corrected state flows): national employed,
not employed, employed in the institution's state, employed by NAICS sector (20), by Census
division (9), and by division x sector (180).

Measures, over every (cell, component) of a quantity in a group of cells:
* bias: sum(published - true) / sum(true) (relative; "summed over cells");
* mean_abs_error: mean |published - true| per (cell, component), in graduates;
* relative_error: sum |published - true| / sum(true);
* zero_share: share of the non-empty true components (true > 0) published as 0.
"""
from __future__ import annotations

import numpy as np

from pseo_das.tasks.employment_flows.division_flows import division_totals, state_flows
from pseo_das.tasks.codes.destinations import NONEMPLOYED
from pseo_das.tasks.study.accuracy import ALL_CELLS, STRATA, cell_size_stratum

QUANTITIES = ("employed", "not employed", "in-state", "by sector", "by division",
              "division x sector")


def published_quantities(flows: np.ndarray, home: np.ndarray) -> dict[str, np.ndarray]:
    """Each quantity of QUANTITIES for every origin cell: cells x components (int64)."""
    by_state = state_flows(flows)                                  # cells x sectors x states
    by_sector_division = division_totals(by_state)                 # cells x sectors x divisions
    return {
        "employed": by_state.sum(axis=(1, 2))[:, None],
        "not employed": flows[:, NONEMPLOYED][:, None],
        "in-state": by_state[np.arange(len(home)), :, home].sum(axis=1)[:, None],
        "by sector": by_state.sum(axis=2),
        "by division": by_sector_division.sum(axis=1),
        "division x sector": by_sector_division.reshape(len(home), -1 if len(home) else 0),
    }


def stratum_groups(sizes: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """(stratum, cell indices): every non-empty cell-size stratum (true graduates), then all
    cells."""
    codes = np.asarray(cell_size_stratum(sizes).codes)
    groups = [(label, np.flatnonzero(codes == k)) for k, label in enumerate(STRATA)]
    return [(label, idx) for label, idx in groups if len(idx)] + [(ALL_CELLS, np.arange(len(sizes)))]


def accuracy_measures(published: np.ndarray, true: np.ndarray) -> dict[str, float]:
    """bias, mean_abs_error, relative_error and zero_share of `published` against `true`
    (same shape)."""
    error = published - true
    true_sum = float(true.sum())
    nonempty = true > 0
    return {
        "true_sum": true_sum,
        "published_sum": float(published.sum()),
        "bias": float(error.sum()) / true_sum if true_sum else float("nan"),
        "mean_abs_error": float(np.abs(error).mean()) if error.size else float("nan"),
        "relative_error": float(np.abs(error).sum()) / true_sum if true_sum else float("nan"),
        "zero_share": float((published[nonempty] == 0).mean()) if nonempty.any() else float("nan"),
    }


def measure_rows(published: dict[str, np.ndarray], true: dict[str, np.ndarray],
                 groups: list[tuple[str, np.ndarray]],
                 quantities: tuple[str, ...] = QUANTITIES) -> list[dict]:
    """One row per (quantity, stratum): cells and the accuracy measures."""
    return [{"quantity": quantity, "stratum": label, "cells": len(idx),
             **accuracy_measures(published[quantity][idx], true[quantity][idx])}
            for quantity in quantities for label, idx in groups]
