"""The quarterly release (earnings and employment flows) as a Prefect flow."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from prefect import flow
from pydantic import SecretStr

from pseo_das.config import load_config
from pseo_das.version import code_version
from tasks.assemble import ReleaseIdentity, write_release
from tasks.audit import (AuditRun, default_tracking_uri, record_release, release_parameters,
                         seed_parameters)
from tasks.cells import build_cell_frames
from tasks.division_flows import build_flows_tables
from tasks.flows_correction import correct_flows
from tasks.ingest import validate_inputs
from tasks.mechanism import PrivacyLedger, seed_sha256
from tasks.noisy_flows import derive_all_flows, measure_flows
from tasks.noisy_histograms import derive_earnings, measure_earnings
from tasks.privacy_budget import default_budget_store, reserve_budget
from tasks.publication import build_publication_tables
from tasks.reference_inputs import default_reference_dir, load_reference
from tasks.release_files import (DestinationExistsError, discard, new_staging, publish,
                                 published_epsilon, published_release)


@dataclass
class ReleaseResult:
    out_dir: Path
    release_id: str
    mlflow_run_id: str
    tracking_uri: str
    total_epsilon: float          # epsilon of this release's tabulations
    new_spending: bool            # False for a rerun of a release already recorded
    already_published: bool = False


def seed_hex(release_seed: SecretStr | None) -> str | None:
    if release_seed is None:
        return None
    text = release_seed.get_secret_value().strip().lower().removeprefix("0x")
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
        raise ValueError("the release seed must be 64 hexadecimal digits (256 bits)")
    return text


def fingerprint(values: dict) -> str:
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()


@flow(name="quarterly_release")
def quarterly_release(data_dir: Path, out_dir: Path, release_seed: SecretStr | None,
                      release_id: str, config_path: Path | None = None,
                      tracking_uri: str | None = None, reference_dir: Path | None = None,
                      budget_store: Path | None = None, supersede: bool = False) -> ReleaseResult:
    """Confidential microdata in `data_dir` -> published PSEO earnings and employment flows
    tables in `out_dir`. `reference_dir` holds the public J2J, QCEW and state coverage
    files (default: the packaged demo files).

    The seed is a SecretStr so that Prefect stores it masked; it goes to the audit stores
    only. Without a seed, a release id already in the lifetime budget store reuses its
    own seed (a retry or a resumed crash draws the same noise and spends nothing new), and
    a new release id gets 256 fresh bits.
    """
    cfg = load_config(config_path)
    given_seed = seed_hex(release_seed)
    out_dir = Path(out_dir)
    version = code_version()
    audit = AuditRun(tracking_uri or default_tracking_uri(), release_id)
    budget_store = Path(budget_store or default_budget_store(audit.tracking_uri))
    reference_dir = Path(reference_dir or default_reference_dir())
    staging = None
    try:
        audit.log_params(release_parameters(cfg, release_id, data_dir, reference_dir, out_dir,
                                            budget_store, version))
        published = published_release(out_dir, release_id)  # refuses a folder in the way
        if published is not None and supersede:
            raise DestinationExistsError(f"{out_dir} holds release {release_id}; a supersession "
                                         "is published to a new folder")
        inputs = validate_inputs(Path(data_dir), cfg.cells.first_cohort_year,
                                 cfg.cells.last_earnings_year)
        reference = load_reference(reference_dir)
        fingerprints = {**inputs.fingerprints, **reference.fingerprints}
        levels = sorted(set(cfg.privacy.measured_levels()) | set(cfg.flows.measured_levels()))
        frames = build_cell_frames(inputs.graduates, cfg.cells, levels)
        config_sha256 = fingerprint(cfg.model_dump(mode="json"))
        budget = reserve_budget(budget_store, release_id, given_seed, fingerprint(fingerprints),
                                config_sha256, cfg, frames, supersede)
        seed = bytes.fromhex(budget.attempt.seed_hex)
        audit.log_params(seed_parameters(seed, budget))
        if published is not None:  # a rerun that finds its release complete: nothing to do
            if budget.new_spending:
                raise DestinationExistsError(f"{out_dir} already holds release {release_id}")
            audit.set_tags({"already_published": str(out_dir.resolve())})
            audit.finish()
            return ReleaseResult(out_dir, release_id, audit.run_id, audit.tracking_uri,
                                 published_epsilon(out_dir), False, True)
        ledger = PrivacyLedger(cfg.privacy.epsilon_cap)
        measured = [table for years in cfg.cells.years_after
                    for table in measure_earnings(ledger, seed, inputs, frames, years, cfg)]
        tables = derive_earnings(ledger, measured, cfg)
        pseoe, pseoh, cells, checks = build_publication_tables(tables, cfg)
        measured_flows = [table for years in cfg.cells.years_after
                          for table in measure_flows(ledger, seed, inputs, frames, years, cfg)]
        flows_tables = derive_all_flows(ledger, measured_flows, cfg)
        correction = correct_flows(ledger, seed, flows_tables, reference,
                                   cfg.flows.nonemployed_weight)
        flows = build_flows_tables(flows_tables, correction, reference,
                                   cfg.flows.division_unobserved_share_max,
                                   tuple(cfg.cells.years_after))
        staging = new_staging(out_dir)
        identity = ReleaseIdentity(release_id, seed_sha256(seed), version, audit.run_id,
                                   audit.tracking_uri, config_sha256)
        manifest = write_release(staging, identity, cfg, ledger, tables, pseoe, pseoh, cells,
                                 flows, budget, inputs.checks + checks, fingerprints)
        record_release(audit, ledger, cells, flows, staging, fingerprints, manifest)
        publish(staging, out_dir)
        audit.set_tags({"published_to": str(out_dir.resolve())})
        audit.finish()
    except BaseException as exc:
        discard(staging)
        audit.fail(f"{type(exc).__name__}: {exc}")
        raise
    return ReleaseResult(out_dir, release_id, audit.run_id, audit.tracking_uri,
                         ledger.total_epsilon, budget.new_spending)
