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
x graduation cohort). It spends its epsilon once on each of its populations, charged to
their graduates: to every graduation year of each population's cohort window (the budget's
atoms, tasks/privacy/lifetime_budget.py, on which the lifetime cap is checked); every later
release that asks the same question of the same population reuses it at zero epsilon.

Tamper evidence: every row of the index is also an entry of `chain`, which carries the
SHA-256 of the previous entry (a hash chain; a measurement's entry covers its population
list by its SHA-256). The store's policy (lifetime epsilon cap per graduate, largest
epsilon per tabulation) is part of the chain and changes only by a recorded command that
names who and why. `store_integrity.verify_store` checks the chain, every row against it,
the schema and triggers, and that every epsilon is a positive exact value; each release
records the chain head it read and the one it wrote, so a rewound or replaced store
disagrees with the heads recorded in manifests and MLflow runs.

The store holds each release seed sealed with the agency's seed key (seed_custody.py;
`releases.seed_hex` is then the seed's SHA-256); a store of an earlier version holds them in
plaintext (`store verify` warns). It also holds noisy measurements: protect it.
"""
from __future__ import annotations

import errno
import fcntl
import getpass
import hashlib
import io
import json
import os
import shutil
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pseo_das.errors import PseoDasError
from pseo_das.schemas.cells import CIP_2010, MEASURED_CELL_COLUMNS, POPULATION_KEYS
from pseo_das.epsilon import epsilon_text, exact_epsilon
from pseo_das.tasks.privacy.ledger import RowBlocks
from pseo_das.tasks.privacy.file_modes import open_private, private_folder, write_private
from pseo_das.tasks.privacy.lifetime_budget import CohortDefinitionMissing, cohort_years
from pseo_das.tasks.privacy.release_seed import ReleaseSeed
from pseo_das.tasks.privacy.seed_custody import (check_key_outside, required_key, seal,
                                                 unseal)

STORE_ENV = "PSEO_DAS_STORE"
INDEX = "store.sqlite"
LOCK = "store.lock"
FORMAT = "pseo-das privacy store v2"
GENESIS = "0" * 64
DEFAULT_LIFETIME_CAP = Fraction(30)
DEFAULT_MAX_TABULATION_EPSILON = Fraction(10)
# The lifetime delta cap per graduate of a new store: room for the employer-protecting
# mechanisms' deltas (Smooth Laplace: 1e-3 per tabulation by default) of a few releases.
DEFAULT_LIFETIME_DELTA_CAP = Fraction(1, 100)
# Above this, the geometric noise is zero with probability > 0.9999 (2e^-eps/(1+e^-eps) <
# 1e-4): a count published with it is the true count. No policy may allow more.
CEILING_TABULATION_EPSILON = Fraction(10)


def _positive(column: str) -> str:
    """SQL CHECK: `column` is an exact positive epsilon as written by epsilon_text ('7.5',
    '1/3'): digits with one '.' or one '/', a non-zero digit in the numerator."""
    numerator = f"CASE WHEN instr({column}, '/') > 0 THEN substr({column}, 1, instr({column}, '/') - 1) ELSE {column} END"
    return (f"CHECK (typeof({column}) = 'text' AND {column} GLOB '[0-9]*' AND {column} NOT GLOB "
            f"'*[^0-9./]*' AND {column} NOT GLOB '*[./]*[./]*' AND {column} NOT GLOB '*[./]' "
            f"AND {column} NOT GLOB '*/0*' AND ({numerator}) GLOB '*[1-9]*')")


SHA = "CHECK (length({0}) = 64 AND {0} NOT GLOB '*[^0-9a-f]*')"
# The hash chain every append-only table of a store (and of the verification ledger beside
# it) writes an entry to.
CHAIN_TABLE = f"""CREATE TABLE chain (
    seq INTEGER PRIMARY KEY CHECK (seq > 0),
    entry TEXT NOT NULL,
    content TEXT NOT NULL,
    prev_sha256 TEXT NOT NULL {SHA.format("prev_sha256")},
    sha256 TEXT NOT NULL UNIQUE {SHA.format("sha256")}
);"""
SCHEMA = f"""
CREATE TABLE store_info (key TEXT PRIMARY KEY, value TEXT NOT NULL);
{CHAIN_TABLE}
CREATE TABLE policies (
    policy INTEGER PRIMARY KEY AUTOINCREMENT,
    lifetime_cap TEXT NOT NULL {_positive("lifetime_cap")},
    max_tabulation_epsilon TEXT NOT NULL {_positive("max_tabulation_epsilon")},
    set_by TEXT NOT NULL CHECK (length(trim(set_by)) > 0),
    reason TEXT NOT NULL CHECK (length(trim(reason)) > 0),
    recorded_at TEXT NOT NULL
);
CREATE TABLE releases (
    attempt INTEGER PRIMARY KEY AUTOINCREMENT,
    release_id TEXT NOT NULL,
    seed_hex TEXT NOT NULL {SHA.format("seed_hex")},
    inputs_sha256 TEXT NOT NULL,
    config_sha256 TEXT NOT NULL,
    plan_sha256 TEXT NOT NULL {SHA.format("plan_sha256")},
    supersedes INTEGER REFERENCES releases(attempt),
    policy INTEGER NOT NULL REFERENCES policies(policy),
    chain_seq_read INTEGER NOT NULL CHECK (chain_seq_read > 0),
    chain_sha256_read TEXT NOT NULL {SHA.format("chain_sha256_read")},
    recorded_at TEXT NOT NULL
);
CREATE TABLE measurements (
    measurement_id TEXT PRIMARY KEY,
    attempt INTEGER NOT NULL REFERENCES releases(attempt),
    tabulation_id TEXT NOT NULL,
    question_sha256 TEXT NOT NULL {SHA.format("question_sha256")},
    question TEXT NOT NULL,
    epsilon TEXT NOT NULL {_positive("epsilon")},
    populations INTEGER NOT NULL CHECK (populations > 0),
    populations_sha256 TEXT NOT NULL {SHA.format("populations_sha256")},
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
    object_sha256 TEXT NOT NULL {SHA.format("object_sha256")},
    cells INTEGER NOT NULL,
    columns INTEGER NOT NULL,
    stored_at TEXT NOT NULL
);
CREATE TABLE publications (
    publication INTEGER PRIMARY KEY AUTOINCREMENT,
    attempt INTEGER NOT NULL REFERENCES releases(attempt),
    record_sha256 TEXT NOT NULL {SHA.format("record_sha256")},
    out_dir TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
"""
APPEND_ONLY = ["store_info", "chain", "policies", "releases", "measurements",
               "measurement_populations", "measurement_objects", "publications"]
# Tables whose every row is an entry of the chain (measurement_populations is covered by
# its measurement's populations_sha256).
CHAINED = ["store_info", "policies", "releases", "measurements", "measurement_objects",
           "publications"]


def append_only_triggers(tables: list[str], what: str) -> str:
    """SQLite triggers that refuse every UPDATE and DELETE on `tables` ("`what` is
    append-only")."""
    return "".join(
        f"CREATE TRIGGER {t}_no_update BEFORE UPDATE ON {t} BEGIN SELECT RAISE(ABORT, "
        f"'{what} is append-only'); END;"
        f"CREATE TRIGGER {t}_no_delete BEFORE DELETE ON {t} BEGIN SELECT RAISE(ABORT, "
        f"'{what} is append-only'); END;" for t in tables)


TRIGGERS = append_only_triggers(APPEND_ONLY, "the privacy store")


class StoreError(PseoDasError, RuntimeError):
    """The privacy store is missing, unreadable or inconsistent."""

    quotes_records = False


class LifetimeBudgetExceeded(PseoDasError, RuntimeError):
    """The release would take some populations over the lifetime cap."""

    quotes_records = False


class ReleaseConflict(PseoDasError, RuntimeError):
    """The release id was already measured with other inputs, configuration or seed."""

    quotes_records = False


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class StoreBusy(StoreError):
    """Another process holds the lock of the store or of the release folder."""


@contextmanager
def exclusive_lock(lock_file: Path, what: str):
    """Hold an exclusive lock on `lock_file` (created if missing) or refuse at once with
    StoreBusy naming the holder. Released when the process ends, however it ends."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    handle = open(lock_file, "a+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise StoreBusy(f"{what} is in use by {holder}; two releases never run at once "
                            "against the same store or folder: wait for it to finish") from exc
        handle.seek(0)
        handle.truncate()
        handle.write(f"pseo-das (pid {os.getpid()}, since {utc_now()})")
        handle.flush()
        yield
    finally:
        handle.close()


def store_lock(path: Path):
    """The store's lock: one release (or policy change) at a time."""
    return exclusive_lock(Path(path) / LOCK, f"the privacy store {path}")


class StorePolicyError(StoreError):
    """A value the store's policy does not allow (or a policy change without who and why)."""


def positive_epsilon(value: float | str | Fraction, what: str) -> Fraction:
    """An exact epsilon that must be positive and finite; StorePolicyError otherwise."""
    try:
        exact = exact_epsilon(value)
    except (ValueError, ZeroDivisionError, OverflowError, TypeError) as exc:
        raise StorePolicyError(f"{what} = {value!r} is not an exact finite number") from exc
    if exact <= 0:
        raise StorePolicyError(f"{what} = {epsilon_text(exact)} must be positive")
    return exact


# How every command is pointed at a store (the store command takes the folder itself).
WHERE_STORE = ("`pseo-das store ACTION DIR`, `--store DIR` for the other commands, or "
               f"${STORE_ENV}")


def resolve_store(option: str | Path | None, configured: str | None = None) -> Path:
    """The store folder: --store, else $PSEO_DAS_STORE, else the configuration's
    privacy.store; never the current directory by default."""
    chosen = option or os.environ.get(STORE_ENV) or configured
    if not chosen:
        raise StoreError(f"no privacy store given: {WHERE_STORE}, or set privacy.store in the "
                         "configuration file (create one with `pseo-das store init DIR`)")
    return Path(chosen).expanduser().resolve()


def store_exists(path: Path) -> bool:
    return (Path(path) / INDEX).is_file()


def check_store_writable(path: Path) -> None:
    """The store's folder, index and objects can be written (checked before a release
    records anything)."""
    for target in (path, path / INDEX, path / "objects"):
        if not os.access(target, os.W_OK):
            raise StoreError(f"the privacy store {path} cannot be written ({target}: permission "
                             "denied); a release records its plan there before any noise")


@dataclass(frozen=True)
class StorePolicy:
    """What the store allows: the lifetime epsilon and delta caps per graduate (checked per
    atom: tasks/privacy/lifetime_budget.py) and the largest epsilon of one tabulation.
    Changed only by `pseo-das store set-policy`. A store created before delta was capped has
    no delta cap (None) until a policy sets one."""
    policy: int
    lifetime_cap: Fraction
    max_tabulation_epsilon: Fraction
    set_by: str
    reason: str
    recorded_at: str
    lifetime_delta_cap: Fraction | None = None

    def as_dict(self) -> dict:
        delta = {} if self.lifetime_delta_cap is None else {
            "lifetime_delta_cap": epsilon_text(self.lifetime_delta_cap)}
        return {"policy": self.policy, "lifetime_cap": epsilon_text(self.lifetime_cap),
                "max_tabulation_epsilon": epsilon_text(self.max_tabulation_epsilon),
                "set_by": self.set_by, "reason": self.reason, "recorded_at": self.recorded_at,
                **delta}


def delta_cap_key(policy: int) -> str:
    """The store_info key holding policy `policy`'s lifetime delta cap (policies recorded
    before delta was capped have none; the policies table's columns are the store format's)."""
    return f"policy.{policy}.lifetime_delta_cap"


@dataclass(frozen=True)
class ChainHead:
    """The last entry of the store's hash chain: (0, GENESIS) for an empty chain."""
    seq: int
    sha256: str

    def as_dict(self) -> dict:
        return {"seq": self.seq, "sha256": self.sha256}


def chain_sha256(seq: int, prev_sha256: str, entry: str, content: str) -> str:
    return hashlib.sha256(f"{seq}\n{prev_sha256}\n{entry}\n{content}".encode()).hexdigest()


def row_content(columns: list[str], row: tuple) -> str:
    """A table row as the canonical JSON its chain entry holds."""
    return json.dumps(dict(zip(columns, row)), sort_keys=True, separators=(",", ":"))


def populations_sha256(populations: pd.DataFrame) -> str:
    """SHA-256 of a measurement's population list (sorted, one 'inst,degree,cohort' line
    each): its chain entry covers its measurement_populations rows through this."""
    rows = sorted(zip(populations["institution"].astype(str), populations["degree_level"].astype(str),
                      populations["grad_cohort"].astype(np.int64).tolist()))
    return hashlib.sha256("\n".join(f"{i},{d},{c}" for i, d, c in rows).encode()).hexdigest()


def _policy_values(lifetime_cap, max_tabulation_epsilon, set_by: str, reason: str,
                   lifetime_delta_cap) -> tuple[Fraction, Fraction, str, str, Fraction | None]:
    cap = positive_epsilon(lifetime_cap, "lifetime cap")
    delta_cap = None if lifetime_delta_cap is None else \
        positive_epsilon(lifetime_delta_cap, "lifetime delta cap")
    if delta_cap is not None and delta_cap >= 1:
        raise StorePolicyError(f"lifetime delta cap {epsilon_text(delta_cap)} must be below 1 "
                               "(a delta of 1 promises nothing)")
    largest = positive_epsilon(max_tabulation_epsilon, "largest epsilon per tabulation")
    if largest > CEILING_TABULATION_EPSILON:
        raise StorePolicyError(
            f"largest epsilon per tabulation {epsilon_text(largest)} is above "
            f"{epsilon_text(CEILING_TABULATION_EPSILON)}: at such epsilons the geometric noise is "
            "almost surely zero, so the counts would be published as they are")
    if not set_by.strip() or not reason.strip():
        raise StorePolicyError("a policy is recorded with who set it and why (--by, --reason)")
    return cap, largest, set_by.strip(), reason.strip(), delta_cap


def init_store(path: Path, lifetime_cap=DEFAULT_LIFETIME_CAP,
               max_tabulation_epsilon=DEFAULT_MAX_TABULATION_EPSILON,
               set_by: str | None = None, reason: str = "store created",
               lifetime_delta_cap=DEFAULT_LIFETIME_DELTA_CAP) -> Path:
    """Create an empty store in `path` (which must not hold one) with its first policy.
    The index is built in a temporary file and renamed: a kill leaves no half store."""
    path = Path(path)
    if store_exists(path):
        raise StoreError(f"{path} already holds a privacy store")
    values = _policy_values(lifetime_cap, max_tabulation_epsilon, set_by or _user(), reason,
                            lifetime_delta_cap)
    try:
        private_folder(path)
        private_folder(path / "objects")
    except OSError as exc:
        raise StoreError(f"cannot create a privacy store in {path}: {exc.strerror or exc}"
                         + (f" ({exc.filename})" if exc.filename else "")) from exc
    temporary = path / f".{INDEX}.{os.getpid()}.tmp"
    temporary.unlink(missing_ok=True)
    write_private(temporary, b"")          # an empty file is an empty SQLite database
    db = sqlite3.connect(temporary, isolation_level=None)
    try:
        db.executescript("BEGIN;" + SCHEMA + TRIGGERS + "COMMIT;")
        store = PrivacyStore(path, db)
        with store.writing():
            for key, value in [("format", FORMAT), ("store_id", uuid.uuid4().hex),
                               ("created_at", utc_now())]:
                store._append("store_info", {"key": key, "value": value})
            store._add_policy(*values)
    finally:
        db.close()
    try:
        os.link(temporary, path / INDEX)       # never replaces a store created meanwhile
    except FileExistsError as exc:
        raise StoreError(f"{path} already holds a privacy store (created meanwhile)") from exc
    finally:
        temporary.unlink()
    return path


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown user"


ATTEMPT_COLUMNS = ("attempt, release_id, seed_hex, inputs_sha256, config_sha256, plan_sha256, "
                   "policy, chain_seq_read, chain_sha256_read")


@dataclass(frozen=True)
class ReleaseAttempt:
    attempt: int
    release_id: str
    seed_sha256: str              # the seed's commitment
    inputs_sha256: str
    config_sha256: str
    plan_sha256: str
    policy: int
    chain_seq_read: int           # the chain head the release read when it was planned
    chain_sha256_read: str
    sealed_seed: str | None = field(default=None, repr=False)  # None: an earlier version's
    plaintext_seed: str | None = field(default=None, repr=False)  # seed, kept in plaintext
    store_id: str = ""

    @property
    def seed(self) -> ReleaseSeed:
        """The attempt's seed, unsealed with the agency's seed key ($PSEO_DAS_SEED_KEY;
        SeedKeyError without it). An earlier version's attempt kept it in plaintext."""
        if self.sealed_seed is None:
            return ReleaseSeed.from_hex(self.plaintext_seed or "")
        seed = unseal(self.sealed_seed, required_key(f"the seed of attempt {self.attempt} "
                                                     f"(release {self.release_id})"),
                      seal_context(self.store_id, self.attempt))
        if seed.sha256 != self.seed_sha256:
            raise StoreError(f"attempt {self.attempt}: the sealed seed does not hash to the "
                             "recorded commitment")
        return seed


def seal_context(store_id: str, attempt: int) -> str:
    """What a sealed seed is bound to: the store and the attempt it was recorded for."""
    return f"pseo-das release seed/{store_id}/{attempt}"


def sealed_seed_key(attempt: int) -> str:
    """The store_info key of an attempt's sealed seed."""
    return f"sealed_seed.{attempt}"


@dataclass(frozen=True)
class StoredMeasurement:
    measurement_id: str
    attempt: int
    tabulation_id: str
    question_sha256: str
    epsilon: Fraction
    object_sha256: str | None   # None until its noisy values are stored

    def values_sha256(self) -> str:
        """The content address of its noisy values; refused if they were never stored."""
        if self.object_sha256 is None:
            raise StoreError(f"measurement {self.measurement_id} was planned but its noisy "
                             "values were never stored (the release that planned it did not "
                             "finish)")
        return self.object_sha256


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
                             f"`pseo-das store init {path}` (or `pseo-das release "
                             f"--init-store`), or name the agency's store: {WHERE_STORE}")
        db = sqlite3.connect(path / INDEX, isolation_level=None, timeout=60)
        try:
            info = dict(db.execute("SELECT key, value FROM store_info").fetchall())
        except sqlite3.DatabaseError as exc:
            db.close()
            raise StoreError(f"{path / INDEX}: not a pseo-das privacy store ({exc})") from exc
        if info.get("format") != FORMAT:
            db.close()
            raise StoreError(f"{path / INDEX}: store format {info.get('format')!r}, this pseo-das "
                             f"reads {FORMAT!r} (a store of an earlier version has no hash "
                             "chain; keep it read-only and create a new store)")
        return cls(path, db)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "PrivacyStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def store_id(self) -> str:
        return self._db.execute("SELECT value FROM store_info WHERE key = 'store_id'").fetchone()[0]

    def info(self, key: str) -> str | None:
        """A value of store_info (format, store_id, created_at, verification_ledger, ...)."""
        row = self._db.execute("SELECT value FROM store_info WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def infos(self, prefix: str) -> dict[str, str]:
        """The store_info values whose key starts with `prefix`, in the order recorded."""
        rows = self._db.execute("SELECT key, value FROM store_info WHERE substr(key, 1, ?) = ? "
                                "ORDER BY rowid", (len(prefix), prefix)).fetchall()
        return dict(rows)

    def record_info(self, key: str, value: str) -> None:
        """Add a store_info value (an entry of the chain); a key is recorded once, ever."""
        with self.writing():
            if self.info(key) is not None:
                raise StoreError(f"the privacy store {self.path} already records {key} = "
                                 f"{self.info(key)}")
            self._append("store_info", {"key": key, "value": value})

    # --- transactions -------------------------------------------------------------------
    def begin(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")  # one writer at a time

    def commit(self) -> None:
        self._db.execute("COMMIT")

    def rollback(self) -> None:
        self._db.execute("ROLLBACK")

    @contextmanager
    def writing(self):
        """A write transaction, unless one is already open (then it is part of that)."""
        if self._db.in_transaction:
            yield
            return
        self.begin()
        try:
            yield
        except BaseException:
            self.rollback()
            raise
        self.commit()

    # --- the hash chain -------------------------------------------------------------------
    def head(self) -> ChainHead:
        row = self._db.execute("SELECT seq, sha256 FROM chain ORDER BY seq DESC LIMIT 1").fetchone()
        return ChainHead(*row) if row else ChainHead(0, GENESIS)

    def chain_entry(self, seq: int) -> ChainHead | None:
        row = self._db.execute("SELECT seq, sha256 FROM chain WHERE seq = ?", (seq,)).fetchone()
        return ChainHead(*row) if row else None

    def _append(self, table: str, values: dict) -> int:
        """Insert a row and its chain entry (inside a write transaction); returns its rowid."""
        assert self._db.in_transaction and table in CHAINED
        names = ", ".join(values)
        cursor = self._db.execute(f"INSERT INTO {table} ({names}) VALUES "
                                  f"({', '.join('?' * len(values))})", tuple(values.values()))
        rowid = cursor.lastrowid
        assert rowid is not None   # sqlite3 sets it on every successful INSERT
        cursor = self._db.execute(f"SELECT * FROM {table} WHERE rowid = ?", (rowid,))
        content = row_content([d[0] for d in cursor.description], cursor.fetchone())
        head = self.head()
        seq = head.seq + 1
        self._db.execute("INSERT INTO chain VALUES (?, ?, ?, ?, ?)",
                         (seq, table, content, head.sha256,
                          chain_sha256(seq, head.sha256, table, content)))
        return rowid

    # --- policy ---------------------------------------------------------------------------
    def policy(self) -> StorePolicy:
        (latest,) = self._db.execute("SELECT MAX(policy) FROM policies").fetchone()
        return self.policy_number(latest)

    def policy_number(self, policy: int) -> StorePolicy:
        row = self._db.execute("SELECT policy, lifetime_cap, max_tabulation_epsilon, set_by, "
                               "reason, recorded_at FROM policies WHERE policy = ?", (policy,)
                               ).fetchone()
        delta_cap = self.info(delta_cap_key(policy))
        number, cap, largest, set_by, reason, recorded_at = row
        return StorePolicy(number, Fraction(cap), Fraction(largest), set_by, reason, recorded_at,
                           None if delta_cap is None else Fraction(delta_cap))

    def set_policy(self, set_by: str, reason: str, lifetime_cap=None,
                   max_tabulation_epsilon=None, lifetime_delta_cap=None) -> StorePolicy:
        """Record a new policy (unchanged values carried over); returns it."""
        with self.writing():
            current = self.policy()
            values = _policy_values(
                current.lifetime_cap if lifetime_cap is None else lifetime_cap,
                current.max_tabulation_epsilon if max_tabulation_epsilon is None
                else max_tabulation_epsilon, set_by, reason,
                current.lifetime_delta_cap if lifetime_delta_cap is None else lifetime_delta_cap)
            self._add_policy(*values)
        return self.policy()

    def _add_policy(self, lifetime_cap: Fraction, max_tabulation_epsilon: Fraction,
                    set_by: str, reason: str, lifetime_delta_cap: Fraction | None) -> None:
        policy = self._append("policies", {
            "lifetime_cap": epsilon_text(lifetime_cap),
            "max_tabulation_epsilon": epsilon_text(max_tabulation_epsilon),
            "set_by": set_by, "reason": reason, "recorded_at": utc_now()})
        if lifetime_delta_cap is not None:
            self._append("store_info", {"key": delta_cap_key(policy),
                                        "value": epsilon_text(lifetime_delta_cap)})

    # --- content-addressed objects ----------------------------------------------------
    def put_object(self, data: bytes, ext: str) -> str:
        """Write `data` as objects/<sha256>.<ext> (atomically; a no-op if present)."""
        sha = hashlib.sha256(data).hexdigest()
        target = self.path / "objects" / f"{sha}.{ext}"
        if not target.exists():
            temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            write_private(temporary, data)
            os.replace(temporary, target)
        return sha

    def put_table(self, table: pa.Table | Iterable[pa.Table]) -> str:
        """Write `table` as objects/<sha256>.parquet, the bytes of `table_bytes(table)` (or
        the tables of an iterable, a row group each: `write_parquet`), straight to disk and
        hashed from there (a national flows measurement's 150 MB are not held as well as
        the writer's pages); returns the SHA-256."""
        temporary = self.path / "objects" / f".table.{os.getpid()}.{uuid.uuid4().hex}.tmp"
        try:
            with open_private(temporary) as handle:
                write_parquet(table, handle)
            with open(temporary, "rb") as handle:
                sha = hashlib.file_digest(handle, "sha256").hexdigest()
            target = self.path / "objects" / f"{sha}.parquet"
            if not target.exists():
                os.replace(temporary, target)
        finally:   # present already, or failed: the temporary file goes
            temporary.unlink(missing_ok=True)
        return sha

    def get_object(self, sha: str, ext: str) -> bytes:
        """objects/<sha>.<ext> as bytes, checked against its SHA-256 (a small object;
        `open_object` reads a large one in place)."""
        path = self.path / "objects" / f"{sha}.{ext}"
        try:
            data = path.read_bytes()
        except FileNotFoundError as exc:
            raise StoreError(f"{path}: object missing from the privacy store") from exc
        if hashlib.sha256(data).hexdigest() != sha:
            raise StoreError(f"{path}: content does not match its SHA-256 (changed on disk)")
        return data

    @contextmanager
    def open_object(self, sha: str, ext: str) -> Iterator[BinaryIO]:
        """objects/<sha>.<ext> open for reading, its content checked against its SHA-256
        first (streamed: a national flows measurement's 150 MB are read in place, not
        held as bytes)."""
        path = self.path / "objects" / f"{sha}.{ext}"
        try:
            handle = open(path, "rb")
        except FileNotFoundError as exc:
            raise StoreError(f"{path}: object missing from the privacy store") from exc
        with handle:
            if hashlib.file_digest(handle, "sha256").hexdigest() != sha:
                raise StoreError(f"{path}: content does not match its SHA-256 (changed on disk)")
            handle.seek(0)
            yield handle

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
        return [self._attempt(row) for row in rows]

    def attempt(self, attempt: int) -> ReleaseAttempt:
        row = self._db.execute(f"SELECT {ATTEMPT_COLUMNS} FROM releases WHERE attempt = ?",
                               (attempt,)).fetchone()
        return self._attempt(row)

    def _attempt(self, row: tuple) -> ReleaseAttempt:
        """A row of `releases` (ATTEMPT_COLUMNS) as a ReleaseAttempt: `seed_hex` holds the
        seed's SHA-256 when the seed is sealed (store_info sealed_seed.N), the seed itself in
        a store of an earlier version."""
        attempt, release_id, seed_hex, inputs, config, plan, policy, seq_read, sha_read = row
        sealed = self.info(sealed_seed_key(attempt))
        recorded = (inputs, config, plan, policy, seq_read, sha_read)
        if sealed is None:
            return ReleaseAttempt(attempt, release_id, ReleaseSeed.from_hex(seed_hex).sha256,
                                  *recorded, plaintext_seed=seed_hex, store_id=self.store_id)
        return ReleaseAttempt(attempt, release_id, seed_hex, *recorded, sealed_seed=sealed,
                              store_id=self.store_id)

    def add_release(self, release_id: str, seed: ReleaseSeed, inputs_sha256: str,
                    config_sha256: str, plan_sha256: str, supersedes: int | None,
                    policy: int, head_read: ChainHead) -> int:
        """Record an attempt (in a write transaction) with its seed sealed by the agency's
        seed key: the index holds the seed's SHA-256 and the sealed bytes, never the seed."""
        key = required_key(f"recording release {release_id}'s seed")
        check_key_outside(key, self.path)
        attempt = self._append("releases", {
            "release_id": release_id, "seed_hex": seed.sha256, "inputs_sha256": inputs_sha256,
            "config_sha256": config_sha256, "plan_sha256": plan_sha256,
            "supersedes": supersedes, "policy": policy, "chain_seq_read": head_read.seq,
            "chain_sha256_read": head_read.sha256, "recorded_at": utc_now()})
        self.record_info(sealed_seed_key(attempt),
                         seal(seed, key, seal_context(self.store_id, attempt)))
        return attempt

    # --- measurements ---------------------------------------------------------------------
    def add_measurement(self, measurement_id: str, attempt: int, tabulation_id: str,
                        question: dict, epsilon: Fraction, populations: pd.DataFrame,
                        supersedes: list[str]) -> None:
        epsilon = positive_epsilon(epsilon, f"epsilon of {measurement_id}")
        try:          # charged to its graduates' years: the question must say which
            {cohort_years(question, d) for d in populations["degree_level"].astype(str).unique()}
        except CohortDefinitionMissing as exc:
            raise StoreError(f"measurement {measurement_id} not recorded: {exc}") from exc
        self._append("measurements", {
            "measurement_id": measurement_id, "attempt": attempt, "tabulation_id": tabulation_id,
            "question_sha256": question_sha256(question),
            "question": json.dumps(question, sort_keys=True), "epsilon": epsilon_text(epsilon),
            "populations": len(populations), "populations_sha256": populations_sha256(populations),
            "supersedes": ",".join(supersedes) or None, "recorded_at": utc_now()})
        self._db.executemany(
            "INSERT INTO measurement_populations VALUES (?, ?, ?, ?)",
            [(measurement_id, *row) for row in
             populations[POPULATION_KEYS].itertuples(index=False, name=None)])

    def store_measurement(self, measurement_id: str, cells: pd.DataFrame,
                          values: np.ndarray | RowBlocks) -> str:
        """Keep a measurement's noisy values (cells x columns; in a file: stored a row group
        of MEASUREMENT_GROUP_ROWS cells at a time, `measurement_row_groups`); returns the
        object's SHA-256. Storing the same measurement again (a retry) is a no-op."""
        known = self.measurement(measurement_id)
        if known.object_sha256 is not None:
            return known.object_sha256
        sha = self.put_table(measurement_table(cells, values) if isinstance(values, np.ndarray)
                             else measurement_row_groups(cells, values))
        with self.writing():
            stored = self.measurement(measurement_id).object_sha256
            if stored is None:
                self._append("measurement_objects", {
                    "measurement_id": measurement_id, "object_sha256": sha, "cells": len(cells),
                    "columns": values.shape[1], "stored_at": utc_now()})
                stored = sha
        return stored

    def measurement(self, measurement_id: str) -> StoredMeasurement:
        row = self._db.execute(
            "SELECT m.measurement_id, m.attempt, m.tabulation_id, m.question_sha256, m.epsilon, "
            "o.object_sha256 FROM measurements m LEFT JOIN measurement_objects o "
            "USING (measurement_id) WHERE m.measurement_id = ?", (measurement_id,)).fetchone()
        if row is None:
            raise StoreError(f"measurement {measurement_id} is not in the store {self.path}")
        _, attempt, tabulation_id, question_sha256, epsilon, object_sha256 = row
        return StoredMeasurement(measurement_id, attempt, tabulation_id, question_sha256,
                                 Fraction(epsilon), object_sha256)

    def measured_values(self, measurement_id: str, dtype=None, sink=None
                        ) -> tuple[pd.DataFrame, np.ndarray]:
        """A stored measurement's cells and noisy values (cells x columns; integers in
        `dtype` if given, e.g. 32-bit for the flows' counts; `sink`: see
        `read_measurement`)."""
        sha = self.measurement(measurement_id).values_sha256()
        with self.open_object(sha, "parquet") as data:
            return read_measurement(data, dtype, sink)

    def current_measurements(self, question_shas: tuple[str, ...]) -> pd.DataFrame:
        """For each population with a measurement of the question (any of the SHA-256s
        that answer it): the latest one (POPULATION_KEYS + measurement_id)."""
        marks = ", ".join("?" * len(question_shas))
        return pd.read_sql_query(
            "SELECT p.institution, p.degree_level, p.grad_cohort, p.measurement_id "
            "FROM measurement_populations p JOIN measurements m USING (measurement_id) "
            f"WHERE m.question_sha256 IN ({marks}) ORDER BY m.rowid", self._db,
            params=tuple(question_shas)) \
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
    def add_publication(self, attempt: int, record_sha256: str, out_dir: Path) -> ChainHead:
        """Record a publication; returns the chain head after it."""
        with self.writing():
            self._append("publications", {"attempt": attempt, "record_sha256": record_sha256,
                                          "out_dir": str(out_dir), "recorded_at": utc_now()})
            return self.head()

    def stored_publication_record(self, release_id: str) -> tuple[ReleaseAttempt, dict]:
        """The attempt that published `release_id` last and its publication record as stored
        (of any version: `publication_record.read_publication_record` reads it typed)."""
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
        """A new store in `destination` holding exactly what this one held when `attempt`
        was planned: the chain up to the head that attempt read, and the rows it covers
        (for an audit replay, which then plans and measures that attempt again)."""
        destination = Path(destination)
        private_folder(destination)
        private_folder(destination / "objects")
        write_private(destination / INDEX, b"")
        db = sqlite3.connect(destination / INDEX, isolation_level=None)
        try:
            db.executescript("BEGIN;" + SCHEMA + "COMMIT;")
            db.execute("ATTACH DATABASE ? AS source", (str(self.path / INDEX),))
            db.execute("BEGIN")
            db.execute("INSERT INTO chain SELECT * FROM source.chain WHERE seq <= ?",
                       (self.attempt(attempt).chain_seq_read,))
            for table in CHAINED:
                for (content,) in db.execute("SELECT content FROM chain WHERE entry = ? "
                                             "ORDER BY seq", (table,)).fetchall():
                    row = json.loads(content)
                    db.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES "
                               f"({', '.join('?' * len(row))})", tuple(row.values()))
            db.execute("INSERT INTO measurement_populations SELECT * FROM "
                       "source.measurement_populations WHERE measurement_id IN "
                       "(SELECT measurement_id FROM measurements)")
            db.execute("COMMIT")
            db.execute("DETACH DATABASE source")
            db.executescript(TRIGGERS)
        finally:
            db.close()
        shutil.copytree(self.path / "objects", destination / "objects", dirs_exist_ok=True)
        return destination

    # --- summaries ------------------------------------------------------------------------
    def table(self, sql: str, params: tuple = ()) -> pd.DataFrame:
        return pd.read_sql_query(sql, self._db, params=params)

    def connection(self) -> sqlite3.Connection:
        """The index, for the integrity check (read only by convention)."""
        return self._db


def question_sha256(question: dict) -> str:
    return hashlib.sha256(json.dumps(question, sort_keys=True).encode()).hexdigest()


def frame_bytes(frame: pd.DataFrame) -> bytes:
    return table_bytes(pa.Table.from_pandas(frame, preserve_index=False))


def table_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    write_parquet(table, sink)
    return sink.getvalue()


def write_parquet(table: pa.Table | Iterable[pa.Table], sink) -> None:
    """A store object's Parquet (zstd) of `table`, to `sink` (a path or a binary file); of
    an iterable of tables of one schema, a row group each (one at a time in memory)."""
    if isinstance(table, pa.Table):
        pq.write_table(table, sink, compression="zstd")
        return
    writer = None
    try:
        for piece in table:
            if writer is None:
                writer = pq.ParquetWriter(sink, piece.schema, compression="zstd")
            writer.write_table(piece, row_group_size=max(piece.num_rows, 1))
    finally:
        if writer is not None:
            writer.close()


TEXT_COLUMNS = {"institution", "inst_state", "degree_level", "cipcode", "cip_vintage"}


# cells of a measurement handed to the Parquet writer at a time: a multiple of 1,024 (its
# write batch, in values), so that each piece ends where one of the whole array's batches does
MEASUREMENT_WRITE_ROWS = 8192


def measurement_table(cells: pd.DataFrame, values: np.ndarray) -> pa.Table:
    """Cells (text codes, with the CIP vintage of their codes) and their noisy values (a
    fixed-size list per cell: int64 counts, or float64 for the cell statistics), the table
    a store object holds as Parquet (`measurement_bytes`, `PrivacyStore.put_table`).
    The values go to the writer MEASUREMENT_WRITE_ROWS cells at a time (one row group, the
    bytes of the whole array's: the writer's levels of a national flows table's 400 million
    values took 0.6 times their size at once)."""
    columns = {c: pa.array(cells[c].astype(str).to_numpy(dtype=object), pa.string())
               if c in TEXT_COLUMNS else pa.array(cells[c].to_numpy(dtype=np.int64))
               for c in MEASURED_CELL_COLUMNS if c in cells.columns}
    kind = np.float64 if np.issubdtype(np.asarray(values).dtype, np.floating) else np.int64
    flat = np.ascontiguousarray(values, dtype=kind)                   # floats: cell statistics
    width = flat.shape[1]
    columns["noisy"] = pa.chunked_array(
        [pa.FixedSizeListArray.from_arrays(pa.array(flat[start:start + MEASUREMENT_WRITE_ROWS]
                                                    .ravel()), width)
         for start in range(0, max(len(flat), 1), MEASUREMENT_WRITE_ROWS)],
        pa.list_(pa.from_numpy_dtype(kind), width))
    return pa.table(columns)


# cells of a measurement held in a file (a national flows table) stored per row group
MEASUREMENT_GROUP_ROWS = 16_384


def measurement_row_groups(cells: pd.DataFrame, values: RowBlocks,
                           group_rows: int = MEASUREMENT_GROUP_ROWS) -> Iterator[pa.Table]:
    """`measurement_table` of values held in a file, `group_rows` cells at a time (each a
    row group of the stored object: memory holds one, not the table)."""
    for start in range(0, max(len(cells), 1), group_rows):
        yield measurement_table(cells.iloc[start:start + group_rows],
                                values.rows(start, start + group_rows))


def measurement_bytes(cells: pd.DataFrame, values: np.ndarray) -> bytes:
    """The stored object of a measurement (`measurement_table`) as bytes."""
    return table_bytes(measurement_table(cells, values))


MEASUREMENT_READ_ROWS = 8192   # cells of a stored measurement decoded at a time


def read_measurement(data: bytes | BinaryIO, dtype=None, sink=None
                     ) -> tuple[pd.DataFrame, np.ndarray]:
    """Cells and values; measurements of earlier versions have no `cip_vintage` column
    (their codes are CIP-2010). The values are decoded MEASUREMENT_READ_ROWS cells at a
    time into one array (a national flows table is never held twice), or appended to
    `sink` (`append(block)`, then `result()` is returned as the values: a table kept in a
    file, `inputs.row_files.RowSink`)."""
    source = pq.ParquetFile(io.BytesIO(data) if isinstance(data, bytes) else data)
    names = source.schema_arrow.names
    cells = source.read(columns=[c for c in MEASURED_CELL_COLUMNS if c in names]) \
        .select([c for c in MEASURED_CELL_COLUMNS if c in names]).to_pandas()
    if "cip_vintage" not in cells.columns:
        cells["cip_vintage"] = CIP_2010
    kind = source.schema_arrow.field("noisy").type
    values = np.empty((0 if sink is not None else len(cells), kind.list_size),
                      dtype=np.float64 if pa.types.is_floating(kind.value_type)
                      else dtype or np.int64)
    at = 0
    for batch in source.iter_batches(batch_size=MEASUREMENT_READ_ROWS, columns=["noisy"]):
        noisy = batch.column(0)
        block = noisy.flatten().to_numpy(zero_copy_only=False).reshape(len(noisy), kind.list_size)
        if sink is not None:
            sink.append(block.astype(values.dtype, copy=False))
        else:
            values[at:at + len(noisy)] = block
        at += len(noisy)
    return cells, values if sink is None else sink.result()
