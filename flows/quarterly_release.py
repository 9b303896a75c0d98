"""The quarterly release (earnings and employment flows) as a Prefect flow, and
`republish`, which re-derives a release from the privacy store alone.

Wiring only. Two halves:
  measurement:      inputs -> cell frame -> release plan (reuse | measure new) -> store
  post-processing:  store -> derived tables, percentiles, flows correction, suppression
                    -> release files (the same code for a release and a republication)
"""
from __future__ import annotations

import json
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
from pydantic import SecretStr

from pseo_das.config import ReleaseConfig, check_release_id, load_config
from pseo_das.version import code_version
from pseo_das.tasks import progress, release_flow
from pseo_das.tasks.audit.mlflow_run import (AuditRun, cell_statistics_parameters,
                                             default_tracking_uri, record_release,
                                             release_parameters, rerun_tags, seed_parameters)
from pseo_das.tasks.audit.store_witness import (HEAD_PARAMS, PUBLISHED_TAG, close_abandoned_runs,
                                                witness_problems)
from pseo_das.tasks.earnings.earnings_tables import (build_histogram_table,
                                                     build_publication_tables,
                                                     institution_states, kept_cell_summary)
from pseo_das.tasks.earnings.cell_statistics import cell_statistics_summary
from pseo_das.tasks.earnings.noisy_histograms import derive_earnings
from pseo_das.tasks.employment_flows.division_flows import FlowsRelease, build_flows_tables
from pseo_das.tasks.employment_flows.flows_correction import correct_flows
from pseo_das.tasks.employment_flows.noisy_flows import derive_all_flows
from pseo_das.tasks.cip_recast.recast import RecastPlan, recast_notes, recast_plan
from pseo_das.tasks.cip_recast.recast_inputs import load_recast
from pseo_das.tasks.inputs.cells import CIP_2020
from pseo_das.tasks.inputs.true_counts import Engine
from pseo_das.tasks.inputs.reference_inputs import ReferenceInputs, default_reference_dir
from pseo_das.tasks.privacy.ledger import LedgerEntry, PrivacyLedger
from pseo_das.tasks.measurements.products import (CELL_STATISTICS, EARNINGS, EMPLOYER_TABLE,
                                                  FLOWS, StoreReading, measure_pending,
                                                  planning_frames)
from pseo_das.tasks.measurements.publication_record import (PublicationRecord, ReleaseIdentity,
                                                            read_publication_record)
from pseo_das.tasks.measurements.release_inputs import (ReleaseInputs, fingerprint,
                                                        read_release_inputs)
from pseo_das.tasks.measurements.release_plan import ReleasePlan, record_release_plan, recorded_plan
from pseo_das.tasks.measurements.stored_cell_statistics import cell_statistics_from_record
from pseo_das.tasks.privacy.release_seed import ReleaseSeed
from pseo_das.tasks.privacy.store import (PrivacyStore, check_store_writable, init_store,
                                          resolve_store, store_exists, store_lock)
from pseo_das.tasks.privacy.store_integrity import StoreTampered, verify_store
from pseo_das.tasks.measurements.stored_tables import (ipeds_awards_from_record, keep_measurements,
                                                  keep_publication_record,
                                                  recast_inputs_from_record,
                                                  reference_from_record)
from pseo_das.tasks.study.accuracy import release_accuracy
from pseo_das.tasks.study.flows_release_accuracy import release_flows_accuracy
from pseo_das.tasks.publication.assemble import (EarningsPublication, ReleaseContent,
                                                 ReleaseFacts, lifetime_figures,
                                                 second_thread, write_earnings_files,
                                                 write_flows_files, write_release)
from pseo_das.tasks.publication.second_process import second_process
from pseo_das.tasks.publication.document_context import guarantee_summary
from pseo_das.tasks.publication.review import (ClearedRelease, Hold, decision_of, hold_release, last_cleared,
                                               refuse_release_of_held, refuse_unreviewed,
                                               review_folder, review_request_of,
                                               stamp_clearance)
from pseo_das.tasks.publication.review_request import ReviewRequest
from pseo_das.tasks.publication.side_tables import side_tables
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
    new_spending: bool = True     # False: the attempt was measured by an earlier run


@dataclass(frozen=True)
class PostProcessed:
    """What post-processing leaves for the audit run and the publication: the release's
    ledger, its cells (suppression), the flows' counts and checks (tables released), the
    manifest of the staged files and release_summary.json."""
    ledger: PrivacyLedger
    cells: pd.DataFrame
    flows: FlowsRelease
    manifest: dict[str, str]
    summary: dict


def publish_earnings(reading: StoreReading, record: PublicationRecord
                     ) -> tuple[EarningsPublication, list[LedgerEntry], list[LedgerEntry],
                                list[dict], list]:
    """The earnings product from the store: its publication, its measured and its derived
    ledger entries, the checks of its tables and its CIP recasts."""
    measured, _, read_entries, recasts = EARNINGS.read(reading)
    tables, derived_entries = derive_earnings(measured, reading.cfg)
    with PrivacyStore.open(reading.store_path) as privacy_store:
        ipeds = ipeds_awards_from_record(privacy_store, record)
    states = institution_states(tables)
    pseoh, cells = build_histogram_table(tables, reading.cfg, record.dollars)
    measured_tables = [table for table in tables if table.measured]
    del tables   # the derived levels are in pseoh_all and the per-cell summary now
    pseoe, checks = build_publication_tables(pseoh, cells, reading.cfg, record.dollars, ipeds,
                                             states)
    awards = None if ipeds is None else ipeds.awards
    return (EarningsPublication(measured_tables, pseoe, pseoh, kept_cell_summary(cells), states,
                                awards), read_entries,
            derived_entries, checks, recasts)


def publish_flows(reading: StoreReading, reference: ReferenceInputs
                  ) -> tuple[FlowsRelease, list[LedgerEntry], list[LedgerEntry], list]:
    """The flows product from the store, corrected and suppressed: its release, its measured
    and its derived ledger entries (derivation, then correction) and its CIP recasts. A
    national release's flows tables are large: one copy is held at a time."""
    cfg = reading.cfg
    _, measured, read_entries, recasts = FLOWS.read(reading)
    tables, derived_entries = derive_all_flows(measured, cfg)
    del measured
    corrected, correction, correction_entries = correct_flows(
        tables, reference, cfg.flows.nonemployed_weight)
    del tables
    return (build_flows_tables(corrected, correction, reference,
                               cfg.flows.division_unobserved_share_max),
            read_entries, derived_entries + correction_entries, recasts)


def post_processing(store_path: Path, plan: ReleasePlan, cfg: ReleaseConfig,
                    reference: ReferenceInputs, recast: RecastPlan | None,
                    identity: ReleaseIdentity, record: PublicationRecord,
                    staging: Path, review: ReviewRequest | None = None) -> PostProcessed:
    """Every public and internal file of a release from its stored measurements and public
    inputs only: no microdata, no new noise. `recast` None publishes the CIP codes as
    measured (releases of earlier versions), otherwise CIP-2020; `review`: the release
    is held for review. The earnings files are written first (their workbook is made in a
    second process, stopped if the release fails), then the expected accuracy of the
    published percentiles is simulated in a second thread while the flows are made (numpy
    draws without the GIL)."""
    with second_thread() as beside, second_process() as apart:
        return _post_processing(store_path, plan, cfg, reference, recast, identity, record,
                                staging, review, beside, apart)


def _post_processing(store_path: Path, plan: ReleasePlan, cfg: ReleaseConfig,
                     reference: ReferenceInputs, recast: RecastPlan | None,
                     identity: ReleaseIdentity, record: PublicationRecord, staging: Path,
                     review: ReviewRequest | None, beside, apart) -> PostProcessed:
    reading = StoreReading(store_path, plan.plan, cfg, None if recast is None else recast.contexts)
    earnings, earnings_read, earnings_derived, checks, earnings_recasts = \
        publish_earnings(reading, record)
    earnings_files = write_earnings_files(staging, cfg, earnings, identity.release_id, apart)
    earnings_accuracy = beside(release_accuracy, cfg,   # while the flows are made
                               earnings.measured_tables)
    published = earnings.published()
    del earnings   # written: its histograms and pseoh_all are not kept (EarningsPublication)
    flows, flows_read, flows_derived, flows_recasts = publish_flows(reading, reference)
    cell_statistics = (cell_statistics_from_record(store_path, record.cell_statistics)
                       or CELL_STATISTICS.read(reading))
    sides = side_tables(cell_statistics, EMPLOYER_TABLE.read(reading))
    ledger = PrivacyLedger.of(cfg.privacy.epsilon_cap,
                              earnings_read + flows_read + earnings_derived + flows_derived
                              + [entry for side in sides for entry in side.entries])
    flows_accuracy = release_flows_accuracy(cfg, flows.tables, reference,
                                            bytes.fromhex(identity.seed_sha256))
    lifetime = lifetime_figures(store_path, plan, record)
    lifetime = replace(lifetime, release_summary={
        **lifetime.release_summary, "guarantee": guarantee_summary(ledger),
        # release_summary.json says what the store does not hold
        **({"cell_statistics": cell_statistics_summary(cell_statistics)}
           if cell_statistics is not None else {})})
    flows_files = write_flows_files(staging, cfg, flows, published)
    flows.release_tables()   # written: the rest of the release reads its counts and checks
    manifest = write_release(
        staging, ReleaseContent(published, earnings_files, flows, flows_files, flows_accuracy,
                                sides, earnings_accuracy),
        ReleaseFacts(identity, cfg, ledger, lifetime, record.input_checks + checks,
                     record.input_fingerprints,
                     recast_notes(recast, earnings_recasts + flows_recasts),
                     None if record.dollars is None else record.dollars.as_dict(), review))
    return PostProcessed(ledger, published.cells, flows, manifest, lifetime.release_summary)


@release_flow("quarterly_release")
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


def check_store_against_runs(store_path: Path, audit: AuditRun, release_id: str,
                             supersede: bool, hold_for_review: bool
                             ) -> tuple[str, ClearedRelease | None]:
    """The store agrees with what earlier releases recorded in MLflow (runs abandoned by a
    crash are closed) and holds no release of this id awaiting review; returns the store
    id and, for a held release, the last cleared release (its DRB report compares)."""
    with PrivacyStore.open(store_path) as privacy_store:
        store_id = privacy_store.store_id
        earlier_runs = audit.runs_of_store(store_path, store_id)
        for line in close_abandoned_runs(audit.client, earlier_runs, audit.run_id, store_path):
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
    return store_id, cleared_before


def measure(store_path: Path, plan: ReleasePlan, inputs: ReleaseInputs, cfg: ReleaseConfig,
            audit: AuditRun, identity: ReleaseIdentity) -> PublicationRecord:
    """The plan's pending measurements drawn and kept in the store, then the publication
    record: after this the microdata are no longer needed."""
    audit.log_params(seed_parameters(plan.attempt.seed, plan))
    keep_measurements(store_path, measure_pending(plan.pending, inputs.counts, cfg))
    with PrivacyStore.open(store_path) as privacy_store:
        store_chain = {"read": plan.chain_read.as_dict(),
                       "written": privacy_store.head().as_dict()}
    audit.log_params({HEAD_PARAMS[k]: json.dumps(v, sort_keys=True)
                      for k, v in store_chain.items()})
    return keep_publication_record(
        store_path, plan.record_fields(identity, cfg, inputs, store_chain), inputs)


def _measure_and_publish(data_dir: Path, out_dir: Path, given_seed: ReleaseSeed | None,
                         release_id: str, cfg: ReleaseConfig, tracking_uri: str | None,
                         reference_dir: Path | None, store_path: Path, supersede: bool,
                         remeasure: str | None, engine: Engine,
                         hold_for_review: bool = False) -> ReleaseResult:
    """The release proper, with the store and the destination locked and the store
    verified: inputs -> plan -> measure -> post-process -> hold or publish."""
    version = code_version()
    audit = AuditRun(tracking_uri or default_tracking_uri(), release_id)
    reference_dir = Path(reference_dir or default_reference_dir())
    staging = None
    try:
        store_id, cleared_before = check_store_against_runs(store_path, audit, release_id,
                                                            supersede, hold_for_review)
        audit.log_params(release_parameters(cfg, release_id, data_dir, reference_dir, out_dir,
                                            store_path, store_id, version, supersede, remeasure)
                         | {"engine": engine.describe()})
        published = published_release(out_dir, release_id)  # refuses a folder in the way
        if published is not None and (supersede or remeasure):
            raise DestinationExistsError(f"{out_dir} holds release {release_id}; a new plan "
                                         "is published to a new folder")
        inputs = read_release_inputs(Path(data_dir), reference_dir, cfg, engine)
        config_sha256 = fingerprint(cfg.model_dump(mode="json"))
        plan = record_release_plan(store_path, release_id, given_seed,
                                   fingerprint(inputs.fingerprints), config_sha256, cfg,
                                   planning_frames(inputs.counts), supersede, remeasure)
        if published is not None:  # a rerun that finds its release complete: nothing to do
            if plan.new_spending:
                raise DestinationExistsError(f"{out_dir} already holds release {release_id}")
            audit.set_tags(rerun_tags(release_id, out_dir, published["mlflow_run_id"]))
            audit.finish()
            summary = json.loads((out_dir / "internal" / "release_summary.json").read_text())
            return ReleaseResult(out_dir, release_id, audit.run_id, audit.tracking_uri,
                                 summary, True)
        identity = ReleaseIdentity(release_id, plan.attempt.seed.sha256, version, audit.run_id,
                                   audit.tracking_uri, config_sha256, str(store_path))
        record = measure(store_path, plan, inputs, cfg, audit, identity)
        reference, recast = inputs.reference, recast_plan(inputs.recast, cfg)
        del inputs   # post-processing reads the store: the dense arrays can go
        staging = new_staging(out_dir)
        review = ReviewRequest(review_folder(store_path, release_id, plan.attempt.attempt),
                               cleared_before) if hold_for_review else None
        processed = post_processing(store_path, plan, cfg, reference, recast, identity,
                                    record, staging, review)
        record_release(audit, processed.ledger, processed.cells, processed.flows, staging,
                       record.input_fingerprints, processed.manifest, plan.summary())
        if processed.summary.get("cell_statistics"):
            audit.log_params(cell_statistics_parameters(processed.summary["cell_statistics"]))
        if review is not None:
            with PrivacyStore.open(store_path) as privacy_store:
                hold = hold_release(privacy_store, staging, plan.attempt,
                                    privacy_store.put_json(record.stored()), out_dir,
                                    audit.run_id, audit.tracking_uri)
            audit.set_tags(hold_tags(hold))
            audit.finish()
            return ReleaseResult(Path(hold.folder), release_id, audit.run_id,
                                 audit.tracking_uri, processed.summary, held=hold,
                                 new_spending=plan.new_spending)
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
        audit.fail(exc)
        raise
    return ReleaseResult(out_dir, release_id, audit.run_id, audit.tracking_uri,
                         processed.summary, new_spending=plan.new_spending)


@release_flow("republish")
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
    recast = recast_plan(recast_inputs, cfg)
    del recast_inputs      # the IPEDS completions: the plan keeps what post-processing takes
    identity = record.identity
    staging = new_staging(out_dir, discard_stale=False)   # deletes nothing it did not create
    try:
        summary = post_processing(store_path, plan, cfg, reference, recast, identity, record,
                                  staging, review).summary
        if clearance is not None:    # published after review: with its clearance
            stamp_clearance(staging, clearance, staging)
        publish(staging, out_dir)
    except BaseException:
        discard(staging)
        raise
    return ReleaseResult(out_dir, release_id, identity.mlflow_run_id, identity.tracking_uri,
                         summary)
