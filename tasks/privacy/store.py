"""The privacy store of an agency: the lifetime budget and every noisy measurement ever
taken, in one folder. Privacy cost: none (bookkeeping).

    DIR/store.sqlite            the index: releases, measurements and whom they cover,
                                objects, publications. Append-only (triggers refuse
                                UPDATE and DELETE); each release's plan is recorded in one
                                transaction before any noise is drawn.
    DIR/objects/<sha256>.<ext>  content-addressed files: the noisy arrays of each
                                measurement (Parquet), release plans, public reference
                                tables and publication records.

A *measurement* answers one question (a tabulation: product, CIP level and vintage, years
after, mechanism, epsilon, bins...) for a set of *populations* (institution x degree level
x graduation cohort). It spends its epsilon once on each of its populations; every later
release that asks the same question of the same population reuses it at zero epsilon.

The store holds release seeds: protect it like the MLflow store.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pseo_das.tasks.inputs.cells import CELL_COLUMNS, POPULATION_KEYS

STORE_ENV = "PSEO_DAS_STORE"
INDEX = "store.sqlite"
FORMAT = "pseo-das privacy store v1"

SCHEMA = """
CREATE TABLE store_info (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE releases (
    attempt INTEGER PRIMARY KEY AUTOINCREMENT,
    release_id TEXT NOT NULL,
    seed_hex TEXT NOT NULL,
    inputs_sha256 TEXT NOT NULL,
    config_sha256 TEXT NOT NULL,
    plan_sha256 TEXT NOT NULL,
    supersedes INTEGER REFERENCES releases(attempt),
    recorded_at TEXT NOT NULL
);
CREATE TABLE measurements (
    measurement_id TEXT PRIMARY KEY,
    attempt INTEGER NOT NULL REFERENCES releases(attempt),
    tabulation_id TEXT NOT NULL,
    question_sha256 TEXT NOT NULL,
    question TEXT NOT NULL,
    epsilon TEXT NOT NULL,
    populations INTEGER NOT NULL,
    supersedes TEXT,
    recorded_at TEXT NOT NULL
);
CREATE TABLE measurement_populations (
    measurement_id TEXT NOT NULL REFERENCES measurements(measurement_id),
    institution TEXT NOT NULL,
    degree_level TEXT NOT NULL,
    grad_cohort INTEGER NOT NULL
);
CREATE INDEX measurement_populations_population
    ON measurement_populations (institution, degree_level, grad_cohort);
CREATE TABLE measurement_objects (
    measurement_id TEXT PRIMARY KEY REFERENCES measurements(measurement_id),
    object_sha256 TEXT NOT NULL,
    cells INTEGER NOT NULL,
    columns INTEGER NOT NULL,
    stored_at TEXT NOT NULL
);
CREATE TABLE publications (
    publication INTEGER PRIMARY KEY AUTOINCREMENT,
    attempt INTEGER NOT NULL REFERENCES releases(attempt),
    record_sha256 TEXT NOT NULL,
    out_dir TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
"""
_EARLIER_MEASUREMENT = ("measurement_id IN (SELECT measurement_id FROM source.measurements "
                        "WHERE attempt < ?)")
APPEND_ONLY = ["store_info", "releases", "measurements", "measurement_populations",
               "measurement_objects", "publications"]


class StoreError(RuntimeError):
    """The privacy store is missing, unreadable or inconsistent."""


class LifetimeBudgetExceeded(RuntimeError):
    """The release would take some populations over the lifetime cap."""


class ReleaseConflict(RuntimeError):
    """The release id was already measured with other inputs, configuration or seed."""


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def exact_epsilon(value: float | str | Fraction) -> Fraction:
    """An epsilon as an exact rational: the decimal it is written as (1.5 -> 3/2)."""
    return value if isinstance(value, Fraction) else Fraction(str(value))


def epsilon_text(value: Fraction) -> str:
    """An exact epsilon as a decimal string when it has one ('7.5'), else 'p/q'."""
    value = Fraction(value)
    denominator = value.denominator
    for prime in (2, 5):
        while denominator % prime == 0:
            denominator //= prime
    if denominator != 1:
        return f"{value.numerator}/{value.denominator}"
    digits = 0
    while (value * 10 ** digits).denominator != 1:
        digits += 1
    text = f"{value.numerator * 10 ** digits // value.denominator}"
    if digits:
        text = text.rjust(digits + 1, "0")
        text = f"{text[:-digits]}.{text[-digits:]}"
    return text


def resolve_store(option: str | Path | None, configured: str | None = None) -> Path:
    """The store folder: --store, else $PSEO_DAS_STORE, else the configuration's
    privacy.store; never the current directory by default."""
    chosen = option or os.environ.get(STORE_ENV) or configured
    if not chosen:
        raise StoreError("no privacy store given: pass --store DIR, set PSEO_DAS_STORE, or set "
                         "privacy.store in the configuration file (create one with "
                         "`pseo-das store init DIR`)")
    return Path(chosen).expanduser().resolve()


def store_exists(path: Path) -> bool:
    return (Path(path) / INDEX).is_file()


def init_store(path: Path) -> Path:
    """Create an empty store in `path` (which must not hold one)."""
    path = Path(path)
    if store_exists(path):
        raise StoreError(f"{path} already holds a privacy store")
    (path / "objects").mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path / INDEX, isolation_level=None)
    try:
        db.executescript("BEGIN;" + SCHEMA + "".join(
            f"CREATE TRIGGER {t}_no_update BEFORE UPDATE ON {t} BEGIN SELECT RAISE(ABORT, "
            f"'the privacy store is append-only'); END;"
            f"CREATE TRIGGER {t}_no_delete BEFORE DELETE ON {t} BEGIN SELECT RAISE(ABORT, "
            f"'the privacy store is append-only'); END;" for t in APPEND_ONLY) + "COMMIT;")
        db.executemany("INSERT INTO store_info VALUES (?, ?)",
                       [("format", FORMAT), ("created_at", utc_now())])
    finally:
        db.close()
    return path


ATTEMPT_COLUMNS = "attempt, release_id, seed_hex, inputs_sha256, config_sha256, plan_sha256"


@dataclass(frozen=True)
class ReleaseAttempt:
    attempt: int
    release_id: str
    seed_hex: str
    inputs_sha256: str
    config_sha256: str
    plan_sha256: str


@dataclass(frozen=True)
class StoredMeasurement:
    measurement_id: str
    attempt: int
    tabulation_id: str
    question_sha256: str
    epsilon: Fraction
    object_sha256: str | None   # None until its noisy values are stored


class PrivacyStore:
    """One store folder. Open with `PrivacyStore.open(path)` (never creates one)."""

    def __init__(self, path: Path, db: sqlite3.Connection):
        self.path = path
        self._db = db

    @classmethod
    def open(cls, path: Path) -> "PrivacyStore":
        path = Path(path)
        if not store_exists(path):
            raise StoreError(f"{path}: no privacy store there; create one with "
                             f"`pseo-das store init {path}` (or pass --init-store), or point "
                             "--store / PSEO_DAS_STORE at the agency's store")
        db = sqlite3.connect(path / INDEX, isolation_level=None, timeout=60)
        try:
            info = dict(db.execute("SELECT key, value FROM store_info").fetchall())
        except sqlite3.DatabaseError as exc:
            db.close()
            raise StoreError(f"{path / INDEX}: not a pseo-das privacy store ({exc})") from exc
        if info.get("format") != FORMAT:
            db.close()
            raise StoreError(f"{path / INDEX}: unknown store format {info.get('format')!r}")
        return cls(path, db)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "PrivacyStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- transactions -------------------------------------------------------------------
    def begin(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")  # one writer at a time

    def commit(self) -> None:
        self._db.execute("COMMIT")

    def rollback(self) -> None:
        self._db.execute("ROLLBACK")

    # --- content-addressed objects ----------------------------------------------------
    def put_object(self, data: bytes, ext: str) -> str:
        """Write `data` as objects/<sha256>.<ext> (atomically; a no-op if present)."""
        sha = hashlib.sha256(data).hexdigest()
        target = self.path / "objects" / f"{sha}.{ext}"
        if not target.exists():
            temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            temporary.write_bytes(data)
            os.replace(temporary, target)
        return sha

    def get_object(self, sha: str, ext: str) -> bytes:
        path = self.path / "objects" / f"{sha}.{ext}"
        try:
            data = path.read_bytes()
        except FileNotFoundError as exc:
            raise StoreError(f"{path}: object missing from the privacy store") from exc
        if hashlib.sha256(data).hexdigest() != sha:
            raise StoreError(f"{path}: content does not match its SHA-256 (changed on disk)")
        return data

    def put_frame(self, frame: pd.DataFrame) -> str:
        return self.put_object(frame_bytes(frame), "parquet")

    def get_frame(self, sha: str) -> pd.DataFrame:
        return pq.read_table(io.BytesIO(self.get_object(sha, "parquet"))).to_pandas()

    def put_json(self, value: dict) -> str:
        return self.put_object(json.dumps(value, indent=1).encode(), "json")  # key order kept

    def get_json(self, sha: str) -> dict:
        return json.loads(self.get_object(sha, "json"))

    # --- releases -----------------------------------------------------------------------
    def attempts(self, release_id: str) -> list[ReleaseAttempt]:
        rows = self._db.execute(f"SELECT {ATTEMPT_COLUMNS} FROM releases WHERE release_id = ? "
                                "ORDER BY attempt", (release_id,)).fetchall()
        return [ReleaseAttempt(*row) for row in rows]

    def attempt(self, attempt: int) -> ReleaseAttempt:
        row = self._db.execute(f"SELECT {ATTEMPT_COLUMNS} FROM releases WHERE attempt = ?",
                               (attempt,)).fetchone()
        return ReleaseAttempt(*row)

    def add_release(self, release_id: str, seed_hex: str, inputs_sha256: str,
                    config_sha256: str, plan_sha256: str, supersedes: int | None) -> int:
        cursor = self._db.execute(
            "INSERT INTO releases (release_id, seed_hex, inputs_sha256, config_sha256, "
            "plan_sha256, supersedes, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (release_id, seed_hex, inputs_sha256, config_sha256, plan_sha256, supersedes,
             utc_now()))
        return int(cursor.lastrowid)

    # --- measurements ---------------------------------------------------------------------
    def add_measurement(self, measurement_id: str, attempt: int, tabulation_id: str,
                        question: dict, epsilon: Fraction, populations: pd.DataFrame,
                        supersedes: list[str]) -> None:
        self._db.execute(
            "INSERT INTO measurements (measurement_id, attempt, tabulation_id, question_sha256, "
            "question, epsilon, populations, supersedes, recorded_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (measurement_id, attempt, tabulation_id, question_sha256(question),
             json.dumps(question, sort_keys=True), epsilon_text(epsilon), len(populations),
             ",".join(supersedes) or None, utc_now()))
        self._db.executemany(
            "INSERT INTO measurement_populations VALUES (?, ?, ?, ?)",
            [(measurement_id, *row) for row in
             populations[POPULATION_KEYS].itertuples(index=False, name=None)])

    def store_measurement(self, measurement_id: str, cells: pd.DataFrame,
                          values: np.ndarray) -> str:
        """Keep a measurement's noisy values (cells x columns); returns the object's
        SHA-256. Storing the same measurement again (a retry) is a no-op."""
        known = self.measurement(measurement_id)
        if known.object_sha256 is not None:
            return known.object_sha256
        sha = self.put_object(measurement_bytes(cells, values), "parquet")
        self._db.execute("INSERT OR IGNORE INTO measurement_objects VALUES (?, ?, ?, ?, ?)",
                         (measurement_id, sha, len(cells), values.shape[1], utc_now()))
        return self.measurement(measurement_id).object_sha256

    def measurement(self, measurement_id: str) -> StoredMeasurement:
        row = self._db.execute(
            "SELECT m.measurement_id, m.attempt, m.tabulation_id, m.question_sha256, m.epsilon, "
            "o.object_sha256 FROM measurements m LEFT JOIN measurement_objects o "
            "USING (measurement_id) WHERE m.measurement_id = ?", (measurement_id,)).fetchone()
        if row is None:
            raise StoreError(f"measurement {measurement_id} is not in the store {self.path}")
        return StoredMeasurement(*row[:4], Fraction(row[4]), row[5])

    def measured_values(self, measurement_id: str) -> tuple[pd.DataFrame, np.ndarray]:
        """A stored measurement's cells and noisy values (cells x columns)."""
        stored = self.measurement(measurement_id)
        if stored.object_sha256 is None:
            raise StoreError(f"measurement {measurement_id} was planned but its noisy values "
                             "were never stored (the release that planned it did not finish)")
        return read_measurement(self.get_object(stored.object_sha256, "parquet"))

    def current_measurements(self, question_sha: str) -> pd.DataFrame:
        """For each population with a measurement of the question: the latest one
        (POPULATION_KEYS + measurement_id)."""
        return pd.read_sql_query(
            "SELECT p.institution, p.degree_level, p.grad_cohort, p.measurement_id "
            "FROM measurement_populations p JOIN measurements m USING (measurement_id) "
            "WHERE m.question_sha256 = ? ORDER BY m.rowid", self._db, params=(question_sha,)) \
            .drop_duplicates(POPULATION_KEYS, keep="last").reset_index(drop=True)

    def spends(self) -> pd.DataFrame:
        """Every measurement's spend per population (POPULATION_KEYS, attempt,
        measurement_id, epsilon as a Fraction): the lifetime budget. Measurements planned
        but never stored count (they were charged before any draw)."""
        frame = pd.read_sql_query(
            "SELECT p.institution, p.degree_level, p.grad_cohort, m.attempt, m.measurement_id, "
            "m.epsilon FROM measurement_populations p JOIN measurements m USING (measurement_id)",
            self._db)
        frame["epsilon"] = frame["epsilon"].map(Fraction)
        return frame

    # --- publications ---------------------------------------------------------------------
    def add_publication(self, attempt: int, record_sha256: str, out_dir: Path) -> None:
        self._db.execute(
            "INSERT INTO publications (attempt, record_sha256, out_dir, recorded_at) "
            "VALUES (?, ?, ?, ?)", (attempt, record_sha256, str(out_dir), utc_now()))

    def publication_record(self, release_id: str) -> tuple[ReleaseAttempt, dict]:
        row = self._db.execute(
            "SELECT p.attempt, p.record_sha256 FROM publications p JOIN releases r "
            "USING (attempt) WHERE r.release_id = ? ORDER BY p.publication DESC LIMIT 1",
            (release_id,)).fetchone()
        if row is None:
            known = [r for (r,) in self._db.execute(
                "SELECT DISTINCT r.release_id FROM publications p JOIN releases r USING (attempt) "
                "ORDER BY p.publication")]
            raise StoreError(f"release {release_id} was never published from the store {self.path}"
                             + (f"; published releases: {', '.join(known)}" if known else
                                "; it holds no published release"))
        return self.attempt(row[0]), self.get_json(row[1])

    def copy_before(self, attempt: int, destination: Path) -> Path:
        """A new store in `destination` holding what this one held before `attempt` was
        recorded (for an audit replay, which then plans and measures that attempt again)."""
        init_store(destination)
        db = sqlite3.connect(destination / INDEX, isolation_level=None)
        try:
            db.execute("ATTACH DATABASE ? AS source", (str(self.path / INDEX),))
            db.execute("BEGIN")
            for table, condition in [
                    ("releases", "attempt < ?"), ("measurements", "attempt < ?"),
                    ("measurement_populations", _EARLIER_MEASUREMENT),
                    ("measurement_objects", _EARLIER_MEASUREMENT),
                    ("publications", "attempt < ?")]:
                db.execute(f"INSERT INTO {table} SELECT * FROM source.{table} WHERE {condition}",
                           (attempt,))
            db.execute("COMMIT")
        finally:
            db.close()
        shutil.copytree(self.path / "objects", destination / "objects", dirs_exist_ok=True)
        return destination

    # --- summaries ------------------------------------------------------------------------
    def table(self, sql: str, params: tuple = ()) -> pd.DataFrame:
        return pd.read_sql_query(sql, self._db, params=params)


def question_sha256(question: dict) -> str:
    return hashlib.sha256(json.dumps(question, sort_keys=True).encode()).hexdigest()


def frame_bytes(frame: pd.DataFrame) -> bytes:
    return table_bytes(pa.Table.from_pandas(frame, preserve_index=False))


def table_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


TEXT_COLUMNS = {"institution", "inst_state", "degree_level", "cipcode"}


def measurement_bytes(cells: pd.DataFrame, values: np.ndarray) -> bytes:
    """Cells (text codes) and their noisy values (a fixed-size list per cell) as Parquet."""
    columns = {c: pa.array(cells[c].astype(str).to_numpy(dtype=object), pa.string())
               if c in TEXT_COLUMNS else pa.array(cells[c].to_numpy(dtype=np.int64))
               for c in CELL_COLUMNS}
    flat = pa.array(np.ascontiguousarray(values, dtype=np.int64).ravel())
    columns["noisy"] = pa.FixedSizeListArray.from_arrays(flat, values.shape[1])
    return table_bytes(pa.table(columns))


def read_measurement(data: bytes) -> tuple[pd.DataFrame, np.ndarray]:
    table = pq.read_table(io.BytesIO(data))
    noisy = table.column("noisy").combine_chunks()
    values = noisy.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
    cells = table.select(CELL_COLUMNS).to_pandas()
    return cells, values.reshape(len(cells), noisy.type.list_size)
