"""The noisy cell statistics (pseom_all.csv's values) read back from the privacy store.
Privacy cost: none (noisy values only; the spends were recorded when they were measured).

Each statistic is a question of the release plan (tasks/earnings/cell_statistics_plan.py):
its measurements are kept in the store like the histograms' (a float array per
measurement: noisy count, value, chi, published), charged once to the lifetime budget of
every population they cover, and every later release that asks the same question reads
them back at zero epsilon. A release publishes, per statistic, the cells of the
measurements its plan names (its populations only), so `republish` and every reuse
rebuild pseom_all.csv without microdata and without new noise.

Releases of the version before (cell statistics outside the store) kept their values in
their publication record instead (`cell_statistics_from_record`), and republish from it.
"""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig
from pseo_das.epsilon import epsilon_text
from pseo_das.tasks import progress
from pseo_das.tasks.earnings.cell_statistics import NoisyCellStatistics, values_composition
from pseo_das.tasks.earnings.cell_statistics_plan import (STORED_COLUMNS, StatisticSettings,
                                                          cell_statistics_questions,
                                                          count_stream_id, statistic_domain)
from pseo_das.tasks.earnings.mos import ChiScope
from pseo_das.tasks.inputs.cells import CELL_COLUMNS, CELL_KEYS, POPULATION_KEYS, in_populations
from pseo_das.tasks.measurements.questions import read_statements
from pseo_das.tasks.privacy.geometric import COMPOSITION as COUNTS_COMPOSITION
from pseo_das.tasks.privacy.ledger import measured_entry
from pseo_das.tasks.privacy.streams import stream_sha256
from pseo_das.tasks.privacy.store import PrivacyStore


def _scope(cells: pd.DataFrame, settings: StatisticSettings) -> np.ndarray:
    if settings.chi_scope == ChiScope.RELEASE.value:
        return np.full(len(cells), "all", dtype=object)
    return cells["degree_level"].astype(str).to_numpy()


def stored_cell_statistics(store_path: Path, plan: pd.DataFrame, cfg: ReleaseConfig
                           ) -> NoisyCellStatistics | None:
    """The release's noisy cell statistics, read from the measurements its plan names (its
    populations only), with their ledger entries (per statistic: the values at epsilon,
    Laplace, `formal_guarantee` no under mos; the counts at epsilon, geometric), chi per
    scope group and measurement, and how the release used the store. None when the
    configuration has no cell statistics (a release of the version before kept them in its
    publication record instead: `cell_statistics_from_record`). Privacy cost: none."""
    questions = cell_statistics_questions(cfg)
    if not questions:
        return None
    mine = plan[plan["tabulation_id"].isin([q.tabulation_id for q in questions])]
    tables, entries, chi = [], [], {}
    with PrivacyStore.open(store_path) as store:
        for question in questions:
            settings = StatisticSettings.of(question)
            statistic = settings.statistic
            rows = mine[mine["tabulation_id"] == question.tabulation_id]
            parts, value_streams, count_streams, groups = [], [], [], []
            values_statement, counts_statement = read_statements(
                store, question, sorted(set(rows["measurement_id"])))
            for measurement_id, members in rows.groupby("measurement_id", sort=True):
                stored = store.measurement(measurement_id)
                cells, values = store.measured_values(measurement_id)
                kept = in_populations(cells, members)
                part = cells.loc[kept, CELL_COLUMNS].reset_index(drop=True).assign(
                    **{c: values[kept, i] for i, c in enumerate(STORED_COLUMNS)})
                part["published"] = part["published"].astype(bool)
                parts.append(part)
                seed = store.attempt(stored.attempt).seed.bits
                value_streams.append(stream_sha256(seed, measurement_id))
                count_streams.append(stream_sha256(seed, count_stream_id(measurement_id,
                                                                          statistic)))
                if not settings.formal:
                    shown = part[part["published"]]
                    chi_of = shown["chi"].groupby(_scope(shown, settings)).max()
                    groups += [(str(g), measurement_id, float(v)) for g, v in chi_of.items()]
            table = (pd.concat(parts, ignore_index=True) if parts else
                     pd.DataFrame({c: pd.Series(dtype=object) for c in CELL_COLUMNS})
                     .assign(**{c: pd.Series(dtype=np.float64) for c in STORED_COLUMNS}))
            table = table.sort_values(CELL_KEYS, kind="stable").reset_index(drop=True)
            table["published"] = table["published"].astype(bool)
            lower, upper = statistic_domain(statistic, settings.lower, settings.upper)
            if settings.formal:
                chi[statistic.value] = {"all": upper - lower}
                observed, n_values = None, len(table)
            else:
                chi[statistic.value] = _chi_labels(groups)
                observed = max((v for _, _, v in groups), default=0.0)
                n_values = int(table["published"].sum())
            entries += [measured_entry(values_statement, n_values, 1,
                                       values_composition(settings), ";".join(value_streams),
                                       observed),
                        measured_entry(counts_statement, len(table), 1, COUNTS_COMPOSITION,
                                       ";".join(count_streams))]
            tables.append(table.assign(statistic=statistic.value)[
                CELL_COLUMNS + ["statistic"] + list(STORED_COLUMNS)])
    first = StatisticSettings.of(questions[0])
    use = store_use(mine, questions)
    progress(f"read the cell statistics from the privacy store: {use['new_measurements']:,} "
             f"statistic x population units measured by this release, "
             f"{use['reused_measurements']:,} reused at zero epsilon")
    return NoisyCellStatistics(first.variant.value, pd.concat(tables, ignore_index=True),
                               entries, chi, epsilon_text(first.epsilon), first.lower,
                               first.upper, first.min_count, cfg.mos.chi_scope, use)


def _chi_labels(groups: list[tuple[str, str, float]]) -> dict[str, float]:
    """chi per scope group; a group measured in several measurements (populations first
    measured by different releases) has one chi per measurement, labelled `03 in R1/1`."""
    seen: dict[str, int] = {}
    for group, _, _ in groups:
        seen[group] = seen.get(group, 0) + 1
    return dict(sorted(
        ((group if seen[group] == 1 else f"{group} in {measurement_id.split('@', 1)[1]}"), value)
        for group, measurement_id, value in groups))


def store_use(rows: pd.DataFrame, questions: list) -> dict:
    """How a plan's cell statistics use the store: statistic x population units measured
    and reused, populations with anything new, and the new epsilon of any population (the
    sum of the questions it is newly measured for), exactly."""
    epsilon = {q.tabulation_id: q.epsilon for q in questions}
    new = rows[rows["new"].astype(bool)]
    spent = new.assign(epsilon=new["tabulation_id"].map(epsilon)) \
        .groupby(POPULATION_KEYS)["epsilon"].agg(lambda s: sum(s, Fraction(0)))
    return {"new_measurements": int(len(new)), "reused_measurements": int(len(rows) - len(new)),
            "populations_measured": int(len(spent)),
            "new_epsilon": epsilon_text(max(spent, default=Fraction(0))),
            "in_privacy_store": True}


def cell_statistics_from_record(store_path: Path,
                                kept: dict | None) -> NoisyCellStatistics | None:
    """The noisy cell statistics a release of the version before kept in its publication
    record (`PublicationRecord.cell_statistics`: measured outside the store); None when it
    had none."""
    if kept is None:
        return None
    with PrivacyStore.open(store_path) as store:
        table = store.get_frame(kept["table"])
    return NoisyCellStatistics.from_record(kept, table)
