"""The verification server's budget ledger and answer store, in the privacy store's folder
(DIR/verification.sqlite). Privacy cost: none (bookkeeping).

Append-only like the privacy store's index (triggers refuse UPDATE and DELETE) and
tamper-evident the same way (every row is an entry of a hash chain, `verify_ledger`):

    verification_info   format, server id, the server's seed (keys the groups and the noise)
                        sealed with the agency's seed key (seed_custody.py) and its SHA-256;
                        a ledger of an earlier version holds it in plaintext (`seed_hex`)
    global_budgets      the cap on the sum of epsilon over every query ever answered
    analysts            name, SHA-256 of their token (never the token), their epsilon budget
    queries             one row per distinct query: its canonical form and the epsilon
                        charged to the analyst who first asked it, recorded in the same
                        transaction as the budget check and the answer, before the answer
                        leaves the server (a query that fails or times out costs nothing)
    answers             the released noisy count and posterior of each query
    requests            every request, answered, reused or refused, for auditors

A query already recorded is never charged again: a repeat (by anyone) gets the stored
answer; a query charged whose answer was never stored (by a ledger of an earlier version that
charged before computing, then crashed) is computed again from the same noise stream, at no
new cost. Budgets are exact fractions, never exceeded: the check
and the charge are one transaction (BEGIN IMMEDIATE: one writer at a time).
"""
from __future__ import annotations

import hashlib
import base64
import json
import os
import sqlite3
import uuid
from collections import Counter
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

from pseo_das.errors import PseoDasError
from pseo_das.epsilon import epsilon_text
from pseo_das.tasks.privacy.file_modes import write_private
from pseo_das.tasks.privacy.release_seed import ReleaseSeed
from pseo_das.tasks.privacy.seed_custody import check_key_outside, required_key, seal, unseal
from pseo_das.tasks.privacy.store import (CHAIN_TABLE, GENESIS, SHA, PrivacyStore, StoreError,
                                          _positive,
                                          append_only_triggers, chain_sha256,
                                          positive_epsilon, row_content, store_exists, utc_now)

LEDGER = "verification.sqlite"
LEDGER_KEY = "verification_ledger"     # the store_info key recording the ledger's server id
FORMAT = "pseo-das verification ledger v1"
SCHEMA = f"""
CREATE TABLE verification_info (key TEXT PRIMARY KEY, value TEXT NOT NULL);
{CHAIN_TABLE}
CREATE TABLE global_budgets (
    budget INTEGER PRIMARY KEY AUTOINCREMENT,
    global_cap TEXT NOT NULL {_positive("global_cap")},
    set_by TEXT NOT NULL CHECK (length(trim(set_by)) > 0),
    reason TEXT NOT NULL CHECK (length(trim(reason)) > 0),
    recorded_at TEXT NOT NULL
);
CREATE TABLE analysts (
    analyst TEXT PRIMARY KEY CHECK (length(trim(analyst)) > 0),
    token_sha256 TEXT NOT NULL UNIQUE {SHA.format("token_sha256")},
    budget TEXT NOT NULL {_positive("budget")},
    added_by TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
CREATE TABLE queries (
    query_sha256 TEXT PRIMARY KEY {SHA.format("query_sha256")},
    analyst TEXT NOT NULL REFERENCES analysts(analyst),
    canonical TEXT NOT NULL,
    epsilon TEXT NOT NULL {_positive("epsilon")},
    recorded_at TEXT NOT NULL
);
CREATE TABLE answers (
    query_sha256 TEXT PRIMARY KEY REFERENCES queries(query_sha256),
    released_count INTEGER NOT NULL,
    answer TEXT NOT NULL,
    noise_stream TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
CREATE TABLE requests (
    request INTEGER PRIMARY KEY AUTOINCREMENT,
    analyst TEXT,
    query_sha256 TEXT,
    outcome TEXT NOT NULL,
    epsilon_charged TEXT NOT NULL,
    detail TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
"""
CHAINED = ["verification_info", "global_budgets", "analysts", "queries", "answers", "requests"]
APPEND_ONLY = ["chain", *CHAINED]
TRIGGERS = append_only_triggers(APPEND_ONLY, "the verification ledger")


class LedgerError(StoreError):
    """The verification ledger is missing, or a value it does not allow."""


class BudgetRefused(PseoDasError, RuntimeError):
    """Answering would take the analyst's or the global epsilon over its budget."""


class Outcome:
    ANSWERED = "answered (new measurement)"
    STORED = "answered from the stored answer (no new cost)"
    RECOMPUTED = "answered: charged earlier, answer recomputed from the same stream (no new cost)"
    REFUSED_BUDGET = "refused: budget"
    REFUSED_AUTH = "refused: not authenticated"
    REFUSED_RATE = "refused: rate limit"
    REFUSED_LIMITS = "refused: not a query within the server's limits (nothing charged)"
    TIMED_OUT = "not answered: time limit (nothing charged)"
    FAILED = "failed (nothing charged)"


def ledger_path(store: Path) -> Path:
    return Path(store) / LEDGER


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class KeptAnswer:
    """A computed answer to keep with its charge: the released count, the answer (JSON)
    and the noise stream it was drawn from."""
    released_count: int
    answer: dict
    noise_stream: str


@dataclass(frozen=True)
class Charge:
    """The outcome of `charge`: whether the query has a stored answer, and the budgets."""
    stored_answer: dict | None
    charged: Fraction              # epsilon charged by this request (0 when reused)
    analyst_spent: Fraction
    analyst_budget: Fraction
    global_spent: Fraction
    global_cap: Fraction

    def budget(self) -> dict:
        return {"analyst_spent": epsilon_text(self.analyst_spent),
                "analyst_budget": epsilon_text(self.analyst_budget),
                "global_spent": epsilon_text(self.global_spent),
                "global_cap": epsilon_text(self.global_cap)}


class VerificationLedger:
    def __init__(self, path: Path, db: sqlite3.Connection):
        self.path, self._db = path, db

    @classmethod
    def open(cls, store: Path) -> "VerificationLedger":
        path = ledger_path(store)
        if not path.is_file():
            raise LedgerError(f"{store}: no verification ledger there; create one with "
                              f"`pseo-das verify-server init --store {store} --global-budget E`")
        db = sqlite3.connect(path, isolation_level=None, timeout=120, check_same_thread=False)
        info = dict(db.execute("SELECT key, value FROM verification_info").fetchall())
        if info.get("format") != FORMAT:
            db.close()
            raise LedgerError(f"{path}: not a {FORMAT}")
        return cls(path, db)

    def close(self) -> None:
        self._db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- writing ------------------------------------------------------------------------
    def _transaction(self):
        ledger = self

        class _Tx:
            def __enter__(self):
                ledger._db.execute("BEGIN IMMEDIATE")

            def __exit__(self, kind, *rest):
                ledger._db.execute("ROLLBACK" if kind else "COMMIT")
        return _Tx()

    def _append(self, table: str, values: dict) -> int:
        assert self._db.in_transaction and table in CHAINED
        names = ", ".join(values)
        cursor = self._db.execute(f"INSERT INTO {table} ({names}) VALUES "
                                  f"({', '.join('?' * len(values))})", tuple(values.values()))
        rowid = cursor.lastrowid
        cursor = self._db.execute(f"SELECT * FROM {table} WHERE rowid = ?", (rowid,))
        content = row_content([d[0] for d in cursor.description], cursor.fetchone())
        row = self._db.execute("SELECT seq, sha256 FROM chain ORDER BY seq DESC LIMIT 1").fetchone()
        seq, prev = (row[0] + 1, row[1]) if row else (1, GENESIS)
        self._db.execute("INSERT INTO chain VALUES (?, ?, ?, ?, ?)",
                         (seq, table, content, prev, chain_sha256(seq, prev, table, content)))
        return rowid

    # --- reading ------------------------------------------------------------------------
    @property
    def server_seed(self) -> bytes:
        """The seed, unsealed with the agency's seed key ($PSEO_DAS_SEED_KEY; SeedKeyError
        without it); a ledger of an earlier version kept it in plaintext."""
        sealed = self._info_or_none("sealed_seed")
        if sealed is None:
            return ReleaseSeed.from_hex(self._info("seed_hex")).bits
        key = required_key("the verification server's seed")
        check_key_outside(key, self.path.parent)
        seed = unseal(sealed, key, seed_context(self.server_id))
        if seed.sha256 != self._info("seed_sha256"):
            raise LedgerError(f"{self.path}: the sealed server seed does not hash to the "
                              "recorded seed_sha256")
        return seed.bits

    @property
    def seed_in_plaintext(self) -> bool:
        """A ledger of an earlier version: its server seed is not sealed."""
        return self._info_or_none("sealed_seed") is None

    @property
    def server_id(self) -> str:
        return self._info("server_id")

    def _info(self, key: str) -> str:
        return self._db.execute("SELECT value FROM verification_info WHERE key = ?",
                                (key,)).fetchone()[0]

    def _info_or_none(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM verification_info WHERE key = ?",
                               (key,)).fetchone()
        return None if row is None else row[0]

    def global_cap(self) -> Fraction:
        return Fraction(self._db.execute("SELECT global_cap FROM global_budgets ORDER BY budget "
                                         "DESC LIMIT 1").fetchone()[0])

    def analyst_of_token(self, token: str) -> str | None:
        row = self._db.execute("SELECT analyst FROM analysts WHERE token_sha256 = ?",
                               (token_sha256(token),)).fetchone()
        return row[0] if row else None

    def analyst_budget(self, analyst: str) -> Fraction:
        return Fraction(self._db.execute("SELECT budget FROM analysts WHERE analyst = ?",
                                         (analyst,)).fetchone()[0])

    def spent(self, analyst: str | None = None) -> Fraction:
        sql, params = "SELECT epsilon FROM queries", ()
        if analyst is not None:
            sql, params = sql + " WHERE analyst = ?", (analyst,)
        return sum((Fraction(e) for (e,) in self._db.execute(sql, params)), Fraction(0))

    def answer(self, query_sha: str) -> dict | None:
        row = self._db.execute("SELECT answer FROM answers WHERE query_sha256 = ?",
                               (query_sha,)).fetchone()
        return json.loads(row[0]) if row else None

    def table(self, name: str) -> list[dict]:
        cursor = self._db.execute(f"SELECT * FROM {name} ORDER BY rowid")
        columns = [d[0] for d in cursor.description]
        return [dict(zip(columns, row)) for row in cursor]

    # --- the budget -----------------------------------------------------------------------
    def add_analyst(self, name: str, budget, added_by: str) -> str:
        """Register an analyst with an epsilon budget; returns their token (shown once:
        only its SHA-256 is kept)."""
        exact = positive_epsilon(budget, f"budget of analyst {name}")
        if not name.strip():
            raise LedgerError("an analyst needs a name")
        # an access token, not noise: 256 bits from the OS (what secrets.token_urlsafe does)
        token = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
        with self._transaction():
            if self._db.execute("SELECT 1 FROM analysts WHERE analyst = ?", (name,)).fetchone():
                raise LedgerError(f"analyst {name!r} is already registered (the ledger is "
                                  "append-only: register another name)")
            self._append("analysts", {"analyst": name, "token_sha256": token_sha256(token),
                                      "budget": epsilon_text(exact), "added_by": added_by,
                                      "recorded_at": utc_now()})
        return token

    def check(self, analyst: str, query_sha: str, epsilon: Fraction) -> Charge:
        """What `charge` would do, charging nothing: the stored answer (no cost); no new
        cost if the query was charged before; BudgetRefused (logged) when charging it would
        exceed a budget; else the charge it would record."""
        with self._transaction():
            assessed = self._assess(analyst, query_sha, epsilon)
        if isinstance(assessed, BudgetRefused):
            raise assessed     # after the refusal's log entry is committed
        return assessed

    def charge(self, analyst: str, query_sha: str, canonical: str, epsilon: Fraction,
               answer: KeptAnswer | None = None) -> Charge:
        """In one transaction: the stored answer if there is one (no cost); else no new cost
        if the query was charged before; else check both budgets and record the charge; and
        `answer`, when given, kept with it (the server charges a computed answer before it
        leaves, so a query that fails or times out costs nothing). BudgetRefused (logged)
        when a budget would be exceeded."""
        with self._transaction():
            assessed = self._assess(analyst, query_sha, epsilon)
            if isinstance(assessed, Charge) and assessed.stored_answer is None:
                if assessed.charged:
                    self._append("queries", {"query_sha256": query_sha, "analyst": analyst,
                                             "canonical": canonical,
                                             "epsilon": epsilon_text(epsilon),
                                             "recorded_at": utc_now()})
                if answer is not None:
                    self._keep(query_sha, answer)
                    assessed = replace(assessed, stored_answer=answer.answer)
        if isinstance(assessed, BudgetRefused):
            raise assessed     # after the refusal's log entry is committed
        return assessed

    def _assess(self, analyst: str, query_sha: str, epsilon: Fraction) -> Charge | BudgetRefused:
        stored = self.answer(query_sha)
        known = self._db.execute("SELECT 1 FROM queries WHERE query_sha256 = ?",
                                 (query_sha,)).fetchone()
        budget, cap = self.analyst_budget(analyst), self.global_cap()
        mine, everyone = self.spent(analyst), self.spent()
        if stored is not None or known:
            return Charge(stored, Fraction(0), mine, budget, everyone, cap)
        problems = []
        if mine + epsilon > budget:
            problems.append(f"analyst {analyst}: spent {epsilon_text(mine)} + this query "
                            f"{epsilon_text(epsilon)} = {epsilon_text(mine + epsilon)}, over "
                            f"the budget {epsilon_text(budget)}")
        if everyone + epsilon > cap:
            problems.append(f"the server: spent {epsilon_text(everyone)} + this query "
                            f"{epsilon_text(epsilon)} = {epsilon_text(everyone + epsilon)}, "
                            f"over the global budget {epsilon_text(cap)}")
        if not problems:
            return Charge(None, epsilon, mine + epsilon, budget, everyone + epsilon, cap)
        message = ("refused: answering would exceed the epsilon budget (" + "; ".join(problems)
                   + "). Nothing was spent; a query already answered is still free to repeat.")
        refused = BudgetRefused(message)
        refused.request = self._append("requests", {
            "analyst": analyst, "query_sha256": query_sha, "outcome": Outcome.REFUSED_BUDGET,
            "epsilon_charged": "0", "detail": message, "recorded_at": utc_now()})
        return refused

    def _keep(self, query_sha: str, answer: KeptAnswer) -> None:
        self._append("answers", {"query_sha256": query_sha, "released_count": answer.released_count,
                                 "answer": json.dumps(answer.answer, sort_keys=True),
                                 "noise_stream": answer.noise_stream, "recorded_at": utc_now()})

    def log_request(self, analyst: str | None, query_sha: str | None, outcome: str,
                    charged: Fraction, detail: str = "") -> int:
        with self._transaction():
            return self._append("requests", {"analyst": analyst, "query_sha256": query_sha,
                                             "outcome": outcome, "epsilon_charged":
                                             epsilon_text(charged), "detail": detail,
                                             "recorded_at": utc_now()})


def seed_context(server_id: str) -> str:
    """What the server's sealed seed is bound to."""
    return f"verification server {server_id}"


def init_ledger(store: Path, global_cap, set_by: str, reason: str = "verification server "
                "created") -> Path:
    """Create the verification ledger in an existing privacy store, with a fresh 256-bit
    server seed and its global epsilon budget."""
    store = Path(store)
    if not store_exists(store):
        raise LedgerError(f"{store}: no privacy store there (create it with `pseo-das store "
                          f"init {store}`)")
    path = ledger_path(store)
    if path.exists():
        raise LedgerError(f"{path} already exists")
    problems = ledger_custody(store)
    if problems:
        raise LedgerError(problems[0])
    cap = positive_epsilon(global_cap, "global verification budget")
    key = required_key("creating the verification ledger (its server seed is sealed)")
    check_key_outside(key, store)
    temporary = path.with_name(f".{LEDGER}.tmp")
    temporary.unlink(missing_ok=True)
    write_private(temporary, b"")        # budgets and answers: its owner's only
    db = sqlite3.connect(temporary, isolation_level=None)
    try:
        db.executescript("BEGIN;" + SCHEMA + TRIGGERS + "COMMIT;")
        ledger = VerificationLedger(path, db)
        server_id, seed = uuid.uuid4().hex, ReleaseSeed.fresh()
        with ledger._transaction():
            for name, value in [("format", FORMAT), ("server_id", server_id),
                                ("sealed_seed", seal(seed, key, seed_context(server_id))),
                                ("seed_sha256", seed.sha256), ("created_at", utc_now())]:
                ledger._append("verification_info", {"key": name, "value": value})
            ledger._append("global_budgets", {"global_cap": epsilon_text(cap), "set_by": set_by,
                                              "reason": reason, "recorded_at": utc_now()})
    finally:
        db.close()
    try:
        os.link(temporary, path)       # never replaces a ledger created meanwhile
    except FileExistsError as exc:
        raise LedgerError(f"{path} already exists (created meanwhile)") from exc
    finally:
        temporary.unlink()
    with PrivacyStore.open(store) as opened:   # part of the store's chain from now on
        opened.record_info(LEDGER_KEY, server_id)
    return path


def plaintext_server_seed(store: Path) -> list[str]:
    """A warning when the store's ledger, of an earlier version, keeps its server seed in
    plaintext (MLflow-style: rows of an append-only ledger are never rewritten)."""
    with VerificationLedger.open(store) as ledger:
        plain = ledger.seed_in_plaintext
    return [f"{ledger_path(store)} was created by an earlier version and keeps the verification "
            "server's seed in plaintext: whoever reads it can regenerate the server's noise; "
            "keep it confidential"] if plain else []


def ledger_custody(store: Path) -> list[str]:
    """The verification ledger against the privacy store's record of it (store_info
    `verification_ledger`: the server id, recorded in the store's chain when the ledger was
    created): a ledger deleted, or deleted and initialised again (a fresh global budget and
    server seed), disagrees. Empty when they agree, or when the store records no ledger and
    has none."""
    with PrivacyStore.open(store) as opened:
        recorded = opened.info(LEDGER_KEY)
    path = ledger_path(store)
    if not path.is_file():
        return [] if recorded is None else [
            f"{path} is missing: the privacy store records verification ledger {recorded} "
            "(its budgets, answers and server seed); restore it from the agency's backup. A new "
            "ledger would reset the global budget and the seed, and answer stored queries with "
            "fresh noise."]
    with VerificationLedger.open(store) as ledger:
        server_id = ledger.server_id
    if recorded is not None and recorded != server_id:
        return [f"{path} is ledger {server_id}, the privacy store records ledger {recorded}: it "
                "was replaced (deleted and initialised again?); restore the recorded one"]
    return []


def check_ledger_custody(store: Path) -> None:
    """Refuse (LedgerError) a ledger the store does not record as its own; a ledger of an
    earlier version, which the store does not record yet, is recorded now."""
    problems = ledger_custody(store)
    if problems:
        raise LedgerError(problems[0])
    with PrivacyStore.open(store) as opened:
        if opened.info(LEDGER_KEY) is None and ledger_path(store).is_file():
            with VerificationLedger.open(store) as ledger:
                server_id = ledger.server_id
            opened.record_info(LEDGER_KEY, server_id)


def verify_ledger(store: Path) -> list[str]:
    """Problems of the ledger: its chain (continuity, SHA-256s), every row against the
    chain, and the append-only triggers. Empty when intact."""
    problems = []
    with VerificationLedger.open(store) as ledger:
        db = ledger._db
        triggers = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE "
                                                    "type = 'trigger'")}
        for table in APPEND_ONLY:
            for kind in ("update", "delete"):
                if f"{table}_no_{kind}" not in triggers:
                    problems.append(f"trigger {table}_no_{kind} was dropped (no longer append-only)")
        contents = {t: Counter() for t in CHAINED}
        prev_seq, prev_sha = 0, GENESIS
        for seq, entry, content, prev, sha in db.execute(
                "SELECT seq, entry, content, prev_sha256, sha256 FROM chain ORDER BY seq"):
            if seq != prev_seq + 1 or prev != prev_sha:
                problems.append(f"chain entry {seq}: does not follow entry {prev_seq}")
            if chain_sha256(seq, prev, entry, content) != sha:
                problems.append(f"chain entry {seq} ({entry}): SHA-256 does not match its content")
            contents.setdefault(entry, Counter())[content] += 1
            prev_seq, prev_sha = seq, sha
        for table in CHAINED:
            cursor = db.execute(f"SELECT * FROM {table}")
            columns = [d[0] for d in cursor.description]
            rows = Counter(row_content(columns, row) for row in cursor)
            for content in (rows - contents[table]).elements():
                problems.append(f"{table}: row not in the chain: {content[:120]}")
            for content in (contents[table] - rows).elements():
                problems.append(f"{table}: row of the chain is missing: {content[:120]}")
    return problems
