"""Assemble a release folder in staging: public tables and release notes, then the
internal ledger, configuration, disclosure review board report and manifest."""
from __future__ import annotations

import json
import time
import contextvars
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import pandas as pd

from pseo_das.errors import EXIT_CHECK_FAILED, PseoDasError
from pseo_das.config import ReleaseConfig
from pseo_das.schemas.distribution import ALL_FOLDER, TableFormat, published_name
from pseo_das.schemas.pseo_layout import SCHEMA_VERSION, Product, TableCheck, layout_report
from pseo_das.tasks.inputs.cells import CIP_2020
from pseo_das.tasks.inputs.frame_check import frame_check_of
from pseo_das.tasks.publication.employer_context import employer_context
from pseo_das.tasks.publication.flows_files import PseofWritten, write_flows_state, write_pseof
from pseo_das.tasks.publication.metadata_files import (ALL_INSTITUTIONS, ALL_VERSION,
                                                       official_folder_files, row_states)
from pseo_das.version import package_versions
from pseo_das.tasks.publication.document_context import (HISTOGRAMS_FILE, flows_context,
                                                         release_context, suppression_summary)
from pseo_das.reports.render import render_markdown, to_html
from pseo_das.tasks import file_task, progress
from pseo_das.tasks.study.flows_release_accuracy import grads_consistency
from pseo_das.tasks.employment_flows.division_flows import (FLOWS_STATE_FILE, FlowsRelease,
                                                            PublishedFlowsChecks)
from pseo_das.tasks.privacy.ledger import MEASURING_MECHANISMS, PrivacyLedger
from pseo_das.tasks.earnings.earnings_tables import HistogramTable, kept_earnings_table
from pseo_das.tasks.earnings.noisy_histograms import NoisyHistograms
from pseo_das.tasks.measurements.publication_record import PublicationRecord, ReleaseIdentity
from pseo_das.tasks.measurements.release_plan import (ReleasePlan, lifetime_budget_file,
                                                      lifetime_table)
from pseo_das.tasks.privacy.store import PrivacyStore, epsilon_text
from pseo_das.tasks.publication.explorer import write_release_explorers
from pseo_das.tasks.publication.explorer_data import (HistogramUnits, explorer_data,
                                                      written_histograms)
from pseo_das.tasks.publication.side_tables import SECTIONS, SideTable
from pseo_das.tasks.publication.labelled_workbook import WORKBOOK_NAME, write_release_workbook
from pseo_das.tasks.publication.partners_files import coverage_awards
from pseo_das.tasks.publication.parquet_files import (DATAPACKAGE_FILE, write_national_table,
                                                     write_table_package)
from pseo_das.tasks.publication.second_process import Apart, Here
from pseo_das.tasks.publication.review_request import ReviewRequest, decision_request
from pseo_das.tasks.publication.release_files import fingerprints, write_code_table, write_csv, write_manifest




@dataclass(frozen=True)
class LifetimeFigures:
    """The release's place in the privacy store: per population lifetime epsilon (before,
    this release, after), the DRB report's summary of it, and release_summary.json."""
    populations: pd.DataFrame
    summary: dict
    release_summary: dict


RELEASE_SUMMARY_FIGURES = ("new_epsilon", "new_measurements", "reused_measurements",
                           "populations_measured", "populations_reused", "max_lifetime_epsilon",
                           "lifetime_epsilon_cap", "new_delta", "max_lifetime_delta")


class ReleaseCheckFailed(PseoDasError, RuntimeError):
    """A check on the release's own outputs failed: the release is not published."""

    exit_code = EXIT_CHECK_FAILED


def write_folder_files(public: Path, files: dict[str, pd.DataFrame | str],
                       table_format: TableFormat) -> None:
    """The metadata and per-state files, by path relative to the public folder (the data
    tables by their CSV names, written in `table_format`)."""
    started = time.perf_counter()
    for name, content in files.items():
        path = public / name
        if not path.parent.exists():
            progress(f"writing the state folder {path.parent.name}/ "
                     f"({time.perf_counter() - started:.1f} s into the folder files)")
        path.parent.mkdir(exist_ok=True)
        if isinstance(content, str):
            path.write_text(content)
        elif name.endswith("_institutions.csv"):
            write_csv(content, path)        # names may hold commas: quoted as CSV needs
        else:
            write_code_table(content, path.with_name(published_name(path.name, table_format)))


def metadata_summary(files: dict[str, pd.DataFrame | str]) -> dict:
    """What the release notes say about the metadata and per-state files."""
    return {"states": sorted({name.split("/")[0] for name in files} - {ALL_FOLDER}),
            "version": files.get(ALL_VERSION),
            "institutions": len(files[ALL_INSTITUTIONS])}


def official_layout_check(public: Path, checked: list[TableCheck], cip_vintage: str) -> dict:
    """The official files of `public`, checked against the schema's label files as they
    were written (`checked`, in `Product` order), by the rules of `pseo-das
    validate-layout`; not when the CIP codes are published as measured (a release of an
    earlier version republished as it was: CIP-2010 codes for the cohorts coded in them,
    which the schema does not have)."""
    if cip_vintage != CIP_2020:
        return {"name": f"official layout (LEHD Public Use Schema {SCHEMA_VERSION})",
                "result": "not checked: the CIP codes are published as measured; "
                          "republish with --cip-vintage 2020 for files that follow the schema"}
    report = layout_report(public / ALL_FOLDER, checked)
    rows = ", ".join(f"{name} {n:,} rows" for name, n in report.rows.items())
    if report.ok:
        return {"name": f"{' and '.join(report.rows)} follow the LEHD Public Use Schema "
                        f"{SCHEMA_VERSION} (pseo-das validate-layout)", "result": f"passed ({rows})"}
    return {"name": "the official files follow the LEHD Public Use Schema "
                    f"{SCHEMA_VERSION} (pseo-das validate-layout)",
            "result": f"FAILED ({len(report.problems)} problems; first: {report.problems[0]})"}


def stop_on_failed_checks(checks: list[dict]) -> list[dict]:
    """The checks, if every one passed; otherwise ReleaseCheckFailed: nothing is published."""
    failed = [c for c in checks if c["result"].startswith("FAILED")]
    if failed:
        raise ReleaseCheckFailed("a check on the release failed: " + "; ".join(
            f"{c['name']}: {c['result']}" for c in failed))
    return checks


def ledger_checks(ledger: PrivacyLedger, earnings_drawn: int, flows_drawn: int,
                  other_drawn: int = 0) -> list[dict]:
    """Every noisy value comes from a ledger entry; the total is within the cap.
    `earnings_drawn`, `flows_drawn`: the measured values of the earnings histograms
    (PublishedEarnings.drawn) and of the flows (FlowsRelease.drawn); `other_drawn`:
    geometric values drawn by other products (the cell statistics' counts)."""
    drawn = other_drawn + earnings_drawn + flows_drawn
    recorded = sum(e.n_cells * e.n_bins for e in ledger.entries if e.mechanism in MEASURING_MECHANISMS)
    return [
        {"name": "noisy values drawn = noisy values recorded in the ledger",
         "result": ("passed" if drawn == recorded else "FAILED") + f" ({drawn:,} / {recorded:,})"},
        {"name": f"total epsilon within the cap {epsilon_text(ledger.epsilon_cap)} (exact)",
         "result": ("passed" if ledger.total_epsilon <= ledger.epsilon_cap else "FAILED")
         + f" ({epsilon_text(ledger.total_epsilon)})"},
    ]


def lifetime_figures(store_path: Path, plan: ReleasePlan,
                     record: PublicationRecord) -> LifetimeFigures:
    """lifetime_budget.csv, the DRB report's lifetime summary and release_summary.json of a
    recorded attempt, computed from the store as of that attempt (so that a republication
    gives the same figures)."""
    with PrivacyStore.open(store_path) as store:
        as_recorded = replace(plan, populations=lifetime_table(store, plan.plan,
                                                               plan.attempt.attempt))
    table, cap = as_recorded.populations, as_recorded.lifetime_cap
    after = table["after"]
    largest = max(after, default=Fraction(0))
    summary = {
        "store_attempt": plan.attempt.attempt, "new_spending": plan.new_spending,
        "superseded": plan.superseded, "populations": len(table), "cap": cap,
        "max_after": largest, "max_before": max(table["before"], default=Fraction(0)),
        "headroom_min": cap - largest,
        "distribution": after.groupby(after).size().rename("populations")
        .rename_axis("after").reset_index().to_dict("records"),
        "policy": record.store_policy, "store_chain": record.store_chain.model_dump(),
        **as_recorded.summary(),
    }
    identity = record.identity
    release_summary = {"release_id": identity.release_id,
                       **{key: summary[key] for key in RELEASE_SUMMARY_FIGURES},
                       "store": identity.store, "store_chain": summary["store_chain"],
                       "mlflow_run_id": identity.mlflow_run_id,
                       "demo_inputs": list(record.demo_inputs)}
    return LifetimeFigures(lifetime_budget_file(table), summary, release_summary)


@contextmanager
def second_thread(threads: int = 1):
    """`beside(function, *args)`: function(*args) in a second thread (one of `threads`), in
    the Prefect run's context (its progress lines go to the run's log), finished when the
    block ends."""
    with ThreadPoolExecutor(threads) as pool:
        yield lambda function, *args: pool.submit(contextvars.copy_context().run, function,
                                                  *args)


@dataclass(frozen=True)
class FlowsFiles:
    """What writing the flows files leaves for the rest of the release: pseof_all.csv's
    rows, cohorts and national rows, the checks of the published flows, and the
    documents' figures on the flows."""
    pseof: PseofWritten
    checks: list[dict]
    figures: dict


@file_task("write the flows files")
def write_flows_files(staging: Path, cfg: ReleaseConfig, flows: FlowsRelease,
                      earnings: PublishedEarnings) -> FlowsFiles:
    """pseof_all.csv and its state copies, and internal/flows_state.parquet (written on
    the other core: Arrow writes without the GIL), checked as they are written."""
    public, internal = staging / "public", staging / "internal"
    started = time.perf_counter()
    flows_checks = PublishedFlowsChecks()
    with second_thread() as beside:
        state_rows = beside(write_flows_state, internal / FLOWS_STATE_FILE, flows, flows_checks)
        institution_state = earnings.institution_states
        pseof = write_pseof(public, flows, institution_state,
                            set(row_states(earnings.pseoe, institution_state)), flows_checks,
                            cfg.publication.table_format, cfg.publication.parquet)
        progress(f"wrote {Product.PSEOF.file_name} ({pseof.all_rows:,} rows)"
                 f" and {len(pseof.rows) - 1} state copies, internal/{FLOWS_STATE_FILE} "
                 f"({state_rows.result():,} rows) ({time.perf_counter() - started:.1f} s)")
    return FlowsFiles(pseof, flows_checks.results(), flows_context(cfg, flows))


def write_release_notes(public: Path, notes: str, release_id: str) -> None:
    """public/release_notes.md and its HTML page."""
    (public / "release_notes.md").write_text(notes)
    (public / "release_notes.html").write_text(
        to_html(notes, f"PSEO release {release_id}: release notes"))


@dataclass(frozen=True)
class EarningsPublication:
    """What the earnings product publishes: its measured noisy histograms (the derived
    levels are summed into pseoe_all and pseoh_all: a 10m national release's histograms
    of every level are 888 MB in a process holding only them and the imports), pseoe_all,
    pseoh_all (as its histograms: `HistogramTable`), the per-cell summary's kept columns
    (`kept_cell_summary`: suppression) and the IPEDS completions its IPEDS counts are
    computed from (None: a release of an earlier version). Once its files are written a
    release keeps `published()` of it."""
    measured_tables: list[NoisyHistograms]
    pseoe: pd.DataFrame
    pseoh: HistogramTable
    cells: pd.DataFrame
    institution_states: dict[str, str]         # `institution_states(tables)`: OPEID -> FIPS
    ipeds_awards: pd.DataFrame | None = None   # of the IPEDS counts (the partners' coverage)

    def published(self) -> PublishedEarnings:
        return PublishedEarnings(kept_earnings_table(self.pseoe), self.cells,
                                 self.institution_states,
                                 sum(t.counts.size for t in self.measured_tables),
                                 coverage_awards(self.ipeds_awards))


@dataclass(frozen=True)
class PublishedEarnings:
    """What the rest of a release reads of the earnings product once its files are
    written: pseoe_all, the per-cell summary's kept columns (`kept_cell_summary`), each
    institution's state (OPEID -> FIPS), the noisy values its measurements drew
    (`ledger_checks`) and the IPEDS completions by institution and year (the partners
    files' coverage: `coverage_awards`)."""
    pseoe: pd.DataFrame
    cells: pd.DataFrame
    institution_states: dict[str, str]
    drawn: int
    ipeds_awards: pd.DataFrame | None


@dataclass(frozen=True)
class EarningsFiles:
    """pseoe_all and pseoh_all, written before the flows are read (a 10m national
    pseoh_all written beside the reading of the 1-year flows held both: 3.9 GB), with
    pseoe_all's layout check still running (its own thread), the labelled workbook
    (`workbook`, a second process, or this one for a small table; None without xlsx),
    their Parquet copies' rows by path (`parquet_rows`) and the explorer's histograms of
    pseoh_all (`histograms`)."""
    pseoe_check: TableCheck
    workbook: Apart | Here | None
    parquet_rows: dict[str, int]
    histograms: HistogramUnits


def write_pseoh(pseoh: HistogramTable, public: Path, table_format: TableFormat,
                parquet: bool) -> tuple[dict[str, int], HistogramUnits]:
    """pseoh_all (`write_national_table`, a block of rows at a time) and the explorer's
    histograms of it: the table itself is never whole in memory (a national one is tens of
    millions of rows)."""
    return (write_national_table(pseoh.blocks(), public, HISTOGRAMS_FILE, table_format, None,
                                 parquet),
            written_histograms(pseoh.cells, pseoh.counts, pseoh.bins))


# a workbook of more pseoe rows is written in the second process; a smaller one (under half
# a CPU second) in this one, when the release waits for it
WORKBOOK_APART_ROWS = 2_000


@file_task("write the earnings files")
def write_earnings_files(staging: Path, cfg: ReleaseConfig, earnings: EarningsPublication,
                         release_id: str, apart: Callable[..., Apart]) -> EarningsFiles:
    """pseoe_all (checked as written) into `staging`, then the workbook started in the
    second process of `apart` (`second_process`; a small one left to write in this
    process, WORKBOOK_APART_ROWS), which outlives this task, and pseoh_all."""
    public = staging / "public"
    table_format, parquet = cfg.publication.table_format, cfg.publication.parquet
    pseoe_name = published_name(Product.PSEOE.file_name, table_format)
    pseoe_check = TableCheck(pseoe_name, Product.PSEOE, list(earnings.pseoe.columns))
    pseoe_parquet = write_national_table(earnings.pseoe, public, Product.PSEOE.file_name,
                                         table_format, pseoe_check, parquet)
    workbook = ((apart if len(earnings.pseoe) > WORKBOOK_APART_ROWS else Here)(
        write_release_workbook, public, release_id) if cfg.publication.xlsx else None)
    pseoh_parquet, histograms = write_pseoh(earnings.pseoh, public, table_format, parquet)
    progress(f"wrote {Product.PSEOE.file_name} ({len(earnings.pseoe):,} rows) and "
             f"{HISTOGRAMS_FILE} ({len(earnings.pseoh):,} rows)")
    return EarningsFiles(pseoe_check, workbook, pseoe_parquet | pseoh_parquet, histograms)


@dataclass(frozen=True)
class ReleaseContent:
    """The products' outputs a release folder is written from. `earnings_files`: pseoe_all
    and pseoh_all, written; `flows` may have released its tables (the flows files are
    written: `flows_files`); `flows_accuracy`: `release_flows_accuracy`'s simulation of the
    published flows; `side_tables`: the optional one-file products (`side_tables.py`);
    `earnings_accuracy`: `release_accuracy` of the earnings tables, being simulated in a
    second thread."""
    earnings: PublishedEarnings
    earnings_files: EarningsFiles
    flows: FlowsRelease
    flows_files: FlowsFiles
    flows_accuracy: dict
    side_tables: list[SideTable]
    earnings_accuracy: Future


@dataclass(frozen=True)
class ReleaseFacts:
    """What the documents state beside the tables: who made the release and how, its ledger
    and place in the store, the checks so far, the inputs' fingerprints, the CIP recast's
    notes, the dollars (None: the bins' dollars, as releases of earlier versions) and the
    review it is held for (None: published at once)."""
    identity: ReleaseIdentity
    cfg: ReleaseConfig
    ledger: PrivacyLedger
    lifetime: LifetimeFigures
    checks: list[dict]
    input_fingerprints: dict[str, str]
    cip_recast: dict
    dollars: dict | None
    review: ReviewRequest | None = None


@file_task("write release files")
def write_release(staging: Path, content: ReleaseContent, facts: ReleaseFacts) -> dict[str, str]:
    """Write every file of the release but the flows files into `staging`; return the
    manifest. The official files' Parquet copies are written in a second thread and the
    explorer's data read in a third while the documents are made; they have finished when
    this returns or raises, and so has the workbook (`write_earnings_files`)."""
    with second_thread(threads=2) as beside:
        return _write_release(beside, staging, content, facts)


def _write_release(beside, staging: Path, content: ReleaseContent,
                   facts: ReleaseFacts) -> dict[str, str]:
    public, internal = staging / "public", staging / "internal"
    identity, cfg, ledger, lifetime = facts.identity, facts.cfg, facts.ledger, facts.lifetime
    earnings, flows, flows_files = content.earnings, content.flows, content.flows_files
    pseoe, cells = earnings.pseoe, earnings.cells
    checks = facts.checks
    started = time.perf_counter()

    def done(what: str) -> None:
        progress(f"{what} ({time.perf_counter() - started:.1f} s into writing the release)")

    table_format = cfg.publication.table_format
    earnings_files = content.earnings_files
    pseoe_check, workbook = earnings_files.pseoe_check, earnings_files.workbook
    copied, histograms = earnings_files.parquet_rows, earnings_files.histograms
    pseof = flows_files.pseof
    metadata = official_folder_files(pseoe, pseof.cohorts, earnings.institution_states,
                                     identity.release_id, earnings.ipeds_awards,
                                     cfg.publication.data_providers)
    write_folder_files(public, metadata, table_format)
    done(f"wrote the institutions, version and {len(metadata) - 1} other state folder files")
    layout_check = official_layout_check(public, [pseoe_check, pseof.layout_check],
                                         facts.cip_recast["published_vintage"])
    parquet = beside(write_table_package, public, copied | pseof.parquet_rows) \
        if cfg.publication.parquet else None
    context = release_context(cfg, ledger, cells, release_id=identity.release_id,
                              code_version=identity.code_version,
                              seed_sha256=identity.seed_sha256,
                              config_sha256=identity.config_sha256,
                              n_pseoe_rows=len(pseoe), n_pseoh_rows=histograms.rows)
    context["flows"] = flows_files.figures
    context["employers"] = employer_context(cfg, ledger)
    context["measurements"] = {key: lifetime.summary[key] for key in (
        "new_epsilon", "new_measurements", "reused_measurements", "populations_measured",
        "populations_reused")}
    context["lifetime_epsilon_cap"] = lifetime.summary["lifetime_epsilon_cap"]
    context["cip_recast"] = facts.cip_recast
    context["dollars"] = facts.dollars
    context["demo_inputs"] = lifetime.release_summary["demo_inputs"]
    context["frame_check"] = frame_check_of(checks)   # the cell frame against IPEDS
    context["metadata_files"] = metadata_summary(metadata)
    context["consistency"] = grads_consistency(cfg, pseoe, pseof.national_rows, cells,
                                               content.flows_accuracy["errors"])
    context.update(dict.fromkeys(SECTIONS))
    for side_table in content.side_tables:
        table_file = side_table.write(public, cfg, facts.dollars)
        done(f"wrote {table_file.file_name} ({table_file.rows:,} rows)")
        context[side_table.section] = table_file.context
        checks = checks + table_file.checks
    write_release_notes(public, render_markdown("release_notes.md.j2", context),
                        identity.release_id)
    done("wrote the release notes")
    # the explorer's data: the public files, and pseof_all, pseoh_all and pseoe_all as written
    explorer = beside(explorer_data, public, flows_files.pseof.explorer_flows, histograms, pseoe)

    write_csv(ledger.to_frame(), internal / "ledger.csv")
    write_csv(lifetime.populations, internal / "lifetime_budget.csv")
    (internal / "release_summary.json").write_text(
        json.dumps(lifetime.release_summary, indent=2) + "\n")
    (internal / "config.json").write_text(json.dumps(cfg.model_dump(mode="json"), indent=2) + "\n")
    if workbook is not None:
        workbook.result()
        done(f"wrote {ALL_FOLDER}/{WORKBOOK_NAME}")
    if parquet is not None:
        done(f"wrote all/{DATAPACKAGE_FILE} and {len(parquet.result())} Parquet copies")
    written = fingerprints(staging)      # every file but the DRB report and the manifest
    accuracy = content.earnings_accuracy.result()
    checks = stop_on_failed_checks(checks + [layout_check] + flows.checks
                                   + flows_files.checks + ledger_checks(
                                       ledger, earnings.drawn, flows.drawn,
                                       sum(side_table.drawn for side_table in content.side_tables)))
    drb = render_markdown("drb_report.md.j2", dict(
        context, ledger=ledger.entries, mlflow_run_id=identity.mlflow_run_id,
        tracking_uri=identity.tracking_uri, suppression=suppression_summary(cells),
        checks=checks, input_fingerprints=facts.input_fingerprints,
        lifetime=lifetime.summary, flows_accuracy=content.flows_accuracy, accuracy=accuracy,
        output_fingerprints=written, config_flat=cfg.flat(),
        decision=None if facts.review is None else decision_request(
            facts.review, staging, written, cells, lifetime.release_summary,
            content.flows_accuracy),
        package_versions=package_versions()))
    (internal / "drb_report.md").write_text(drb)
    (internal / "drb_report.html").write_text(
        to_html(drb, f"DRB report: PSEO release {identity.release_id}"))
    write_release_explorers(staging, explorer.result())   # public/, internal/
    manifest = write_manifest(staging, identity.release_id, identity.mlflow_run_id,
                              identity.tracking_uri, lifetime.release_summary["store_chain"],
                              known=written)
    progress(f"wrote {len(manifest)} files to staging")
    return manifest
