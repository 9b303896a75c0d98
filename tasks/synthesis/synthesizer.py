"""`pseo-das synthesize`: fully synthetic graduates and outcomes from sequential CART models
fitted on the confidential inputs (Barrientos et al. 2017, section 2.2), in the input
schema, with a comparison report for disclosure review. A data folder in the jobs layout
(graduates one row per degree, jobs per person, year and job) is read as the release derives
it, every degree record kept (tasks/inputs/degree_records.py `read_degree_records`): each
degree record is one confidential "graduate" of the models, and the synthetic files are in
the outcomes layout, one synthetic graduate per degree record.

Order (each variable predicted from those before it; lag one over the years after):
    institution (marginal) -> [inst_state, the institution's] -> degree level -> CIP code
    -> graduation year (kept in the CIP vintage of its code);
    then for 1, 5 and 10 years after graduation, each given the graduate's variables and
    the previous horizon's values: outcome record present -> employed -> state of
    employment -> industry -> earnings (donors' amounts).
Deterministic for a seed (ChaCha20 streams of the mechanism layer, one per step; trees
with a fixed tie-breaking state).

Privacy: NO formal guarantee. Every synthetic value is a confidential value copied from a
donor in a leaf of at least MIN_LEAF records; combinations are new, values are not. The
files must pass disclosure review before any release; the report (which holds statistics
of the confidential data) is written apart from them and must never be released.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pseo_das.config import ReleaseConfig
from pseo_das.reports.render import render_markdown, to_html
from pseo_das.schemas.codes import YEARS_AFTER
from pseo_das.tasks.inputs.degree_records import read_degree_records
from pseo_das.tasks.inputs.ingest import InputLayout, input_layout, read_inputs
from pseo_das.tasks.privacy.streams import synthesis_uniforms
from pseo_das.tasks.privacy.release_seed import seed_sha256
from pseo_das.tasks.synthesis.cart import MIN_LEAF, synthesize_step
from pseo_das.tasks.synthesis.comparison import comparison_context
from pseo_das.tasks.verification.records import data_version

CART_MARKER = b"pseo_das.cart_synthetic"
CODES = ("institution", "degree_level", "cipcode", "emp_state", "industry")
MAX_REDRAWS = 20


@dataclass(frozen=True)
class SynthesisResult:
    out_dir: Path
    report: Path
    graduates: int
    outcomes: int


def is_cart_synthetic(data_dir: Path) -> bool:
    path = Path(data_dir) / "graduates.parquet"
    try:
        return path.is_file() and CART_MARKER in (pq.read_schema(path).metadata or {})
    except (OSError, pa.ArrowInvalid):
        return False


class _Codes:
    """Integer codes of a text variable (-1: missing), with their labels."""

    def __init__(self, values: pd.Series):
        series = values.astype("string")
        self.labels = np.array(sorted(series.dropna().unique()), dtype=object)
        codes = np.searchsorted(self.labels, series.fillna("").to_numpy(dtype=object))
        self.codes = np.where(series.isna().to_numpy(), -1, codes).astype(np.int64)

    def text(self, codes: np.ndarray) -> np.ndarray:
        out = np.empty(len(codes), dtype=object)
        known = codes >= 0
        out[known] = self.labels[codes[known]]
        out[~known] = None
        return out


def person_table(graduates: pd.DataFrame, outcomes: pd.DataFrame) -> tuple[dict, dict]:
    """Each graduate's variables as arrays (codes, years, and per horizon: record present,
    employed, state, industry, earnings), and the code books."""
    books = {"institution": _Codes(graduates["institution"]),
             "degree_level": _Codes(graduates["degree_level"]),
             "cipcode": _Codes(graduates["cipcode"]),
             "emp_state": _Codes(outcomes["emp_state"]), "industry": _Codes(outcomes["industry"])}
    data = {name: books[name].codes for name in ("institution", "degree_level", "cipcode")}
    data["grad_year"] = graduates["grad_year"].to_numpy(dtype=np.int64)
    position = pd.Index(graduates["person_id"].to_numpy())
    n = len(graduates)
    for k in YEARS_AFTER:
        mine = (outcomes["years_after"] == k).to_numpy()
        at = position.get_indexer(outcomes["person_id"].to_numpy()[mine])
        present = np.zeros(n, dtype=np.int64)
        present[at] = 1
        earnings = np.full(n, np.nan)
        earnings[at] = outcomes["earnings"].to_numpy(dtype=float)[mine]
        state, industry = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
        state[at] = books["emp_state"].codes[mine]
        industry[at] = books["industry"].codes[mine]
        data.update({f"present_{k}": present, f"employed_{k}": (np.isfinite(earnings)).astype(np.int64),
                     f"state_{k}": state, f"industry_{k}": industry, f"earnings_{k}": earnings})
    return data, books


def _features(data: dict, names: list[str], rows) -> np.ndarray:
    if not names:
        return np.zeros((int(np.count_nonzero(rows)) if rows.dtype == bool else len(rows), 0))
    return np.column_stack([np.nan_to_num(np.asarray(data[n], dtype=float)[rows], nan=-1.0)
                            for n in names])


def synthesize_people(data: dict, books: dict, n: int, seed: bytes, switch_year: int) -> dict:
    """The synthetic graduates' variables, step by step (see the module doc)."""
    synthetic: dict[str, np.ndarray] = {}
    everyone, all_new = np.ones(len(data["grad_year"]), bool), np.ones(n, bool)

    def step(target: str, predictors: list[str], train: np.ndarray, new: np.ndarray,
             continuous: bool = False, fill=-1) -> None:
        values = np.full(n, fill, dtype=float if continuous else np.int64)
        picked = synthesize_step(_features(data, predictors, train), data[target][train],
                                 _features(synthetic, predictors, new),
                                 synthesis_uniforms(seed, target, int(new.sum())), continuous)
        values[new] = data[target][train][picked]
        synthetic[target] = values

    base: list[str] = []
    for variable in ("institution", "degree_level", "cipcode", "grad_year"):
        step(variable, base, everyone, all_new)
        base.append(variable)
    synthetic["grad_year"] = _cip_vintage_years(data, synthetic, seed, switch_year, base)
    previous: list[str] = []
    for k in YEARS_AFTER:
        given = base + previous
        step(f"present_{k}", given, everyone, all_new, fill=0)
        present_c, present_s = data[f"present_{k}"] == 1, synthetic[f"present_{k}"] == 1
        step(f"employed_{k}", given, present_c, present_s, fill=0)
        employed_c, employed_s = data[f"employed_{k}"] == 1, synthetic[f"employed_{k}"] == 1
        step(f"state_{k}", given, employed_c, employed_s)
        step(f"industry_{k}", given + [f"state_{k}"], employed_c, employed_s)
        step(f"earnings_{k}", given + [f"state_{k}", f"industry_{k}"], employed_c, employed_s,
             continuous=True, fill=np.nan)
        previous = [f"present_{k}", f"employed_{k}", f"state_{k}", f"industry_{k}", f"earnings_{k}"]
    return synthetic


def _cip_vintage_years(data: dict, synthetic: dict, seed: bytes, switch_year: int,
                       predictors: list[str]) -> np.ndarray:
    """Graduation years whose CIP vintage holds the record's code (a code is valid in a
    vintage when a confidential graduate of that vintage has it): invalid draws are drawn
    again from their leaf, then from the years of the confidential graduates with the code."""
    valid = set(zip(data["cipcode"].tolist(), (data["grad_year"] >= switch_year).tolist()))
    years = synthetic["grad_year"].copy()

    def bad(years_now):
        return np.array([(c, y >= switch_year) not in valid
                         for c, y in zip(synthetic["cipcode"].tolist(), years_now.tolist())], bool)

    wrong = bad(years)
    everyone = np.ones(len(data["grad_year"]), bool)
    for attempt in range(MAX_REDRAWS):
        if not wrong.any():
            break
        picked = synthesize_step(_features(data, predictors[:-1], everyone), data["grad_year"],
                                 _features(synthetic, predictors[:-1], wrong),
                                 synthesis_uniforms(seed, f"grad_year/cip-vintage/{attempt}",
                                                    int(wrong.sum())))
        years[wrong] = data["grad_year"][picked]
        wrong = bad(years)
    for code in np.unique(synthetic["cipcode"][wrong]):
        rows = np.flatnonzero(wrong & (synthetic["cipcode"] == code))
        pool = data["grad_year"][data["cipcode"] == code]
        uniforms = synthesis_uniforms(seed, f"grad_year/cip-vintage/code-{code}", len(rows))
        years[rows] = pool[np.floor(uniforms * len(pool)).astype(np.int64)]
    return years


def synthetic_frames(synthetic: dict, books: dict, state_of_institution: dict
                     ) -> tuple[pd.DataFrame, pd.DataFrame]:
    n = len(synthetic["grad_year"])
    ids = np.arange(1, n + 1, dtype=np.int64)
    institution = books["institution"].text(synthetic["institution"])
    graduates = pd.DataFrame({
        "person_id": ids, "institution": institution,
        "inst_state": [state_of_institution[i] for i in institution],
        "degree_level": books["degree_level"].text(synthetic["degree_level"]),
        "cipcode": books["cipcode"].text(synthetic["cipcode"]),
        "grad_year": synthetic["grad_year"].astype(np.int64)})
    parts = []
    for k in YEARS_AFTER:
        rows = synthetic[f"present_{k}"] == 1
        parts.append(pd.DataFrame({
            "person_id": ids[rows], "years_after": np.int64(k),
            "earnings": synthetic[f"earnings_{k}"][rows],
            "emp_state": books["emp_state"].text(synthetic[f"state_{k}"][rows]),
            "industry": books["industry"].text(synthetic[f"industry_{k}"][rows])}))
    outcomes = pd.concat(parts).sort_values(["person_id", "years_after"], kind="stable",
                                             ignore_index=True)
    return graduates, outcomes


def _write(frame: pd.DataFrame, path: Path, mark: dict) -> None:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           CART_MARKER: json.dumps(mark).encode()})
    pq.write_table(table, path, compression="zstd")


def synthesize(data_dir: Path, out_dir: Path, seed: bytes, cfg: ReleaseConfig,
               report_dir: Path | None = None) -> SynthesisResult:
    """Read and validate the confidential inputs, synthesize as many graduates, write
    graduates.parquet and outcomes.parquet to `out_dir` (which must not exist; staged and
    renamed, and checked by the input validation first) and the comparison report to
    `report_dir` (default: OUT-disclosure-review beside OUT)."""
    out_dir, started = Path(out_dir), time.perf_counter()
    report_dir = Path(report_dir) if report_dir else out_dir.with_name(out_dir.name + "-disclosure-review")
    for target in (out_dir, report_dir):
        if target.exists():
            raise FileExistsError(f"{target} already exists; synthetic files are never overwritten")
    years = (cfg.cells.first_cohort_year, cfg.cells.last_earnings_year)
    if input_layout(Path(data_dir)) is InputLayout.JOBS:   # one synthetic graduate per degree
        inputs, _ = read_degree_records(Path(data_dir), *years, tuple(cfg.cells.years_after))
    else:
        inputs = read_inputs(Path(data_dir), *years)
    confidential_g, confidential_o = inputs.graduates, inputs.outcomes
    data, books = person_table(confidential_g, confidential_o)
    state_of = dict(zip(confidential_g["institution"].astype(str), confidential_g["inst_state"].astype(str)))
    synthetic = synthesize_people(data, books, len(confidential_g), seed, cfg.cip.switch_year)
    graduates, outcomes = synthetic_frames(synthetic, books, state_of)
    mark = {"method": "sequential CART (Barrientos et al. 2017, section 2.2), donors per leaf "
                      f">= {MIN_LEAF}", "privacy": "no formal privacy guarantee; disclosure "
                      "review required before release",
            "seed_sha256": seed_sha256(seed), "source_data_version": data_version(inputs.fingerprints)}
    staging = out_dir.with_name(f".{out_dir.name}.staging-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        _write(graduates, staging / "graduates.parquet", mark)
        _write(outcomes, staging / "outcomes.parquet", mark)
        (staging / "README.md").write_text(
            "# Synthetic PSEO microdata (sequential CART)\n\nEvery value here was drawn from a model "
            "fitted on confidential data. **No formal privacy guarantee**: these files need "
            "disclosure review before any release.\n\n" + json.dumps(mark, indent=1) + "\n")
        check = read_inputs(staging, *years)          # the project's own input validation
        context = comparison_context(confidential_g, confidential_o, check.graduates,
                                     check.outcomes)
        context.update(mark=mark, seconds=round(time.perf_counter() - started, 1),
                       graduates=len(graduates), outcomes=len(outcomes), min_leaf=MIN_LEAF)
        text = render_markdown("synthesis_report.md.j2", context)
        report_dir.mkdir(parents=True)
        (report_dir / "synthesis_report.md").write_text(text)
        (report_dir / "synthesis_report.html").write_text(
            to_html(text, "Synthetic data: comparison for disclosure review"))
        os.rename(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return SynthesisResult(out_dir, report_dir / "synthesis_report.html", len(graduates),
                           len(outcomes))
