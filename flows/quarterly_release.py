"""The quarterly release (earnings and employment flows) as a Prefect flow, and
`republish`, which re-derives a release from the privacy store alone.

Wiring only. Two halves:
  measurement:      inputs -> cell frame -> release plan (reuse | measure new) -> store
  post-processing:  store -> derived tables, percentiles, flows correction, suppression
                    -> release files (the same code for a release and a republication)
"""
from __future__ import annotations

import hashlib
import json
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
from prefect import flow
from pydantic import SecretStr

from pseo_das.config import ReleaseConfig, check_release_id, load_config
from pseo_das.version import code_version
from pseo_das.tasks import progress
from pseo_das.tasks.audit.mlflow_run import (AuditRun, default_tracking_uri, record_release,
                                             release_parameters, seed_parameters)
from pseo_das.tasks.audit.store_witness import (HEAD_PARAMS, PUBLISHED_TAG, close_abandoned_runs,
                                                witness_problems)
from pseo_das.tasks.earnings.earnings_tables import build_publication_tables
from pseo_das.tasks.earnings.cell_statistics import cell_statistics_summary
from pseo_das.tasks.measurements.stored_cell_statistics import cell_statistics_from_record
from pseo_das.tasks.audit.mlflow_run import cell_statistics_parameters
from pseo_das.tasks.earnings.noisy_histograms import derive_earnings
from pseo_das.tasks.employment_flows.division_flows import build_flows_tables
from pseo_das.tasks.employment_flows.flows_correction import correct_flows
from pseo_das.tasks.employment_flows.noisy_flows import derive_all_flows
from pseo_das.tasks.cip_recast.recast import check_recastable, recast_context, recast_notes
from pseo_das.tasks.cip_recast.recast_inputs import RecastInputs, load_recast
from pseo_das.tasks.inputs.cells import CIP_2020
from pseo_das.tasks.inputs.constant_dollars import dollar_years
from pseo_das.tasks.inputs.cpi import find_cpi, read_cpi
from pseo_das.tasks.inputs.frame_check import check_frame_against_ipeds
from pseo_das.tasks.inputs.ingest import InputValidationError
from pseo_das.tasks.inputs.true_counts import Engine, count_inputs
from pseo_das.tasks.inputs.ipeds_counts import load_ipeds_counts_inputs
from pseo_das.tasks.inputs.reference_inputs import (ReferenceInputs, default_reference_dir,
                                                    demo_flows_inputs, load_reference)
from pseo_das.tasks.privacy.mechanism import PrivacyLedger
from pseo_das.tasks.measurements.products import (CELL_STATISTICS, EARNINGS, EMPLOYER_TABLE,
                                                  FLOWS, StoreReading, measure_pending,
                                                  planning_frames)
from pseo_das.tasks.measurements.publication_record import (PublicationRecord, ReleaseIdentity,
                                                            read_publication_record)
from pseo_das.tasks.measurements.release_plan import ReleasePlan, record_release_plan, recorded_plan
from pseo_das.tasks.privacy.release_seed import ReleaseSeed
from pseo_das.tasks.privacy.store import (PrivacyStore, check_store_writable, init_store,
                                          resolve_store, store_exists, store_lock)
from pseo_das.tasks.privacy.store_integrity import StoreTampered, verify_store
from pseo_das.tasks.measurements.stored_tables import (ipeds_awards_from_record, keep_measurements,
                                                  keep_publication_record,
                                                  recast_inputs_from_record,
                                                  reference_from_record)
from pseo_das.tasks.study.flows_release_accuracy import release_flows_accuracy
from pseo_das.tasks.publication.assemble import (lifetime_figures, write_flows_files,
                                                 write_release)
from pseo_das.tasks.publication.document_context import guarantee_summary
from pseo_das.tasks.publication.review import (Hold, decision_of, hold_release, last_cleared,
                                               refuse_release_of_held, refuse_unreviewed,
                                               review_folder, review_request_of,
                                               stamp_clearance)
from pseo_das.tasks.publication.review_request import ReviewRequest
from pseo_das.flows.review_release import hold_tags
from pseo_das.tasks.publication.release_files import (DestinationExistsError,
                                                      check_destination_usable,
                                                      destination_lock, discard, new_staging,
                                                      publish, published_release)


@dataclass
class ReleaseResult:
    out_dir: Path
    release_id: str
    mlflow_run_id: str
    tracking_uri: str
    summary: dict                 # release_summary.json
    already_published: bool = False
    held: Hold | None = None      # held for review: staged in held.folder, nothing published


def refuse_demo_in_production(cfg: ReleaseConfig, demo: list[str]) -> None:
    """A production release (`release.production`) never uses the packaged demo files."""
    if cfg.release.production and demo:
        raise InputValidationError(
            f"release.production = true, but the {', '.join(demo)} file(s) are the packaged "
            "SYNTHETIC demo files: no microdata was read and nothing was spent. Give --reference DIR with the real "
            "files (README, Inputs).")


def rerun_tags(release_id: str, out_dir: Path, release_run_id: str) -> dict[str, str]:
    """The tags of a rerun that found its release already published: a child of the run
    that published it (MLflow's parent link), with a note; its seed stays on that run."""
    return {"already_published": str(out_dir), "rerun_of_run": release_run_id,
            "mlflow.parentRunId": release_run_id,
            "mlflow.note.content": f"Rerun of release {release_id}: it was already published in "
                                   f"{out_dir} by run {release_run_id}. Nothing was measured, "
                                   "spent or written; the seed and the record are on that run."}


def fingerprint(values: dict) -> str:
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()


@flow(name="post_processing")
def post_processing(store_path: Path, plan: ReleasePlan, cfg: ReleaseConfig,
                    reference: ReferenceInputs, recast_inputs: RecastInputs | None,
                    identity: ReleaseIdentity, record: PublicationRecord,
                    staging: Path, review: ReviewRequest | None = None
                    ) -> tuple[PrivacyLedger, pd.DataFrame, object, dict, dict]:
    """Every public and internal file of a release from its stored measurements and public
    inputs only: no microdata, no new noise. `recast_inputs` None publishes the CIP codes
    as measured (releases of earlier versions), otherwise CIP-2020; `review`: the release
    is held for review. Returns (ledger, cells, flows, manifest, release summary)."""
    contexts = None if recast_inputs is None else {
        level: recast_context(recast_inputs, cfg.cells, level, cfg.cip.unseen_transition_weight)
        for level in cfg.measured_cip_levels()}
    reading = StoreReading(store_path, plan.plan, cfg, contexts)
    earnings_measured, _, earnings_read, earnings_recasts = EARNINGS.read(reading)
    tables, earnings_entries = derive_earnings(earnings_measured, cfg)
    with PrivacyStore.open(store_path) as privacy_store:
        ipeds = ipeds_awards_from_record(privacy_store, record)
    pseoe, pseoh, cells, checks = build_publication_tables(tables, cfg, record.dollars, ipeds)
    _, flows_measured, flows_read, flows_recasts = FLOWS.read(reading)
    measured_entries, recasts = earnings_read + flows_read, earnings_recasts + flows_recasts
    flows_tables, flows_entries = derive_all_flows(flows_measured, cfg)
    del flows_measured   # a national release's flows tables are large: one copy at a time
    corrected, correction, correction_entries = correct_flows(
        flows_tables, reference, cfg.flows.nonemployed_weight)
    del flows_tables
    flows = build_flows_tables(corrected, correction, reference,
                               cfg.flows.division_unobserved_share_max)
    del corrected
    cell_statistics = (cell_statistics_from_record(store_path, record.cell_statistics)
                       or CELL_STATISTICS.read(reading))
    employer_table = EMPLOYER_TABLE.read(reading)
    ledger = PrivacyLedger.of(cfg.privacy.epsilon_cap, measured_entries + earnings_entries
                              + flows_entries + correction_entries
                              + (cell_statistics.entries if cell_statistics else [])
                              + (list(employer_table.entries) if employer_table else []))
    flows_accuracy = release_flows_accuracy(cfg, flows.tables, reference,
                                            bytes.fromhex(identity.seed_sha256))
    lifetime = lifetime_figures(store_path, plan, record)
    lifetime = replace(lifetime, release_summary={
        **lifetime.release_summary, "guarantee": guarantee_summary(ledger),
        # release_summary.json says what the store does not hold
        **({"cell_statistics": cell_statistics_summary(cell_statistics)}
           if cell_statistics is not None else {})})
    flows_files = write_flows_files(staging, cfg, flows, pseoe, tables)
    flows.release_tables()   # written: the rest of the release reads its counts and checks
    manifest = write_release(staging, identity, cfg, ledger, tables, pseoe, pseoh, cells, flows,
                             flows_files, lifetime, record.input_checks + checks,
                             record.input_fingerprints, recast_notes(recast_inputs, recasts),
                             None if record.dollars is None else record.dollars.as_dict(),
                             flows_accuracy, cell_statistics,
                             employer_table, review)
    return ledger, cells, flows, manifest, lifetime.release_summary


@flow(name="quarterly_release")
def quarterly_release(data_dir: Path, out_dir: Path, release_seed: SecretStr | None,
                      release_id: str, config_path: Path | None = None,
                      tracking_uri: str | None = None, reference_dir: Path | None = None,
                      store: Path | None = None, supersede: bool = False,
                      remeasure: str | None = None, create_store: bool = False,
                      engine: Engine = Engine(), hold_for_review: bool = False) -> ReleaseResult:
    """Confidential microdata in `data_dir` -> published PSEO earnings and employment flows
    tables in `out_dir`, measuring only populations the privacy store has never measured
    for a question. `reference_dir` holds the public J2J, QCEW and state coverage files
    (default: the packaged demo files).

    The seed is a SecretStr so that Prefect stores it masked; it goes to the audit stores
    only. Without a seed, a release id already in the store reuses its own seed and plan
    (a retry or a resumed crash draws the same noise and spends nothing new), and a new
    release id gets 256 fresh bits.

    `hold_for_review` stages the complete release in the privacy store's review folder
    instead of publishing it (`tasks/publication/review.py`); `release.require_review`
    refuses a release without it.
    """
    cfg = load_config(config_path)
    check_release_id(release_id)
    refuse_unreviewed(cfg, hold_for_review)
    given_seed = None if release_seed is None else \
        ReleaseSeed.from_hex(release_seed.get_secret_value())
    store_path = resolve_store(store, cfg.privacy.store)
    out_dir = Path(out_dir).expanduser().absolute()
    check_destination_usable(out_dir)
    with ExitStack() as held:
        held.enter_context(destination_lock(out_dir))
        if create_store and not store_exists(store_path):
            init_store(store_path)
        PrivacyStore.open(store_path).close()   # a missing store is refused before anything else
        held.enter_context(store_lock(store_path))
        check_store_writable(store_path)
        verify_store(store_path).raise_if_failed()
        return _measure_and_publish(data_dir, out_dir, given_seed, release_id, cfg,
                                    tracking_uri, reference_dir, store_path, supersede, remeasure,
                                    engine, hold_for_review)


def _measure_and_publish(data_dir: Path, out_dir: Path, given_seed: ReleaseSeed | None,
                         release_id: str, cfg: ReleaseConfig, tracking_uri: str | None,
                         reference_dir: Path | None, store_path: Path, supersede: bool,
                         remeasure: str | None, engine: Engine,
                         hold_for_review: bool = False) -> ReleaseResult:
    """The release proper, with the store and the destination locked and the store
    verified."""
    version = code_version()
    audit = AuditRun(tracking_uri or default_tracking_uri(), release_id)
    reference_dir = Path(reference_dir or default_reference_dir())
    staging = None
    try:
        with PrivacyStore.open(store_path) as privacy_store:
            store_id = privacy_store.store_id
            earlier_runs = audit.runs_of_store(store_path, store_id)
            for line in close_abandoned_runs(audit.client, earlier_runs, audit.run_id,
                                             store_path):
                progress(line)
            problems = witness_problems(privacy_store, earlier_runs)
            if not problems:     # a store that disagrees is reported as such, below
                refuse_release_of_held(privacy_store, release_id, supersede)
            cleared_before = last_cleared(privacy_store) if hold_for_review else None
        if problems:
            raise StoreTampered("the privacy store disagrees with what earlier releases "
                                "recorded in the MLflow tracking store; nothing may be released "
                                "from it until the agency restores it:\n  "
                                + "\n  ".join(problems[:12]))
        audit.log_params(release_parameters(cfg, release_id, data_dir, reference_dir, out_dir,
                                            store_path, store_id, version, supersede, remeasure)
                         | {"engine": engine.describe()})
        published = published_release(out_dir, release_id)  # refuses a folder in the way
        if published is not None and (supersede or remeasure):
            raise DestinationExistsError(f"{out_dir} holds release {release_id}; a new plan "
                                         "is published to a new folder")
        recast_inputs = load_recast(reference_dir, cfg.cip.switch_year)
        ipeds = load_ipeds_counts_inputs(reference_dir, cfg.cells, cfg.cip.switch_year)
        demo = demo_flows_inputs(reference_dir) + list(recast_inputs.packaged)
        demo += ["IPEDS"] if ipeds.packaged and "IPEDS" not in demo else []
        refuse_demo_in_production(cfg, demo)
        cpi = read_cpi(find_cpi(reference_dir))
        counts = count_inputs(Path(data_dir), cfg, recast_inputs.vintages(cfg.cip.switch_year),
                              cpi, engine)
        counts = check_frame_against_ipeds(counts, ipeds, cfg)   # before any noise
        dollars = dollar_years(cpi, cfg.earnings.dollar_year, cfg.earnings.publication_dollar_year)
        reference = load_reference(reference_dir)
        fingerprints = {**counts.fingerprints, **reference.fingerprints,
                        **recast_inputs.fingerprints, **ipeds.fingerprints,
                        f"bls/{cpi.path.name}": cpi.sha256}
        check_recastable(counts.frames, recast_inputs)
        config_sha256 = fingerprint(cfg.model_dump(mode="json"))
        plan = record_release_plan(store_path, release_id, given_seed, fingerprint(fingerprints),
                                   config_sha256, cfg, planning_frames(counts), supersede,
                                   remeasure)
        seed = plan.attempt.seed
        if published is not None:  # a rerun that finds its release complete: nothing to do
            if plan.new_spending:
                raise DestinationExistsError(f"{out_dir} already holds release {release_id}")
            audit.set_tags(rerun_tags(release_id, out_dir, published["mlflow_run_id"]))
            audit.finish()
            summary = json.loads((out_dir / "internal" / "release_summary.json").read_text())
            return ReleaseResult(out_dir, release_id, audit.run_id, audit.tracking_uri,
                                 summary, True)
        audit.log_params(seed_parameters(seed, plan))
        measured = measure_pending(plan.pending, counts, cfg)
        keep_measurements(store_path, measured)
        input_checks = counts.checks
        del measured, counts   # post-processing reads the store: the dense arrays can go
        with PrivacyStore.open(store_path) as privacy_store:
            store_chain = {"read": plan.chain_read.as_dict(),
                           "written": privacy_store.head().as_dict()}
        audit.log_params({HEAD_PARAMS[k]: json.dumps(v, sort_keys=True)
                          for k, v in store_chain.items()})
        identity = ReleaseIdentity(release_id, seed.sha256, version, audit.run_id,
                                   audit.tracking_uri, config_sha256, str(store_path))
        record = keep_publication_record(store_path, {
            "identity": identity, "attempt": plan.attempt.attempt,
            "config": cfg, "input_fingerprints": fingerprints,
            "input_checks": input_checks, "new_spending": plan.new_spending,
            "superseded": plan.superseded, "store_policy": plan.policy.as_dict(),
            "store_chain": store_chain, "dollars": dollars.as_dict(), "demo_inputs": demo},
            reference, recast_inputs, ipeds)
        staging = new_staging(out_dir)
        review = ReviewRequest(review_folder(store_path, release_id, plan.attempt.attempt),
                               cleared_before) if hold_for_review else None
        ledger, cells, flows, manifest, summary = post_processing(
            store_path, plan, cfg, reference, recast_inputs, identity, record, staging, review)
        record_release(audit, ledger, cells, flows, staging, fingerprints, manifest,
                       plan.summary())
        if summary.get("cell_statistics"):
            audit.log_params(cell_statistics_parameters(summary["cell_statistics"]))
        if review is not None:
            with PrivacyStore.open(store_path) as privacy_store:
                hold = hold_release(privacy_store, staging, plan.attempt,
                                    privacy_store.put_json(record.stored()), out_dir,
                                    audit.run_id, audit.tracking_uri)
            audit.set_tags(hold_tags(hold))
            audit.finish()
            return ReleaseResult(Path(hold.folder), release_id, audit.run_id,
                                 audit.tracking_uri, summary, held=hold)
        with PrivacyStore.open(store_path) as privacy_store:
            head = privacy_store.add_publication(plan.attempt.attempt,
                                                 privacy_store.put_json(record.stored()),
                                                 out_dir)
        audit.set_tags({PUBLISHED_TAG: json.dumps(head.as_dict(), sort_keys=True)})
        publish(staging, out_dir)
        audit.set_tags({"published_to": str(out_dir)})
        audit.finish()
    except BaseException as exc:
        discard(staging)
        audit.fail(f"{type(exc).__name__}: {exc}")
        raise
    return ReleaseResult(out_dir, release_id, audit.run_id, audit.tracking_uri, summary)


@flow(name="republish")
def republish(store: Path, release_id: str, out_dir: Path, cip_vintage: str | None = None,
              reference_dir: Path | None = None) -> ReleaseResult:
    """Re-derive every public and internal file of a published release from the privacy
    store alone: no microdata, no new noise, no new spending. Byte-identical to the
    original for the same code and configuration. A release of an earlier version published
    its codes as measured (CIP-2010); `cip_vintage="2020"` publishes it in CIP-2020 codes,
    recasting its stored measurements with the recast inputs of `reference_dir` (default:
    the packaged ones)."""
    store_path = Path(store).resolve()
    out_dir = Path(out_dir).expanduser().absolute()
    check_destination_usable(out_dir)
    with destination_lock(out_dir):   # as a release holds it: never beside a running one
        return _republish(store_path, release_id, out_dir, cip_vintage, reference_dir)


def _republish(store_path: Path, release_id: str, out_dir: Path, cip_vintage: str | None,
               reference_dir: Path | None) -> ReleaseResult:
    """The republication proper, with the destination locked."""
    with PrivacyStore.open(store_path) as privacy_store:
        attempt, record = read_publication_record(privacy_store, release_id)
        reference = reference_from_record(privacy_store, record)
        recast_inputs = recast_inputs_from_record(privacy_store, record)
        plan = recorded_plan(privacy_store, attempt, record)
        clearance = decision_of(privacy_store, release_id, attempt.attempt)
        review = review_request_of(privacy_store, release_id, attempt.attempt)
    cfg = record.config
    if cip_vintage == CIP_2020 and recast_inputs is None:
        recast_inputs = load_recast(reference_dir, cfg.cip.switch_year)
    elif cip_vintage not in (None, CIP_2020):
        raise ValueError(f"--cip-vintage {cip_vintage}: releases are republished in CIP-2020 "
                         "codes or as they were published")
    identity = record.identity
    staging = new_staging(out_dir, discard_stale=False)   # deletes nothing it did not create
    try:
        summary = post_processing(store_path, plan, cfg, reference, recast_inputs, identity,
                                  record, staging, review)[-1]
        if clearance is not None:    # published after review: with its clearance
            stamp_clearance(staging, clearance, staging)
        publish(staging, out_dir)
    except BaseException:
        discard(staging)
        raise
    return ReleaseResult(out_dir, release_id, identity.mlflow_run_id, identity.tracking_uri,
                         summary)
