"""`pseo-das synth --jobs`: the synthetic data in the agency's layout (tasks/inputs/
degree_records.py), for a demonstration of it: graduates one row per degree, some persons
with a master's two years after their bachelor's, and jobs one row per person, year and job,
some years split over two jobs. Made from the outcomes layout that `write_synthetic` wrote
(the same persons and earnings), with its own random stream.

A second degree's earnings are the person's earnings at the same years after the first
one, 15% higher, in the same state and industry (a rough premium). Who goes on to a master's
is drawn at random among the bachelor's graduates who can (graduated early enough to have
earnings after it, and not across the CIP vintage switch): SECOND_DEGREE_SHARE of them by
default, or `second_degree_share` of all persons when given (the bounding study,
tasks/study/bounding_study.py: 10-30% of graduates with a second degree). Either way each
candidate is drawn with one uniform number of the same stream, so the default data do not
depend on the option's existence.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pseo_das.schemas.codes import NAICS_SECTORS
from pseo_das.synth_ipeds import write_synthetic_ipeds

SECOND_DEGREE_SHARE = 0.2        # of the bachelor's graduates who can have a master's
TWO_JOB_SHARE = 0.25             # of the job years split over two jobs
MASTERS_PREMIUM = 1.15
MASTERS_AFTER = 2                # years after the bachelor's
JOBS_STREAM = 7_300              # the random stream of this step (synth.py uses others)


def write_jobs_layout(out_dir: Path, seed: int, last_data_year: int, cip_switch_year: int,
                      years_after: tuple[int, ...] = (1, 5, 10),
                      second_degree_share: float | None = None) -> dict[str, int]:
    """Turn graduates.parquet and outcomes.parquet of `out_dir` into graduates.parquet (one
    row per degree) and jobs.parquet; outcomes.parquet is removed. Returns the row counts.
    `second_degree_share`: the expected share of persons with a master's (module doc);
    ValueError when more than the candidates are asked for (the folder then keeps the
    outcomes layout that `write_synthetic` wrote)."""
    out_dir = Path(out_dir)
    rng = np.random.default_rng([seed, JOBS_STREAM])
    source = pq.read_table(out_dir / "graduates.parquet")
    graduates = source.to_pandas()
    outcomes = pq.read_table(out_dir / "outcomes.parquet").to_pandas()
    grad_year = graduates.set_index("person_id")["grad_year"].astype(np.int64)
    outcomes = outcomes[outcomes["earnings"].notna()].reset_index(drop=True)
    outcomes["year"] = outcomes["person_id"].map(grad_year).to_numpy() \
        + outcomes["years_after"].to_numpy(np.int64)

    year = graduates["grad_year"].astype(np.int64)
    later = year + MASTERS_AFTER
    can = ((graduates["degree_level"].astype(str) == "05")
           & (later + min(years_after) <= last_data_year)
           & ((later < cip_switch_year) | (year >= cip_switch_year)))
    chance = master_chance(second_degree_share, len(graduates), int(can.sum()))
    second = graduates[can.to_numpy() & (rng.random(len(graduates)) < chance)]
    masters = second.assign(degree_level="07", grad_year=(second["grad_year"].astype(np.int64)
                                                          + MASTERS_AFTER))
    degrees = pd.concat([graduates.assign(grad_year=year), masters], ignore_index=True)
    degrees = degrees.sort_values(["person_id", "grad_year"], kind="stable", ignore_index=True)
    for column in ("institution", "inst_state", "degree_level", "cipcode"):
        degrees[column] = degrees[column].astype(str)

    premium = outcomes[outcomes["person_id"].isin(second["person_id"])]
    premium = premium.assign(year=premium["year"] + MASTERS_AFTER,
                             earnings=np.round(premium["earnings"] * MASTERS_PREMIUM, 2))
    premium = premium[premium["year"] <= last_data_year]
    annual = pd.concat([outcomes, premium], ignore_index=True)
    jobs = _split_jobs(annual, rng)
    metadata = source.schema.metadata
    table = pa.Table.from_pandas(degrees, preserve_index=False)
    pq.write_table(table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata}),
                   out_dir / "graduates.parquet")
    jobs.to_parquet(out_dir / "jobs.parquet", index=False)
    (out_dir / "outcomes.parquet").unlink()
    write_synthetic_ipeds(out_dir)   # the masters are IPEDS awards too
    return {"graduates": len(degrees), "persons": int(degrees["person_id"].nunique()),
            "jobs": len(jobs)}


def master_chance(second_degree_share: float | None, persons: int, candidates: int) -> float:
    """The chance of each candidate to hold a master's: SECOND_DEGREE_SHARE (None), or
    `second_degree_share` x persons / candidates, so that the expected number of persons
    with a second degree is that share of all persons (the count is binomial)."""
    if second_degree_share is None:
        return SECOND_DEGREE_SHARE
    if not 0 <= second_degree_share <= 1:
        raise ValueError(f"--second-degree-share {second_degree_share:g}: a share, 0 to 1")
    chance = second_degree_share * persons / candidates if candidates else float("inf")
    if chance > 1:
        raise ValueError(f"--second-degree-share {second_degree_share:g}: at most "
                         f"{candidates / persons:.1%} of these {persons:,} persons can hold a "
                         "master's (bachelor's graduates early enough to have earnings after "
                         "one, and not across the CIP vintage switch)")
    return chance


def _split_jobs(annual: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """One job per person and year, a share of them split in two: the main job keeps 55-90%
    of the year's earnings (and its state, industry, employer), the other job the rest in
    the same state and another sector."""
    columns = ["person_id", "year", "earnings", "emp_state", "industry"] + (
        ["employer_id"] if "employer_id" in annual.columns else [])
    annual = annual[columns].assign(emp_state=annual["emp_state"].astype(object),
                                    industry=annual["industry"].astype(object))
    split = rng.random(len(annual)) < TWO_JOB_SHARE
    share = rng.uniform(0.55, 0.9, len(annual))
    main_pay = np.where(split, np.round(annual["earnings"].to_numpy() * share, 2),
                        annual["earnings"].to_numpy())
    other = annual[split].assign(
        earnings=annual["earnings"].to_numpy()[split] - main_pay[split],
        industry=np.array(NAICS_SECTORS)[rng.integers(0, len(NAICS_SECTORS), int(split.sum()))])
    if "employer_id" in other.columns:
        other["employer_id"] = None
    jobs = pd.concat([annual.assign(earnings=main_pay), other], ignore_index=True)
    return jobs.sort_values(["person_id", "year"], kind="stable", ignore_index=True)
