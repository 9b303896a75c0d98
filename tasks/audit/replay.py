"""Replay of a release: everything needed to run the release again exactly as logged
(seed, configuration, inputs, release id, and a copy of the privacy store as it was before
the release's plan), and the byte-for-byte comparison of what the replay published with
what the release published. Privacy cost: none here; the replay itself draws the release's
own noise again from its seed (nothing new is learnt, and it goes to a temporary folder, a
temporary audit store and a temporary store copy that are deleted afterwards).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from itertools import zip_longest
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pseo_das.schemas.distribution import is_gzipped, open_bytes
from pseo_das.schemas.written_hashes import stream_sha256, read_sha256
from pseo_das.errors import PseoDasError
from pseo_das.config import load_config, meaning_of_missing
from pseo_das.reports.render import toml_value
from pseo_das.tasks.audit.audit_target import AuditedRelease
from pseo_das.tasks.audit.fingerprint_checks import InputLocations
from pseo_das.tasks.privacy.release_seed import ReleaseSeed
from pseo_das.tasks.privacy.seed_custody import SeedKeyError
from pseo_das.tasks.privacy.store import PrivacyStore, store_exists
from pseo_das.tasks.employment_flows.division_flows import FLOWS_STATE_CSV, FLOWS_STATE_FILE
from pseo_das.tasks.audit.verification import (FAILED, PASSED, CheckResult, configuration_differences,
                                flatten, logged_configuration)

# Internal files that depend only on the stored measurements, inputs and configuration (the
# DRB report and the manifest name the run); those the release has are compared (its
# flows_state is flows_state.csv if it was made before flows_state.parquet).
REPLAYED_INTERNAL = ("internal/config.json", f"internal/{FLOWS_STATE_FILE}",
                     f"internal/{FLOWS_STATE_CSV}", "internal/ledger.csv")


class ReplayNeedsCustodian(PseoDasError, ValueError):
    """The replay needs the seed key, which the auditor does not hold."""

    quotes_records = False


class ReplayNotPossible(PseoDasError, ValueError):
    """The run did not log what a replay needs, or it is inconsistent."""

    quotes_records = False


@dataclass(frozen=True)
class ReplayPlan:
    """The arguments of `quarterly_release` that reproduce the release."""
    seed: ReleaseSeed
    release_id: str
    data_dir: Path
    reference_dir: Path
    config_path: Path
    out_dir: Path
    tracking_uri: str
    store: Path                   # the privacy store as it was before the release's plan
    supersede: bool
    remeasure: str | None
    notes: tuple[str, ...] = field(default=())


def configuration_toml(config: dict[str, dict[str, object]]) -> str:
    """A configuration file (`--config`) holding every value of `config`, and the value a
    key it lacks meant when the default configuration says otherwise (`meaning_of_missing`)."""
    lines = ["# Configuration rebuilt from an MLflow run's parameters by `pseo-das audit`."]
    for section, values in meaning_of_missing(config).items():
        lines += ["", f"[{section}]"] + [f"{key} = {toml_value(v)}" for key, v in values.items()]
    return "\n".join(lines) + "\n"


def plan_replay(release: AuditedRelease, locations: InputLocations, workdir: Path) -> ReplayPlan:
    """Seed, configuration file (checked to load back as the logged values), inputs and
    release id of the run; a temporary release folder and audit store under `workdir`."""
    config = logged_configuration(release.params)
    if not config:
        raise ReplayNotPossible(f"the run {release.run_id} logged no configuration parameters")
    config_path = workdir / "config.toml"
    config_path.write_text(configuration_toml(config))
    loaded = load_config(config_path).flat()  # ConfigError if this code cannot load it
    logged = flatten(config)
    problems = configuration_differences(logged, {k: v for k, v in loaded.items() if k in logged},
                                         "the configuration file written for the replay")
    if problems:
        raise ReplayNotPossible("the logged configuration does not round-trip through TOML: "
                                + "; ".join(problems))
    notes = [f"{k} was not logged (a value added since); the replay uses the current default "
             f"{json.dumps(loaded[k])}" for k in sorted(set(loaded) - set(logged))]
    logged_store = Path(release.params.get("store", ""))
    attempt = release.params.get("store_attempt", "")
    if not store_exists(logged_store) or not attempt.isdigit():
        raise ReplayNotPossible(f"the release's privacy store {logged_store} (or its attempt "
                                "number) is not available here; a replay measures the release "
                                "again in a copy of the store as it was before the release")
    with PrivacyStore.open(logged_store) as store:
        try:            # the store holds it, sealed; the run log holds its SHA-256 only
            seed = store.attempt(int(attempt)).seed
        except SeedKeyError as exc:
            raise ReplayNeedsCustodian(
                "the release seed is sealed in the privacy store: a replay needs the "
                "custodian's seed key (`pseo-das audit ... --seed-key FILE`); every other "
                f"check ran ({exc})") from None
        earlier = store.copy_before(int(attempt), workdir / "store")
    if seed.sha256 != release.params.get("release_seed_sha256"):
        raise ReplayNotPossible(f"the seed of attempt {attempt} in the privacy store does not "
                                "hash to the run's release_seed_sha256: not this release's store")
    return ReplayPlan(seed, release.release_id, locations.data_dir, locations.reference_dir,
                      config_path, workdir / "release",
                      f"sqlite:///{(workdir / 'audit' / 'mlflow.db').resolve()}", earlier,
                      release.params.get("supersede") == "true",
                      release.params.get("remeasure") or None, tuple(notes))


def first_difference(a: Path, b: Path) -> str | None:
    """Where two files first differ: the first line that is not the same (of the CSV text
    of a gzipped table), or for Parquet `parquet_difference` (None: the same table)."""
    if a.suffix == ".parquet":
        return parquet_difference(a, b)
    with open_bytes(a) as fa, open_bytes(b) as fb:
        for number, (la, lb) in enumerate(zip_longest(fa, fb), start=1):
            if la != lb:
                if la is None or lb is None:
                    return f"the replay has {'more' if la is None else 'fewer'} lines (from line {number})"
                return f"first difference at line {number}"
    return "same lines, different bytes"


COMPARED_ROWS = 1 << 18     # rows of each Parquet file held at a time


def parquet_difference(a: Path, b: Path, rows: int = COMPARED_ROWS) -> str | None:
    """Where the tables of two Parquet files (`a` published, `b` replayed) first differ:
    their columns as read, their rows, or the first row that is not the same; None if they
    hold the same table (however each is encoded: Parquet's bytes depend on how the
    writer was given the rows). Read `rows` rows of each at a time, never whole."""
    fa, fb = pq.ParquetFile(a), pq.ParquetFile(b)
    if fa.schema_arrow != fb.schema_arrow:
        return "different columns"
    empty = fa.schema_arrow.empty_table()
    start = 0
    for ta, tb in zip_longest(row_blocks(fa, rows), row_blocks(fb, rows), fillvalue=empty):
        common = min(ta.num_rows, tb.num_rows)
        if not ta.slice(0, common).equals(tb.slice(0, common)):
            return f"first difference at row {start + first_different_row(ta, tb) + 1}"
        if ta.num_rows != tb.num_rows:
            return (f"the replay has {'more' if ta.num_rows < tb.num_rows else 'fewer'} rows "
                    f"(from row {start + common + 1})")
        start += common
    return None


def row_blocks(file: pq.ParquetFile, rows: int) -> Iterator[pa.Table]:
    """The rows of a Parquet file in tables of `rows` rows (the last one: the rest), however
    its row groups and batches are cut."""
    held = file.schema_arrow.empty_table()
    for batch in file.iter_batches(rows):
        held = pa.concat_tables([held, pa.Table.from_batches([batch])])
        while held.num_rows >= rows:
            yield held.slice(0, rows)
            held = held.slice(rows)
    if held.num_rows:
        yield held


def first_different_row(ta: pa.Table, tb: pa.Table) -> int:
    """The first row (from 0) where two tables differ among the rows both have (some do)."""
    low, high = 0, min(ta.num_rows, tb.num_rows)    # it is one of the rows low to high - 1
    while high - low > 1:
        middle = (low + high) // 2
        if ta.slice(low, middle - low).equals(tb.slice(low, middle - low)):
            low = middle
        else:
            high = middle
    return low


def same_table_compressed_otherwise(a: Path, b: Path) -> bool:
    """Two gzipped files with other bytes that hold the same bytes once decompressed: a gzip
    stream depends on the compressor's build (ISA-L, zlib), not only on what it holds."""
    if not (is_gzipped(a) and is_gzipped(b)):
        return False
    with open_bytes(a) as fa, open_bytes(b) as fb:
        return stream_sha256(fa) == stream_sha256(fb)


def compare_replay(release: AuditedRelease, replay_dir: Path, replay_params: dict[str, str],
                   replayed_inputs: dict[str, str], notes: list[str]) -> CheckResult:
    """Every public file (and the internal files that depend only on seed, inputs and
    configuration) of the replay against the release, byte for byte; a gzipped file that
    holds the same bytes once decompressed, or a Parquet file that holds the same table
    (`parquet_difference`), passes in other bytes, with a note naming it."""
    published = release.release_dir
    public = sorted({str(p.relative_to(root)) for root in (published, replay_dir)
                     for p in (root / "public").rglob("*") if p.is_file()})
    internal = [n for n in REPLAYED_INTERNAL if (published / n).is_file()]
    identical, recompressed, reencoded, findings = [], [], [], []
    for name in public + internal:
        mine, theirs = published / name, replay_dir / name
        if not theirs.is_file():
            findings.append(f"{name}: published, but the replay did not write it")
        elif not mine.is_file():
            findings.append(f"{name}: written by the replay, not in the release")
        elif read_sha256(mine) == read_sha256(theirs):
            identical.append(name)
        elif same_table_compressed_otherwise(mine, theirs):
            recompressed.append(name)
        elif (difference := first_difference(mine, theirs)) is None:
            reencoded.append(name)
        else:
            findings.append(f"{name}: differs from the replay ({difference}; "
                            f"{mine.stat().st_size:,} bytes published, {theirs.stat().st_size:,} "
                            "replayed)")
    inputs_logged, inputs_replayed = release.logged_inputs(), replayed_inputs
    if inputs_replayed != inputs_logged:
        findings.append("the replay read inputs with other fingerprints than the run logged: "
                        + ", ".join(sorted({name for name, _ in
                                            set(inputs_logged.items()) ^ set(inputs_replayed.items())})))
    logged_version, version = release.params.get("code_version"), replay_params.get("code_version")
    notes = list(notes)
    if logged_version != version:
        commit = re.search(r"\+git\.([0-9a-f]+)", logged_version or "")
        notes.append(f"code version: the release ran {logged_version}, the replay {version}"
                     + ("; a change of code can explain the differences (the release notes also "
                        "name the code version)" if findings else "")
                     + (f"; to replay with the release's code, audit from git commit "
                        f"{commit.group(1)}" if commit else ""))
    elif version and version.endswith(".dirty"):
        notes.append(f"code version {version}: uncommitted changes, so the code is not fully "
                     "identified by its version")
    if recompressed:
        notes.append(f"{len(recompressed)} gzipped file(s) hold the same table as the replay's "
                     "once decompressed, in other gzip bytes: the replay ran with another build of "
                     "the compressor (the published bytes are checked against the run's "
                     f"fingerprints by the outputs check): {', '.join(recompressed)}")
    if reencoded:
        notes.append(f"{len(reencoded)} Parquet file(s) hold the same table as the replay's "
                     "(the same columns as read, the same rows) in other Parquet bytes: they "
                     "depend on how the writer was given the rows (flows_state.parquet of a "
                     "release made before its code columns were written from their codes): "
                     f"{', '.join(reencoded)}")
    n_public, n_same_content, n_same_table = (sum(1 for n in names if n.startswith("public/"))
                                              for names in (identical, recompressed, reencoded))
    figures = {"public files compared": len(public), "public files identical": n_public,
               "public files identical once decompressed": n_same_content,
               "public files holding the same table in other Parquet bytes": n_same_table,
               "internal files compared": len(internal),
               "internal files identical": len(identical) - n_public,
               "code version (release)": logged_version, "code version (replay)": version}
    if findings:
        return CheckResult("replay", FAILED,
                           f"{len(identical)} of {len(public) + len(internal)} files reproduced byte "
                           f"for byte; differ: {', '.join(f.split(':')[0] for f in findings)}",
                           figures, findings, notes)
    otherwise = (f" and {n_same_content} the same once decompressed (other gzip bytes)"
                 if recompressed else "") + (f" and {n_same_table} the same table in other "
                                             "Parquet bytes" if n_same_table else "")
    reproduced = identical + recompressed + reencoded
    return CheckResult("replay", PASSED,
                       f"{n_public} of {len(public)} public files reproduced byte for byte"
                       f"{otherwise} from the logged seed, configuration and inputs (and "
                       f"{len(reproduced) - n_public - n_same_content - n_same_table} of "
                       f"{len(internal)} internal: {', '.join(Path(n).name for n in internal)})",
                       figures, [], notes)
