"""Is the privacy store the one that was written? The check that `pseo-das store verify`,
every release and every audit run. Privacy cost: none.

A store passes when:
  - its schema, CHECK constraints and append-only triggers are exactly the ones it was
    created with (a dropped or changed trigger is reported, never recreated);
  - its chain runs 1..n without a gap, each entry holding the SHA-256 of the one before
    and of its own content;
  - every row of every chained table is the content of exactly one chain entry of that
    table, and every entry has its row (a deleted, rewritten or unchained row is named);
  - each measurement's population list has the SHA-256 its chain entry holds;
  - every epsilon and cap is a positive exact number;
  - optionally, every object file's content has the SHA-256 its name says, and every object
    the index and the publication records name is on disk;
  - the store's files are readable by their owner only (wider permissions are reported
    as warnings: `IntegrityReport.exposures`).
A store rewritten with a freshly computed chain passes these; it is caught by the chain
heads recorded outside the store (manifests, MLflow runs), see `check_recorded_heads`.
"""
from __future__ import annotations

import hashlib
import sqlite3
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import pandas as pd

from pseo_das.tasks.privacy.file_modes import exposures
from pseo_das.tasks.privacy.store import (CHAINED, GENESIS, INDEX, SCHEMA, TRIGGERS, ChainHead,
                                          PrivacyStore, StoreError, chain_sha256,
                                          populations_sha256, row_content)

EMPTY_POPULATIONS = hashlib.sha256(b"").hexdigest()   # a measurement whose rows all vanished
EPSILON_COLUMNS = {"measurements": ["epsilon"],
                   "policies": ["lifetime_cap", "max_tabulation_epsilon"]}


class StoreTampered(StoreError):
    """The privacy store fails its integrity check."""


@dataclass
class IntegrityReport:
    path: Path
    head: ChainHead
    entries: int
    problems: list[str] = field(default_factory=list)
    objects_checked: int = 0
    exposures: list[str] = field(default_factory=list)   # files others can read (warnings)

    @property
    def ok(self) -> bool:
        return not self.problems

    def message(self, limit: int = 12) -> str:
        warnings = [f"  WARNING {line}" for line in self.exposures]
        if self.ok:
            checked = f", {self.objects_checked:,} objects" if self.objects_checked else ""
            return "\n".join([f"privacy store {self.path}: intact ({self.entries:,} chain "
                              f"entries{checked}; head {self.head.seq} "
                              f"{self.head.sha256[:16]}...)"] + warnings)
        lines = [f"privacy store {self.path} FAILS its integrity check ({len(self.problems)} "
                 "problem(s)); nothing may be released from it until the agency restores it "
                 "from a trusted copy:"]
        lines += [f"  {p}" for p in self.problems[:limit]]
        if len(self.problems) > limit:
            lines.append(f"  ... and {len(self.problems) - limit} more")
        return "\n".join(lines + warnings)

    def raise_if_failed(self) -> "IntegrityReport":
        if not self.ok:
            raise StoreTampered(self.message())
        return self


def _expected_schema() -> set[tuple[str, str, str]]:
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(SCHEMA + TRIGGERS)
        return _schema(db)
    finally:
        db.close()


def _schema(db: sqlite3.Connection) -> set[tuple[str, str, str]]:
    return {(kind, name, " ".join(sql.split())) for kind, name, sql in db.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL")}


# The objects a stored record names (its JSON -> (SHA-256, extension)): given by the layer
# that reads publication records (tasks/measurements/publication_record.record_objects).
RecordObjects = Callable[[dict], list[tuple[str, str]]]


def verify_store(path: Path, check_objects: bool = False,
                 record_objects: RecordObjects | None = None) -> IntegrityReport:
    """The integrity of the store in `path` (StoreError if there is no store there). With
    `check_objects`, every object file is re-hashed and every object the index (and, with
    `record_objects`, every publication record) names must be there."""
    with PrivacyStore.open(path) as store:
        db = store.connection()
        db.execute("BEGIN")          # one consistent snapshot for the whole check
        try:
            report = IntegrityReport(store.path, ChainHead(0, GENESIS), 0)
            _check_schema(db, report)
            contents = _check_chain(db, report)
            _check_rows(db, contents, report)
            _check_populations(db, report)
            _check_epsilons(db, report)
            if check_objects:
                _check_objects(store, db, report, record_objects)
            report.exposures = _exposures(store.path)
        finally:
            db.execute("ROLLBACK")
    return report


def _check_schema(db: sqlite3.Connection, report: IntegrityReport) -> None:
    expected, actual = _expected_schema(), _schema(db)
    for kind, name, _ in sorted(expected - actual):
        changed = any(n == name for _, n, _ in actual)
        report.problems.append(f"{kind} {name} was {'changed' if changed else 'dropped'}"
                               + (" (the store is no longer append-only)" if kind == "trigger"
                                  else ""))
    for kind, name, _ in sorted(actual - expected):
        if not any(n == name for _, n, _ in expected):
            report.problems.append(f"{kind} {name} was added to the store")


def _check_chain(db: sqlite3.Connection, report: IntegrityReport) -> dict[str, Counter]:
    """Walk the chain; returns the row contents it holds, per table."""
    contents: dict[str, Counter] = {table: Counter() for table in CHAINED}
    previous = ChainHead(0, GENESIS)
    for seq, entry, content, prev_sha, sha in db.execute(
            "SELECT seq, entry, content, prev_sha256, sha256 FROM chain ORDER BY seq"):
        if seq != previous.seq + 1:
            report.problems.append(f"chain: entries {previous.seq + 1}..{seq - 1} are missing "
                                   "(deleted)")
        if prev_sha != previous.sha256:
            report.problems.append(f"chain entry {seq}: does not hold the SHA-256 of the entry "
                                   "before it (entries were removed or rewritten)")
        if chain_sha256(seq, prev_sha, entry, content) != sha:
            report.problems.append(f"chain entry {seq} ({entry}): its SHA-256 does not match its "
                                   "content (rewritten)")
        if entry not in contents:
            report.problems.append(f"chain entry {seq}: unknown table {entry!r}")
        else:
            contents[entry][content] += 1
        previous = ChainHead(seq, sha)
        report.entries += 1
    report.head = previous
    return contents


def _check_rows(db: sqlite3.Connection, contents: dict[str, Counter],
                report: IntegrityReport) -> None:
    for table in CHAINED:
        cursor = db.execute(f"SELECT * FROM {table}")
        columns = [d[0] for d in cursor.description]
        rows = Counter(row_content(columns, row) for row in cursor)
        for content in sorted((rows - contents[table]).elements()):
            report.problems.append(f"{table}: row not in the chain (inserted or rewritten "
                                   f"outside pseo-das): {_short(content)}")
        for content in sorted((contents[table] - rows).elements()):
            report.problems.append(f"{table}: row of the chain is missing (deleted or "
                                   f"rewritten): {_short(content)}")


def _check_populations(db: sqlite3.Connection, report: IntegrityReport) -> None:
    recorded = dict(db.execute("SELECT measurement_id, populations_sha256 FROM measurements"))
    rows = pd.read_sql_query("SELECT measurement_id, institution, degree_level, grad_cohort "
                             "FROM measurement_populations", db)
    found = {measurement_id: populations_sha256(members)
             for measurement_id, members in rows.groupby("measurement_id", sort=True)}
    for measurement_id in sorted(set(recorded) | set(found)):
        if measurement_id not in recorded:
            report.problems.append(f"measurement_populations: rows for {measurement_id}, "
                                   "which is not a recorded measurement")
        elif found.get(measurement_id, EMPTY_POPULATIONS) != recorded[measurement_id]:
            report.problems.append(f"measurement_populations of {measurement_id}: not the "
                                   "population list its chain entry covers (rows added, "
                                   "deleted or changed)")


def _check_epsilons(db: sqlite3.Connection, report: IntegrityReport) -> None:
    for table, columns in EPSILON_COLUMNS.items():
        for column in columns:
            for (value,) in db.execute(f"SELECT {column} FROM {table}"):
                try:
                    ok = Fraction(str(value)) > 0
                except (ValueError, ZeroDivisionError):
                    ok = False
                if not ok:
                    report.problems.append(f"{table}.{column} = {value!r}: not a positive exact "
                                           "epsilon")
    for key, value in db.execute("SELECT key, value FROM store_info WHERE key GLOB "
                                 "'policy.*.lifetime_delta_cap'"):
        try:
            ok = 0 < Fraction(str(value)) < 1
        except (ValueError, ZeroDivisionError):
            ok = False
        if not ok:
            report.problems.append(f"store_info {key} = {value!r}: not an exact delta in (0, 1)")


def _check_objects(store: PrivacyStore, db: sqlite3.Connection, report: IntegrityReport,
                   record_objects: RecordObjects | None) -> None:
    """Every file of objects/ re-hashed against its name; every object the index names (and
    the records name) present."""
    intact = set()
    for file in sorted((store.path / "objects").iterdir()):
        if file.name.startswith("."):         # a write in progress (or left by a kill)
            continue
        sha = file.name.partition(".")[0]
        if hashlib.sha256(file.read_bytes()).hexdigest() == sha:
            intact.add(file.name)
        else:
            report.problems.append(f"{file}: content does not match its SHA-256 (changed on disk)")
        report.objects_checked += 1
    named = [(sha, "parquet") for (sha,) in db.execute(
        "SELECT object_sha256 FROM measurement_objects")]
    named += [(sha, "parquet") for (sha,) in db.execute("SELECT plan_sha256 FROM releases")]
    records = [sha for (sha,) in db.execute("SELECT record_sha256 FROM publications")]
    named += [(sha, "json") for sha in records]
    for sha in records:
        if record_objects is not None and f"{sha}.json" in intact:
            try:
                named += record_objects(store.get_json(sha))
            except StoreError as exc:
                report.problems.append(f"publication record {sha[:16]}...: {exc}")
    for sha, ext in sorted(set(named)):
        if not (store.path / "objects" / f"{sha}.{ext}").exists():   # a changed one: above
            report.problems.append(f"{store.path / 'objects' / f'{sha}.{ext}'}: object missing "
                                   "from the privacy store")


def _exposures(path: Path) -> list[str]:
    """The store's files and folders that users other than its owner can read (its objects
    summarised in one line)."""
    found = exposures([path, path / "objects", path / INDEX, path / "verification.sqlite"])
    objects = exposures(sorted((path / "objects").glob("*.*")))
    if objects:
        found.append(f"{len(objects):,} object file(s) in {path / 'objects'} readable by other "
                     f"users, e.g. {objects[0]}")
    return found


def _short(content: str, width: int = 160) -> str:
    return content if len(content) <= width else content[:width] + "..."


def check_recorded_heads(store: PrivacyStore, heads: dict[str, dict],
                         recorded_by: str) -> list[str]:
    """Chain heads a release recorded outside the store ({'read': {seq, sha256}, ...})
    against the store's chain: each must be an entry of it. A store rewound, replaced or
    rewritten after those heads disagrees."""
    problems = []
    for name, head in heads.items():
        seq, sha = int(head["seq"]), str(head["sha256"])
        if seq == 0 and sha == GENESIS:
            continue
        entry = store.chain_entry(seq)
        if entry is None:
            problems.append(f"{recorded_by} recorded chain head {name} {seq} ({sha[:16]}...), "
                            f"but the store's chain ends at {store.head().seq}: the store was "
                            "rewound or replaced")
        elif entry.sha256 != sha:
            problems.append(f"{recorded_by} recorded chain head {name} {seq} ({sha[:16]}...), "
                            f"the store has {entry.sha256[:16]}... there: the store was rewritten "
                            "or replaced")
    return problems
