"""The release plan: for every tabulation the release publishes and every population it
covers, the stored measurement that answers it (reused, zero epsilon) or a new one
(spent, checked against the lifetime cap). Recorded in the privacy store in one
transaction before any noise is drawn. Privacy cost: none (bookkeeping).

The questions (tasks/privacy/question.py) are what a measurement asks: product,
tabulation (institution level, CIP level and vintage, years after), mechanism, epsilon,
bins or destinations, and the cohort definition.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.inputs.cells import CellFrame, observable_populations
from pseo_das.tasks.measurements.products import PRODUCTS, Product, planned_questions
from pseo_das.tasks.measurements.questions import QUESTION_KINDS
from pseo_das.tasks.measurements.publication_record import PublicationRecord, ReleaseIdentity
from pseo_das.tasks.measurements.release_inputs import ReleaseInputs
from pseo_das.tasks.privacy.ledger import PrivacyBudgetExceeded
from pseo_das.tasks.privacy.release_seed import ReleaseSeed
from pseo_das.tasks.privacy.store import (POPULATION_KEYS, ChainHead, LifetimeBudgetExceeded,
                                          PrivacyStore, ReleaseAttempt, ReleaseConflict,
                                          StoreError, StorePolicy, StorePolicyError,
                                          epsilon_text)
from pseo_das.tasks.privacy.lifetime_budget import (POPULATION_ATOM_KEYS, SPENT, SPENT_COLUMNS,
                                                    LifetimeBudget, atoms, lifetime_budget,
                                                    person_worst_case)
from pseo_das.tasks.privacy.question import (PendingMeasurement, Question, lifetime_spends,
                                             spend_windows, stored_question)


@dataclass(frozen=True)
class ReleasePlan:
    attempt: ReleaseAttempt
    new_spending: bool            # False: a rerun of an attempt already recorded
    superseded: int | None
    plan: pd.DataFrame            # tabulation_id, POPULATION_KEYS, measurement_id, new
    pending: tuple[PendingMeasurement, ...]
    populations: pd.DataFrame     # POPULATION_KEYS, before, this_release, after (epsilon),
                                  # delta_before, delta_this_release, delta_after (Fractions)
    policy: StorePolicy           # the store's policy the plan was checked against
    chain_read: ChainHead         # the store's chain head when the plan was made

    @property
    def lifetime_cap(self) -> Fraction:
        return self.policy.lifetime_cap

    @property
    def new_epsilon(self) -> Fraction:
        """This release's fresh spending: the largest new epsilon of any population
        (populations are disjoint, so their spends compose in parallel)."""
        spent = self.populations["this_release"]
        return max(spent, default=Fraction(0))

    @property
    def new_delta(self) -> Fraction:
        """This release's fresh delta: the largest new delta of any population."""
        return max(self.populations["delta_this_release"], default=Fraction(0))

    def record_fields(self, identity: ReleaseIdentity, cfg: ReleaseConfig,
                      inputs: ReleaseInputs, store_chain: dict) -> dict:
        """The publication record's own fields for this plan's attempt, measured
        (`stored_tables.keep_publication_record` adds the public tables' addresses)."""
        return {"identity": identity, "attempt": self.attempt.attempt, "config": cfg,
                "input_fingerprints": inputs.fingerprints, "input_checks": inputs.counts.checks,
                "new_spending": self.new_spending, "superseded": self.superseded,
                "store_policy": self.policy.as_dict(), "store_chain": store_chain,
                "dollars": inputs.dollars.as_dict(), "demo_inputs": inputs.demo}

    def summary(self) -> dict:
        """New and reused measurements (tabulation x population units), populations, new
        and lifetime epsilon and delta, as exact strings."""
        new = self.plan["new"].to_numpy(dtype=bool)
        measured_any = self.plan.groupby(POPULATION_KEYS)["new"].any()
        return {"new_epsilon": epsilon_text(self.new_epsilon),
                "new_delta": epsilon_text(self.new_delta),
                "new_measurements": int(new.sum()),
                "reused_measurements": int((~new).sum()),
                "populations_measured": int(measured_any.sum()),
                "populations_reused": int((~measured_any).sum()),
                "max_lifetime_epsilon": epsilon_text(max(self.populations["after"],
                                                         default=Fraction(0))),
                "lifetime_epsilon_cap": epsilon_text(self.lifetime_cap),
                "max_lifetime_delta": epsilon_text(max(self.populations["delta_after"],
                                                       default=Fraction(0)))}


def remeasure_mask(populations: pd.DataFrame, spec: str | None) -> np.ndarray:
    """Populations named by --remeasure: 'all', or INSTITUTION[:DEGREE[:COHORT]],...".'"""
    if not spec:
        return np.zeros(len(populations), dtype=bool)
    if spec.strip().lower() == "all":
        return np.ones(len(populations), dtype=bool)
    mask = np.zeros(len(populations), dtype=bool)
    for item in filter(None, (part.strip() for part in spec.split(","))):
        fields = item.split(":")
        if len(fields) > 3:
            raise StoreError(f"--remeasure: {item!r} is not INSTITUTION[:DEGREE[:COHORT]]")
        match = np.ones(len(populations), dtype=bool)
        for key, value in zip(POPULATION_KEYS, fields):
            column = populations[key].astype(str)
            match &= (column == value).to_numpy()
        mask |= match
    return mask


def lifetime_of_plan(store: PrivacyStore, plan: pd.DataFrame, attempt: int | None,
                     new_spends: pd.DataFrame | None = None,
                     spends: pd.DataFrame | None = None) -> LifetimeBudget:
    """The lifetime budget of the graduates of the plan's populations, per atom
    (institution x degree level x graduation year: tasks/privacy/lifetime_budget.py): spent
    before this attempt, in it and after (exact). `new_spends` (POPULATION_KEYS,
    measurement_id, epsilon, delta, cohort_years) are the spends of an attempt about to be
    recorded (`attempt` None). `spends`: the store's `lifetime_spends`, if read already."""
    spends = lifetime_spends(store) if spends is None else spends
    if attempt is not None:                       # a recorded attempt
        before = spends[spends["attempt"] < attempt]
        this = spends[spends["attempt"] == attempt]
    else:                                         # an attempt about to be recorded
        before, this = spends, new_spends
    charged = pd.concat([f[POPULATION_KEYS + ["measurement_id", "cohort_years"]]
                         for f in (spends, new_spends) if f is not None and not f.empty]
                        or [pd.DataFrame(columns=POPULATION_KEYS + ["measurement_id",
                                                                    "cohort_years"])])
    members = plan[POPULATION_KEYS + ["measurement_id"]].drop_duplicates() \
        .merge(charged.drop_duplicates(), on=POPULATION_KEYS + ["measurement_id"], how="inner")
    population_atoms = atoms(members)[POPULATION_ATOM_KEYS].drop_duplicates()
    return lifetime_budget(population_atoms, before, this)


def lifetime_table(store: PrivacyStore, plan: pd.DataFrame, attempt: int | None,
                   new_spends: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per population of the plan: lifetime epsilon and delta before this attempt, in it,
    after (exact; the largest of its graduation years; delta from each measurement's
    recorded question)."""
    return lifetime_of_plan(store, plan, attempt, new_spends).populations()


def lifetime_budget_file(table: pd.DataFrame) -> pd.DataFrame:
    """lifetime_budget.csv: the lifetime table as exact text; the delta columns only when
    some population has a delta (the columns of earlier versions otherwise)."""
    columns = SPENT_COLUMNS
    if not any(v != 0 for c in SPENT[1][1] for v in table[c]):
        table = table.drop(columns=list(SPENT[1][1]))
        columns = list(SPENT[0][1])
    return table.assign(**{c: table[c].map(epsilon_text) for c in columns})


def release_cap_check(populations: pd.DataFrame, cfg: ReleaseConfig, release_id: str) -> None:
    """Refuse, before anything is recorded or drawn, a plan whose new spending on some
    population exceeds the release's cap (privacy.epsilon_cap): the ledger checks it again
    when it is assembled."""
    cap = cfg.privacy.epsilon_cap
    over = populations[populations["this_release"] > cap]
    if len(over):
        worst = over.sort_values("this_release", ascending=False).iloc[0]
        raise PrivacyBudgetExceeded(
            f"release {release_id} refused before any noise was drawn and before anything was "
            f"recorded: it would spend epsilon {epsilon_text(worst['this_release'])} on "
            f"{len(over):,} population(s) (e.g. institution {worst['institution']}, degree "
            f"{worst['degree_level']}, cohort {worst['grad_cohort']}), over the release's cap "
            f"privacy.epsilon_cap = {epsilon_text(cap)}")


def plan_release(store: PrivacyStore, release_id: str, seed: ReleaseSeed | None,
                 inputs_sha256: str, config_sha256: str, cfg: ReleaseConfig,
                 frames: dict[str, CellFrame], supersede: bool = False,
                 remeasure: str | None = None, products: Sequence[Product[Any]] = PRODUCTS
                 ) -> ReleasePlan:
    """Decide, record and return the release plan (or recognise a rerun) before any noise.

    A rerun (same release id, inputs and configuration) reuses its recorded plan and seed
    and adds nothing. Other inputs or configuration for a recorded release id are refused
    unless `supersede`. Populations already measured for a question reuse that
    measurement; new populations (and those named by `remeasure`) get one new measurement
    per question, refused if any population would pass the lifetime cap.
    The questions are the enabled `products`' (the registry's, in ledger order);
    `frames[question.product]`, when given, holds a question's populations, otherwise
    `frames[question.cip_level]`.
    """
    store.begin()
    try:
        policy, head = store.policy(), store.head()
        known = store.attempts(release_id)
        latest = known[-1] if known else None
        if latest is not None and not supersede and not remeasure and \
                (latest.inputs_sha256, latest.config_sha256) == (inputs_sha256, config_sha256):
            if seed is not None and seed.sha256 != latest.seed_sha256:
                raise ReleaseConflict(
                    f"release {release_id} was already measured with another seed; running it "
                    "again with a new seed could spend its budget twice. Omit --seed to rerun "
                    "it with its own seed, or use a new release id.")
            plan = store.get_frame(latest.plan_sha256)
            result = ReleasePlan(latest, False, None, plan, _pending(store, plan),
                                 lifetime_table(store, plan, latest.attempt),
                                 store.policy_number(latest.policy), head)
            store.commit()
            return result
        if latest is not None and not supersede:
            what = [name for name, old, new in [("inputs", latest.inputs_sha256, inputs_sha256),
                                                ("configuration", latest.config_sha256, config_sha256)]
                    if old != new] or ["--remeasure"]
            raise ReleaseConflict(
                f"release {release_id} was already recorded with other {' and '.join(what)}; "
                "a release id is planned once. Use a new release id, or --supersede to plan "
                "it again.")
        result = _new_plan(store, release_id, seed or ReleaseSeed.fresh(), inputs_sha256,
                           config_sha256, cfg, frames, remeasure, policy, head, len(known) + 1,
                           latest.attempt if latest else None, products)
        store.commit()
        return result
    except BaseException:
        store.rollback()
        raise


def _new_plan(store, release_id, seed, inputs_sha256, config_sha256, cfg, frames,
              remeasure, policy, head, number, supersedes, products) -> ReleasePlan:
    questions = planned_questions(cfg, frames, products)
    check_against_policy(questions, policy)
    cap = policy.lifetime_cap
    parts, new_measurements = [], []
    for question in questions:
        frame = frames.get(question.product) or frames[question.cip_level]
        populations = observable_populations(frame, question.years_after,
                                             cfg.cells.last_earnings_year)
        one_cohort = "grad_cohort" in question.parameters   # the employer-side table
        if one_cohort:
            populations = populations[populations["grad_cohort"] == question.parameters[
                "grad_cohort"]].reset_index(drop=True)
        current = store.current_measurements(question.answered_by)
        rows = populations.merge(current, on=POPULATION_KEYS, how="left")
        new = rows["measurement_id"].isna().to_numpy() | remeasure_mask(rows, remeasure)
        if one_cohort and new.any():   # a cohort's table is measured whole, or reused whole
            new[:] = True
        measurement_id = f"{question.tabulation_id}@{release_id}/{number}"
        if new.any():
            superseded = sorted(set(rows.loc[new, "measurement_id"].dropna()))
            new_measurements.append((measurement_id, question, rows.loc[new, POPULATION_KEYS],
                                     superseded))
            rows.loc[new, "measurement_id"] = measurement_id
        parts.append(rows.assign(tabulation_id=question.tabulation_id, new=new))
    columns = ["tabulation_id"] + POPULATION_KEYS + ["measurement_id", "new"]
    plan = pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)
    new_spends = pd.concat(
        [p.assign(measurement_id=m, epsilon=[q.epsilon] * len(p), delta=[q.delta] * len(p),
                  cohort_years=spend_windows(p.assign(measurement_id=m), {m: q}))
         for m, q, p, _ in new_measurements]
        or [pd.DataFrame(columns=POPULATION_KEYS + ["measurement_id", "epsilon", "delta",
                                                    "cohort_years"])], ignore_index=True)
    spends = lifetime_spends(store)
    budget = lifetime_of_plan(store, plan, None, new_spends, spends)
    populations = budget.populations()
    release_cap_check(populations, cfg, release_id)
    over = budget.atoms_over(cap)
    if len(over):
        raise LifetimeBudgetExceeded(_over_cap_message(release_id, over, cap))
    if policy.lifetime_delta_cap is not None:
        over = budget.atoms_over(policy.lifetime_delta_cap, "delta_after")
        if len(over):
            raise LifetimeBudgetExceeded(_over_cap_message(
                release_id, over.assign(before=over["delta_before"],
                                        this_release=over["delta_this_release"],
                                        after=over["delta_after"]),
                policy.lifetime_delta_cap, "delta"))
    check_person_bound(spends, new_spends, cfg.privacy.max_degrees_per_person, policy, release_id)
    attempt_id = store.add_release(release_id, seed, inputs_sha256, config_sha256,
                                   store.put_frame(plan), supersedes, policy.policy, head)
    for measurement_id, question, members, superseded in new_measurements:
        store.add_measurement(measurement_id, attempt_id, question.tabulation_id,
                              question.as_dict(), question.epsilon, members, superseded)
    attempt = store.attempt(attempt_id)
    pending = tuple(PendingMeasurement(m, q, seed, p.reset_index(drop=True))
                    for m, q, p, _ in new_measurements)
    return ReleasePlan(attempt, True, supersedes, plan, pending + _pending(store, plan, skip={
        p.measurement_id for p in pending}), populations, policy, head)


def check_person_bound(spends: pd.DataFrame, new_spends: pd.DataFrame, k: int,
                       policy: StorePolicy, release_id: str) -> None:
    """With a contribution bound above 1 in this release or any earlier one of the store, a
    graduate can be in that many atoms: what they can pay over every release
    (`person_worst_case`) must stay within the lifetime caps too. With 1 throughout, the
    atom check is the whole check. `spends`: the store's `lifetime_spends`."""
    largest = max([k, *spends["degrees_per_person"].astype(int)])
    if largest <= 1:
        return
    every = pd.concat([spends, new_spends.assign(degrees_per_person=k)], ignore_index=True)
    bound = person_worst_case(every, largest)
    caps = [("epsilon", bound.epsilon, policy.lifetime_cap, "--lifetime-cap")]
    if policy.lifetime_delta_cap is not None:
        caps.append(("delta", bound.delta, policy.lifetime_delta_cap, "--lifetime-delta-cap"))
    for spent, worst, cap, option in caps:
        if worst > cap:
            atoms = "; ".join(f"institution {a.institution}, degree {a.degree_level}, graduates "
                              f"of {a.grad_year}: {epsilon_text(a.epsilon)}"
                              for a in bound.top_atoms.itertuples())
            raise LifetimeBudgetExceeded(
                f"release {release_id} refused before any noise was drawn: a graduate counted "
                f"with up to {largest} degree records (privacy.max_degrees_per_person, in this "
                f"or an earlier release of the store) is in up to {largest} graduation-year "
                f"atoms and could pay {spent} {epsilon_text(worst)} over the store's releases, "
                f"over the lifetime cap of {epsilon_text(cap)} per graduate. The "
                f"{largest} most charged atoms (epsilon): {atoms}; every measurement of the "
                f"store once: epsilon {epsilon_text(bound.every_measurement)}. Measure less, "
                "lower max_degrees_per_person, or have the disclosure review board raise the "
                f"cap (`pseo-das store set-policy {option} ... --by ... --reason ...`).")


def check_against_policy(questions: list[Question], policy: StorePolicy) -> None:
    """Refuse a tabulation whose epsilon the store's policy does not allow."""
    over = sorted({(q.tabulation_id, q.epsilon) for q in questions
                   if q.epsilon > policy.max_tabulation_epsilon})
    if over:
        raise StorePolicyError(
            f"refused before anything was recorded: the privacy store allows at most epsilon "
            f"{epsilon_text(policy.max_tabulation_epsilon)} per tabulation (store policy "
            f"{policy.policy}, set by {policy.set_by}: {policy.reason}); the configuration asks "
            + ", ".join(f"{t} {epsilon_text(e)}" for t, e in over[:6])
            + (f" and {len(over) - 6} more" if len(over) > 6 else "")
            + ". Only `pseo-das store set-policy` changes the store's policy.")


def _pending(store: PrivacyStore, plan: pd.DataFrame, skip: Collection[str] = frozenset()
             ) -> tuple[PendingMeasurement, ...]:
    """Measurements of the plan whose values were never stored (a crash after planning):
    drawn again from the stream of the attempt that paid for them, so nothing is spent."""
    out = []
    for measurement_id in sorted(set(plan["measurement_id"]) - set(skip)):
        stored = store.measurement(measurement_id)
        if stored.object_sha256 is None:
            members = store.table(
                "SELECT institution, degree_level, grad_cohort FROM measurement_populations "
                "WHERE measurement_id = ?", (measurement_id,))
            out.append(PendingMeasurement(measurement_id,
                                          stored_question(store, measurement_id, QUESTION_KINDS),
                                          store.attempt(stored.attempt).seed, members))
    return tuple(out)


def _over_cap_message(release_id: str, over: pd.DataFrame, cap: Fraction,
                      spent: str = "epsilon") -> str:
    worst = over.assign(excess=over["after"] - cap).sort_values(
        ["excess", *POPULATION_KEYS, "grad_year"], ascending=[False, True, True, True, True],
        kind="stable")
    populations = len(over[POPULATION_KEYS].drop_duplicates())
    lines = [f"release {release_id} refused before any noise was drawn: it would take the "
             f"graduates of {len(over):,} graduation year(s) of {populations:,} population(s) "
             f"over the lifetime cap of {spent} {epsilon_text(cap)} (the privacy store's "
             "policy; the cap is per graduate, whatever the cohort windows):"]
    for row in worst.head(10).itertuples():
        lines.append(f"  institution {row.institution}, degree {row.degree_level}, graduates of "
                     f"{row.grad_year} (cohort {row.grad_cohort}): spent "
                     f"{epsilon_text(row.before)} + this release "
                     f"{epsilon_text(row.this_release)} = {epsilon_text(row.after)}, "
                     f"{epsilon_text(row.excess)} over")
    if len(worst) > 10:
        lines.append(f"  ... and {len(worst) - 10:,} more")
    option = "--lifetime-cap" if spent == "epsilon" else "--lifetime-delta-cap"
    lines.append(f"The store is append-only. Measure less (fewer tabulations or less {spent}), "
                 "or have the disclosure review board raise the cap (`pseo-das store "
                 f"set-policy {option} ... --by ... --reason ...`).")
    return "\n".join(lines)


@release_task("release plan")
def record_release_plan(store_path: Path, release_id: str, seed: ReleaseSeed | None,
                        inputs_sha256: str, config_sha256: str, cfg: ReleaseConfig,
                        frames: dict[str, CellFrame], supersede: bool,
                        remeasure: str | None) -> ReleasePlan:
    """Plan the release against the store and record it before any noise. Privacy cost:
    none."""
    with PrivacyStore.open(store_path) as store:
        plan = plan_release(store, release_id, seed, inputs_sha256, config_sha256, cfg,
                            frames, supersede, remeasure)
    figures = plan.summary()
    if plan.new_spending:
        progress(f"release plan: {figures['new_measurements']:,} tabulation x population units "
                 f"to measure, {figures['reused_measurements']:,} reused from the store; new "
                 f"epsilon {figures['new_epsilon']}, largest lifetime epsilon now "
                 f"{figures['max_lifetime_epsilon']} of {figures['lifetime_epsilon_cap']}")
    else:
        progress(f"release plan: release {release_id} is already recorded with these inputs "
                 "(a rerun): its own plan and seed are reused and nothing new is spent")
    return plan


def recorded_plan(store: PrivacyStore, attempt: ReleaseAttempt,
                  record: PublicationRecord) -> ReleasePlan:
    """The plan of a recorded attempt, as its publication saw it (for `republish`)."""
    plan = store.get_frame(attempt.plan_sha256)
    return ReleasePlan(attempt, record.new_spending, record.superseded, plan, (),
                       lifetime_table(store, plan, attempt.attempt),
                       store.policy_number(attempt.policy), record.store_chain.read)
