"""The lifetime privacy budget: a durable, append-only record of the epsilon every release
spent on every population (institution x degree level x graduation cohort), checked
against a lifetime cap before any noise is drawn. Privacy cost: none (bookkeeping).

Successive releases measure the same graduates again, so their spends add up
(sequential composition) per population. The store is one SQLite file; rows are only
ever inserted, each release's rows in one transaction, so a crash leaves either all of a
release's spends or none. It also keeps, per release id, the seed, the input and
configuration fingerprints: running a release id again with the same inputs reuses its
seed and spends nothing new (a retry, a resumed crash, a replay of the same release);
running it with other inputs or configuration is refused unless explicitly superseded,
and a supersession is recorded, and checked, as new spending.

The store holds release seeds: protect it like the MLflow store beside it.
"""
from __future__ import annotations

import math
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig
from tasks import progress, release_task
from tasks.cells import CellFrame
from tasks.mechanism import fresh_release_seed
from tasks.noisy_flows import tabulation_id as flows_tabulation_id
from tasks.noisy_histograms import tabulation_id as earnings_tabulation_id

POPULATION_KEYS = ["institution", "degree_level", "grad_cohort"]
SCHEMA = """
CREATE TABLE IF NOT EXISTS releases (
    attempt INTEGER PRIMARY KEY AUTOINCREMENT,
    release_id TEXT NOT NULL,
    seed_hex TEXT NOT NULL,
    inputs_sha256 TEXT NOT NULL,
    config_sha256 TEXT NOT NULL,
    supersedes INTEGER REFERENCES releases(attempt),
    recorded_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS spends (
    attempt INTEGER NOT NULL REFERENCES releases(attempt),
    institution TEXT NOT NULL,
    degree_level TEXT NOT NULL,
    grad_cohort INTEGER NOT NULL,
    tabulation_id TEXT NOT NULL,
    epsilon REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS spends_population ON spends (institution, degree_level, grad_cohort);
CREATE TRIGGER IF NOT EXISTS releases_append_only BEFORE UPDATE ON releases
    BEGIN SELECT RAISE(ABORT, 'the privacy budget store is append-only'); END;
CREATE TRIGGER IF NOT EXISTS releases_no_delete BEFORE DELETE ON releases
    BEGIN SELECT RAISE(ABORT, 'the privacy budget store is append-only'); END;
CREATE TRIGGER IF NOT EXISTS spends_append_only BEFORE UPDATE ON spends
    BEGIN SELECT RAISE(ABORT, 'the privacy budget store is append-only'); END;
CREATE TRIGGER IF NOT EXISTS spends_no_delete BEFORE DELETE ON spends
    BEGIN SELECT RAISE(ABORT, 'the privacy budget store is append-only'); END;
"""


class LifetimeBudgetExceeded(RuntimeError):
    """The release would take some populations over the lifetime cap."""


class ReleaseConflict(RuntimeError):
    """The release id was already measured with other inputs, configuration or seed."""


@dataclass(frozen=True)
class ReleaseAttempt:
    attempt: int
    release_id: str
    seed_hex: str
    inputs_sha256: str
    config_sha256: str


@dataclass(frozen=True)
class BudgetDecision:
    """What the store decided for this run of a release id."""
    attempt: ReleaseAttempt
    new_spending: bool        # False: a rerun of an attempt already recorded (nothing added)
    superseded: ReleaseAttempt | None
    populations: pd.DataFrame  # per population: before, this_release, after (lifetime epsilon)
    lifetime_cap: float


def planned_spends(frames: dict[str, CellFrame], tabulations: list[tuple[str, str, int, float]],
                   last_earnings_year: int) -> pd.DataFrame:
    """One row per (population, measured tabulation) that includes it: POPULATION_KEYS,
    tabulation_id, epsilon. `tabulations` lists (tabulation_id, cip_level, years_after,
    epsilon); a population is in a tabulation when one of its cells is observable then."""
    parts = []
    for tab_id, level, years_after, epsilon in tabulations:
        frame = frames[level]
        cells = frame.cells[frame.observable(years_after, last_earnings_year)]
        populations = cells[POPULATION_KEYS].astype({"institution": str, "degree_level": str}) \
            .drop_duplicates()
        parts.append(populations.assign(grad_cohort=populations["grad_cohort"].astype(np.int64),
                                        tabulation_id=tab_id, epsilon=float(epsilon)))
    return pd.concat(parts, ignore_index=True)


def default_budget_store(tracking_uri: str) -> Path:
    """Beside the MLflow SQLite store when there is one, else ./audit/."""
    if tracking_uri.startswith("sqlite:///"):
        return Path(tracking_uri.removeprefix("sqlite:///")).parent / "privacy_budget.sqlite"
    return Path("audit") / "privacy_budget.sqlite"


class LifetimeBudget:
    """The append-only store (one SQLite file)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, timeout=60)
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        self._db.close()

    def attempts(self, release_id: str) -> list[ReleaseAttempt]:
        rows = self._db.execute(
            "SELECT attempt, release_id, seed_hex, inputs_sha256, config_sha256 FROM releases "
            "WHERE release_id = ? ORDER BY attempt", (release_id,)).fetchall()
        return [ReleaseAttempt(*row) for row in rows]

    def spent(self) -> pd.DataFrame:
        """Lifetime epsilon per population over every recorded attempt (superseded ones
        included: their noise may have been published)."""
        return pd.read_sql_query(
            "SELECT institution, degree_level, grad_cohort, SUM(epsilon) AS epsilon FROM spends "
            "GROUP BY institution, degree_level, grad_cohort", self._db)

    def spends(self, attempt: int) -> pd.DataFrame:
        return pd.read_sql_query(
            "SELECT institution, degree_level, grad_cohort, tabulation_id, epsilon FROM spends "
            "WHERE attempt = ?", self._db, params=(attempt,))

    def decide(self, release_id: str, seed_hex: str | None, inputs_sha256: str,
               config_sha256: str, plan: pd.DataFrame, lifetime_cap: float,
               supersede: bool = False) -> BudgetDecision:
        """Record this release's spends (or recognise a rerun) before any noise is drawn.

        A rerun (same release id, inputs and configuration) reuses the recorded seed and adds
        nothing. Other inputs or configuration for a known release id are refused unless
        `supersede`; a supersession is new spending. New spending that would take any
        population over `lifetime_cap` is refused, naming the populations and the excess.
        """
        self._db.execute("BEGIN IMMEDIATE")  # one writer at a time; atomic
        try:
            decision = self._decide(release_id, seed_hex, inputs_sha256, config_sha256, plan,
                                    lifetime_cap, supersede)
            self._db.execute("COMMIT")
            return decision
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _decide(self, release_id, seed_hex, inputs_sha256, config_sha256, plan, lifetime_cap,
                supersede) -> BudgetDecision:
        known = self.attempts(release_id)
        latest = known[-1] if known else None
        same = latest is not None and (latest.inputs_sha256, latest.config_sha256) == \
            (inputs_sha256, config_sha256)
        if same and not supersede:
            if seed_hex is not None and seed_hex != latest.seed_hex:
                raise ReleaseConflict(
                    f"release {release_id} was already measured with another seed; running it "
                    "again with a new seed would spend its budget twice. Omit --seed to rerun "
                    "it with its own seed, or use a new release id.")
            return BudgetDecision(latest, False, None,
                                  self._population_table(plan, exclude=latest.attempt),
                                  lifetime_cap)
        if latest is not None and not supersede:
            what = [name for name, old, new in [("inputs", latest.inputs_sha256, inputs_sha256),
                                                ("configuration", latest.config_sha256, config_sha256)]
                    if old != new]
            raise ReleaseConflict(
                f"release {release_id} was already measured with other {' and '.join(what)}; "
                "a release id is measured once. Use a new release id, or --supersede to "
                "replace it (recorded as new spending).")
        populations = self._population_table(plan)
        over = populations[populations["after"] > lifetime_cap + 1e-9]
        if len(over):
            raise LifetimeBudgetExceeded(_over_cap_message(release_id, over, lifetime_cap))
        seed = seed_hex or fresh_release_seed()
        cursor = self._db.execute(
            "INSERT INTO releases (release_id, seed_hex, inputs_sha256, config_sha256, supersedes, "
            "recorded_at) VALUES (?, ?, ?, ?, ?, ?)",
            (release_id, seed, inputs_sha256, config_sha256,
             latest.attempt if latest is not None else None,
             time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
        attempt = ReleaseAttempt(cursor.lastrowid, release_id, seed, inputs_sha256, config_sha256)
        self._db.executemany(
            "INSERT INTO spends (attempt, institution, degree_level, grad_cohort, tabulation_id, "
            "epsilon) VALUES (?, ?, ?, ?, ?, ?)",
            [(attempt.attempt, *row) for row in plan[POPULATION_KEYS + ["tabulation_id", "epsilon"]]
             .itertuples(index=False, name=None)])
        return BudgetDecision(attempt, True, latest, populations, lifetime_cap)

    def _population_table(self, plan: pd.DataFrame, exclude: int | None = None) -> pd.DataFrame:
        """Per population of `plan`: lifetime epsilon before this release, in it, and after."""
        this = plan.groupby(POPULATION_KEYS, as_index=False)["epsilon"].sum() \
            .rename(columns={"epsilon": "this_release"})
        spent = self.spent()
        if exclude is not None:
            mine = self.spends(exclude).groupby(POPULATION_KEYS, as_index=False)["epsilon"].sum()
            spent = spent.merge(mine, on=POPULATION_KEYS, how="left", suffixes=("", "_mine"))
            spent["epsilon"] -= spent.pop("epsilon_mine").fillna(0.0)
        table = this.merge(spent.rename(columns={"epsilon": "before"}), on=POPULATION_KEYS,
                           how="left").fillna({"before": 0.0})
        table["after"] = table["before"] + table["this_release"]
        return table[POPULATION_KEYS + ["before", "this_release", "after"]]


def _over_cap_message(release_id: str, over: pd.DataFrame, cap: float) -> str:
    worst = over.assign(excess=over["after"] - cap).sort_values("excess", ascending=False)
    lines = [f"release {release_id} refused before any noise was drawn: it would take "
             f"{len(over):,} population(s) over the lifetime cap of epsilon {cap:g} "
             f"(privacy.lifetime_epsilon_cap):"]
    for row in worst.head(10).itertuples():
        lines.append(f"  institution {row.institution}, degree {row.degree_level}, cohort "
                     f"{row.grad_cohort}: spent {row.before:g} + this release {row.this_release:g}"
                     f" = {row.after:g}, {row.excess:g} over")
    if len(worst) > 10:
        lines.append(f"  ... and {len(worst) - 10:,} more (largest excess "
                     f"{worst['excess'].max():g})")
    lines.append("The store is append-only. Measure less (fewer tabulations or less epsilon), "
                 "or have the disclosure review board raise the cap.")
    return "\n".join(lines)


def lifetime_summary(decision: BudgetDecision) -> dict:
    """Figures for the DRB report."""
    table = decision.populations
    return {
        "store_attempt": decision.attempt.attempt,
        "new_spending": decision.new_spending,
        "superseded": decision.superseded.attempt if decision.superseded else None,
        "populations": len(table),
        "cap": decision.lifetime_cap,
        "max_after": float(table["after"].max()) if len(table) else 0.0,
        "max_before": float(table["before"].max()) if len(table) else 0.0,
        "headroom_min": float(decision.lifetime_cap - table["after"].max()) if len(table) else math.inf,
        "distribution": table.groupby("after").size().rename("populations").reset_index()
        .to_dict("records"),
    }


def measured_tabulations(cfg: ReleaseConfig) -> list[tuple[str, str, int, float]]:
    """(tabulation id, CIP level, years after, epsilon) of every measurement of a release."""
    years = cfg.cells.years_after
    return ([(earnings_tabulation_id("I", lvl, k), lvl, k, cfg.privacy.epsilon_per_tabulation)
             for k in years for lvl in cfg.privacy.measured_levels()]
            + [(flows_tabulation_id(lvl, k), lvl, k, cfg.flows.epsilon_per_tabulation)
               for k in years for lvl in cfg.flows.measured_levels()])


@release_task("reserve lifetime privacy budget")
def reserve_budget(store_path: Path, release_id: str, seed_hex: str | None, inputs_sha256: str,
                   config_sha256: str, cfg: ReleaseConfig, frames: dict[str, CellFrame],
                   supersede: bool) -> BudgetDecision:
    """Check the release's spend per population against the lifetime cap and record it
    before any noise is drawn (or recognise a rerun). Privacy cost: none."""
    plan = planned_spends(frames, measured_tabulations(cfg), cfg.cells.last_earnings_year)
    store = LifetimeBudget(store_path)
    try:
        decision = store.decide(release_id, seed_hex, inputs_sha256, config_sha256, plan,
                                cfg.privacy.lifetime_epsilon_cap, supersede)
    finally:
        store.close()
    table = decision.populations
    if decision.new_spending:
        progress(f"lifetime budget: recorded {len(plan):,} population spends in {store_path}; "
                 f"largest lifetime epsilon now {table['after'].max():g} of "
                 f"{cfg.privacy.lifetime_epsilon_cap:g}")
    else:
        progress(f"lifetime budget: release {release_id} is already recorded with these inputs "
                 "(a rerun): its own seed is reused and nothing new is spent")
    return decision
