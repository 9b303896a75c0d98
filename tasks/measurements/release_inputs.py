"""A release's inputs, read once: the public reference files (flows reference, CIP recast,
IPEDS completions, CPI-U), the demo-input policy, then the confidential microdata counted
in one pass; and the fingerprints the plan and the audit name them by. Privacy cost: none
(nothing is drawn; the counts stay in memory until measured).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from pseo_das.config import ReleaseConfig
from pseo_das.tasks import file_task
from pseo_das.tasks.cip_recast.recast import check_recastable
from pseo_das.tasks.cip_recast.recast_inputs import RecastInputs, load_recast
from pseo_das.tasks.inputs.constant_dollars import DollarYears, dollar_years
from pseo_das.tasks.inputs.cpi import ConsumerPrices, find_cpi, read_cpi
from pseo_das.tasks.inputs.frame_check import check_frame_against_ipeds
from pseo_das.tasks.inputs.ingest import InputValidationError
from pseo_das.tasks.inputs.ipeds_counts import IpedsAwards, load_ipeds_counts_inputs
from pseo_das.tasks.inputs.reference_cache import cached
from pseo_das.tasks.inputs.reference_inputs import (ReferenceInputs, demo_flows_inputs,
                                                    load_reference)
from pseo_das.tasks.inputs.true_counts import Engine, TrueCounts, count_inputs


def fingerprint(values: dict) -> str:
    """The SHA-256 of a JSON-able dict, keys sorted: the configuration's and the inputs'
    fingerprints in the plan and the audit run."""
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()


def refuse_demo_in_production(cfg: ReleaseConfig, demo: list[str]) -> None:
    """A production release (`release.production`) never uses the packaged demo files."""
    if cfg.release.production and demo:
        raise InputValidationError(
            f"release.production = true, but the {', '.join(demo)} file(s) are the packaged "
            "SYNTHETIC demo files: no microdata was read and nothing was spent. Give --reference DIR with the real "
            "files (docs/operate/inputs.md).")


@dataclass(frozen=True)
class ReleaseInputs:
    """Everything a release reads: the true counts of the one counting pass, the public
    reference files, the dollars, which inputs are the packaged demo files, and every
    input's SHA-256 by name."""
    counts: TrueCounts
    reference: ReferenceInputs
    recast: RecastInputs
    ipeds: IpedsAwards
    dollars: DollarYears
    demo: list[str]
    fingerprints: dict[str, str]


@dataclass(frozen=True)
class PublicInputs:
    """The public reference files of a release, validated."""
    recast: RecastInputs
    ipeds: IpedsAwards
    cpi: ConsumerPrices
    reference: ReferenceInputs
    demo: list[str]


@file_task("load reference inputs")
def load_public_inputs(reference_dir: Path, cfg: ReleaseConfig,
                       data_dir: Path | None = None) -> PublicInputs:
    """Every public file of a release, each read and validated again only when it changed
    (tasks/inputs/reference_cache.py); a production release on the packaged demo files is
    refused before the others are read. The IPEDS files may be the data folder's
    (tasks/inputs/ipeds_location.py)."""
    recast = load_recast(reference_dir, cfg.cip.switch_year, data_dir)
    ipeds = load_ipeds_counts_inputs(reference_dir, cfg.cells, cfg.cip.switch_year, data_dir)
    demo = demo_flows_inputs(reference_dir) + list(recast.packaged)
    demo += ["IPEDS"] if ipeds.packaged and "IPEDS" not in demo else []
    refuse_demo_in_production(cfg, demo)
    cpi_path = find_cpi(reference_dir)
    cpi = cached("cpi", [cpi_path], {"path": str(cpi_path.resolve())},
                 lambda: read_cpi(cpi_path))
    return PublicInputs(recast, ipeds, cpi, load_reference(reference_dir), demo)


def read_release_inputs(data_dir: Path, reference_dir: Path, cfg: ReleaseConfig,
                        engine: Engine) -> ReleaseInputs:
    """The public files first (a production release on demo files, or one with a bad
    public file, is refused before any microdata is read), then the microdata, checked
    against the CIP recast's inputs; its frame checked against the IPEDS completions
    (tasks/inputs/frame_check.py)."""
    public = load_public_inputs(reference_dir, cfg, data_dir)
    recast, ipeds, cpi, reference = public.recast, public.ipeds, public.cpi, public.reference
    counts = count_inputs(data_dir, cfg, recast.vintages(cfg.cip.switch_year), cpi, engine)
    counts = check_frame_against_ipeds(counts, ipeds, cfg)   # before any noise
    dollars = dollar_years(cpi, cfg.earnings.dollar_year, cfg.earnings.publication_dollar_year)
    fingerprints = {**counts.fingerprints, **reference.fingerprints, **recast.fingerprints,
                    **ipeds.fingerprints, f"bls/{cpi.path.name}": cpi.sha256}
    check_recastable(counts.frames, recast)
    return ReleaseInputs(counts, reference, recast, ipeds, dollars, public.demo, fingerprints)
