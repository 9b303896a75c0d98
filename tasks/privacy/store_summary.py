"""`pseo-das store show`: what a privacy store holds, in words. Privacy cost: none (the
figures are the store's own bookkeeping; it prints no seed and no noisy value)."""
from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pandas as pd

from pseo_das.tasks.privacy.lifetime_budget import (ATOM_KEYS, POPULATION_ATOM_KEYS, atoms,
                                                    lifetime_budget)
from pseo_das.tasks.privacy.question import lifetime_spends, recorded_question
from pseo_das.tasks.privacy.store import PrivacyStore, epsilon_text


def _not_formal(question: str) -> str:
    """The note of a measurement whose epsilon is not all a formal guarantee (the cell
    statistics by maximum observed sensitivity: their questions say so)."""
    said = json.loads(question).get("formal_guarantee", "yes")
    return "" if said == "yes" else f"; NOT formally DP: {said.removeprefix('no: ')}"


def store_summary(path: Path, top: int = 10) -> str:
    with PrivacyStore.open(path) as store:
        releases = store.table(
            "SELECT r.attempt, r.release_id, r.recorded_at, r.supersedes, "
            "(SELECT COUNT(*) FROM publications p WHERE p.attempt = r.attempt) AS publications "
            "FROM releases r ORDER BY r.attempt")
        measurements = store.table(
            "SELECT m.measurement_id, m.tabulation_id, m.epsilon, m.populations, m.supersedes, "
            "m.question, o.cells, o.object_sha256 FROM measurements m LEFT JOIN measurement_objects o "
            "USING (measurement_id) ORDER BY m.rowid")
        spends = lifetime_spends(store)
        policy, head = store.policy(), store.head()
    lines = [f"privacy store {path} (chain head {head.seq}, {head.sha256[:16]}...)",
             f"  policy {policy.policy}: lifetime epsilon cap {epsilon_text(policy.lifetime_cap)} "
             + ("and no delta cap " if policy.lifetime_delta_cap is None else
                f"and delta cap {epsilon_text(policy.lifetime_delta_cap)} ")
             + f"per graduate, at most {epsilon_text(policy.max_tabulation_epsilon)} per "
             f"tabulation (set by {policy.set_by}, {policy.recorded_at}: {policy.reason})",
             f"  releases: {len(releases)} recorded, "
             f"{int((releases['publications'] > 0).sum())} published"]
    for row in releases.itertuples():
        status = "published" if row.publications else "not published"
        extra = f", supersedes attempt {int(row.supersedes)}" if pd.notna(row.supersedes) else ""
        lines.append(f"    attempt {row.attempt}: release {row.release_id} ({row.recorded_at}, "
                     f"{status}{extra})")
    lines.append(f"  measurements (tabulation x set of populations): {len(measurements)}")
    for row in measurements.itertuples():
        stored = f"{int(row.cells):,} cells stored" if row.object_sha256 else "NOT STORED (planned; its release did not finish)"
        delta = recorded_question(json.loads(row.question)).delta
        lines.append(f"    {row.measurement_id}: epsilon {row.epsilon}"
                     + (f", delta {epsilon_text(delta)}" if delta else "")
                     + f" on {row.populations:,} populations, {stored}" + _not_formal(row.question)
                     + (f"; supersedes {row.supersedes}" if pd.notna(row.supersedes) else ""))
    if spends.empty:
        lines.append("  lifetime epsilon: nothing spent yet")
        return "\n".join(lines)
    budget = lifetime_budget(atoms(spends)[POPULATION_ATOM_KEYS].drop_duplicates(), spends, None)
    populations, per_atom = budget.populations(), budget.atoms_over(Fraction(-1))
    per_atom = per_atom.drop_duplicates(ATOM_KEYS)
    lines.append(f"  lifetime epsilon per graduate (institution x degree level x graduation year, "
                 f"the unit the cap applies to): {len(per_atom):,} graduation years, largest "
                 f"{epsilon_text(per_atom['after'].max())}")
    lines.append(f"  lifetime epsilon per population (institution x degree level x cohort, its "
                 f"most charged graduation year): {len(populations):,} populations, largest "
                 f"{epsilon_text(populations['after'].max())}")
    if per_atom["delta_after"].max() > 0:
        lines.append(f"  lifetime delta per graduate: largest "
                     f"{epsilon_text(per_atom['delta_after'].max())}")
    ranked = per_atom.sort_values(["after", *ATOM_KEYS], ascending=[False, True, True, True],
                                  kind="stable").head(top)
    lines.append(f"  top {len(ranked)} graduation years by lifetime epsilon:")
    for row in ranked.itertuples():
        lines.append(f"    institution {row.institution}, degree {row.degree_level}, graduates "
                     f"of {row.grad_year}: {epsilon_text(row.after)}")
    return "\n".join(lines)
