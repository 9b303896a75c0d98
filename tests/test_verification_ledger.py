"""The verification server's ledger in the privacy store: exact budgets, no double spend,
append-only and tamper-evident."""
from __future__ import annotations

import sqlite3
from fractions import Fraction

import pytest

from pseo_das.tasks.privacy.store import init_store
from pseo_das.tasks.privacy.store_integrity import verify_store
from pseo_das.tasks.verification.ledger import (BudgetRefused, KeptAnswer, LedgerError,
                                                VerificationLedger, init_ledger, ledger_path,
                                                verify_ledger)

SHA = [f"{i:064x}" for i in range(1, 10)]


@pytest.fixture
def store(tmp_path):
    path = init_store(tmp_path / "store")
    init_ledger(path, "1", "test")
    return path


def test_the_ledger_needs_a_privacy_store_and_is_created_once(tmp_path, store):
    with pytest.raises(LedgerError, match="no privacy store"):
        init_ledger(tmp_path / "nowhere", 1, "test")
    with pytest.raises(LedgerError, match="already exists"):
        init_ledger(store, 1, "test")
    assert verify_store(store).ok and verify_ledger(store) == []     # `store verify` still passes


def test_budgets_are_exact_and_a_charged_query_is_never_charged_again(store):
    with VerificationLedger.open(store) as ledger:
        token = ledger.add_analyst("ana", "2", "test")
        assert ledger.analyst_of_token(token) == "ana" and ledger.analyst_of_token("x") is None
        with pytest.raises(LedgerError, match="already registered"):
            ledger.add_analyst("ana", "1", "test")
        third = Fraction(1, 3)
        for sha in SHA[:3]:                                          # 1/3 + 1/3 + 1/3 = 1 = cap
            assert ledger.charge("ana", sha, "{}", third).charged == third
        with pytest.raises(BudgetRefused, match="over the global budget 1"):
            ledger.charge("ana", SHA[3], "{}", Fraction(1, 10**20))  # floats could not see it
        # charged but never answered (an earlier server crashed): kept now at no new cost
        kept = {"posterior": {"mode": 0.1}}
        retry = ledger.charge("ana", SHA[0], "{}", third, KeptAnswer(7, kept, "stream"))
        assert retry.charged == 0 and retry.stored_answer == kept
        again = ledger.charge("ana", SHA[0], "{}", third, KeptAnswer(8, {"other": 1}, "stream"))
        assert again.stored_answer == kept and again.charged == 0             # first one stays
        assert ledger.charge("ana", SHA[0], "{}", third).stored_answer == kept
        assert ledger.spent() == 1 and ledger.spent("ana") == 1
        outcomes = [r["outcome"] for r in ledger.table("requests")]
        assert outcomes == ["refused: budget"]                       # the refusal is logged


def test_the_ledger_is_append_only_and_a_rewritten_row_is_detected(store):
    with VerificationLedger.open(store) as ledger:
        ledger.add_analyst("ana", "1", "test")
        ledger.charge("ana", SHA[0], "{}", Fraction(1, 2))
    db = sqlite3.connect(ledger_path(store))
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        db.execute("UPDATE queries SET epsilon = '0.1'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        db.execute("DELETE FROM queries")
    db.execute("DROP TRIGGER queries_no_update")
    db.execute("UPDATE queries SET epsilon = '0.1'")
    db.commit()
    db.close()
    problems = verify_ledger(store)
    assert any("queries_no_update was dropped" in p for p in problems)
    assert any(p.startswith("queries: row not in the chain") for p in problems)
    assert any(p.startswith("queries: row of the chain is missing") for p in problems)


def test_store_verify_checks_the_verification_ledger_too(store, tmp_path, capsys):
    from pseo_das.cli import main
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with pytest.raises(SystemExit) as stop:
        main(["store", "verify", str(store), "--tracking-uri", uri])
    assert stop.value.code == 0
    db = sqlite3.connect(ledger_path(store))
    db.execute("DROP TRIGGER answers_no_delete")
    db.commit()
    db.close()
    with pytest.raises(SystemExit) as stop:
        main(["store", "verify", str(store), "--tracking-uri", uri])
    assert stop.value.code == 1
    assert "verification ledger: trigger answers_no_delete was dropped" in capsys.readouterr().err


def test_a_deleted_or_reinitialised_ledger_is_caught_and_refused(store, tmp_path, capsys):
    """The store records its ledger's server id in its chain: deleting verification.sqlite
    and initialising a new one (a fresh global budget and server seed) is refused by `init`,
    caught by `store verify`, and refused by the server at start (check_ledger_custody)."""
    from pseo_das.cli import main
    from pseo_das.tasks.privacy.store import PrivacyStore
    from pseo_das.tasks.verification.ledger import check_ledger_custody, ledger_custody
    with VerificationLedger.open(store) as ledger:
        original = ledger.server_id
    with PrivacyStore.open(store) as opened:
        assert opened.info("verification_ledger") == original
    check_ledger_custody(store)                                      # intact: no complaint
    saved = ledger_path(store).read_bytes()
    ledger_path(store).unlink()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with pytest.raises(SystemExit) as stop:
        main(["store", "verify", str(store), "--tracking-uri", uri])
    assert stop.value.code == 1 and "verification.sqlite is missing: the privacy store " \
        f"records verification ledger {original}" in capsys.readouterr().err
    with pytest.raises(LedgerError, match="restore it from the agency's backup"):
        init_ledger(store, "1", "test")
    assert not ledger_path(store).exists()
    other = init_store(tmp_path / "other")                           # a ledger made elsewhere,
    init_ledger(other, "5", "test")                                  # copied in its place
    ledger_path(store).write_bytes(ledger_path(other).read_bytes())
    (problem,) = ledger_custody(store)
    assert f"the privacy store records ledger {original}: it was replaced" in problem
    with pytest.raises(LedgerError, match="it was replaced"):
        check_ledger_custody(store)
    ledger_path(store).write_bytes(saved)                            # restored from a backup
    assert ledger_custody(store) == [] and verify_store(store).ok


def test_the_server_seed_is_sealed_with_the_agency_key(store, monkeypatch):
    """The ledger holds the server's seed sealed and its SHA-256, never the seed; the key
    opens it, and without the key the server cannot start."""
    import hashlib

    from pseo_das.tasks.privacy.seed_custody import SeedKeyError
    with VerificationLedger.open(store) as ledger:
        seed = ledger.server_seed
        info = dict(ledger._db.execute("SELECT key, value FROM verification_info").fetchall())
        assert not ledger.seed_in_plaintext
    assert len(seed) == 32 and info["seed_sha256"] == hashlib.sha256(seed).hexdigest()
    assert "seed_hex" not in info and info["sealed_seed"].startswith("aes-256-gcm:")
    content = ledger_path(store).read_bytes()
    assert seed not in content and seed.hex().encode() not in content
    monkeypatch.delenv("PSEO_DAS_SEED_KEY")
    with VerificationLedger.open(store) as ledger, pytest.raises(SeedKeyError, match="seed key"):
        ledger.server_seed
    with pytest.raises(SeedKeyError, match="seed key"):
        init_ledger(init_store(store.parent / "other"), "1", "test")


def test_a_ledger_of_an_earlier_version_keeps_its_plaintext_seed_with_a_warning(store, tmp_path,
                                                                                capsys):
    """An earlier version wrote `seed_hex` in plaintext: it is still read, and `store
    verify` warns (an append-only ledger's rows are never rewritten)."""
    from pseo_das.cli import main
    from pseo_das.tasks.verification.ledger import plaintext_server_seed
    db = sqlite3.connect(ledger_path(store))
    db.execute("DROP TRIGGER verification_info_no_delete")
    db.execute("DELETE FROM verification_info WHERE key IN ('sealed_seed', 'seed_sha256')")
    db.execute("INSERT INTO verification_info VALUES ('seed_hex', ?)", ("ab" * 32,))
    db.commit()
    db.close()
    with VerificationLedger.open(store) as ledger:
        assert ledger.seed_in_plaintext and ledger.server_seed == bytes.fromhex("ab" * 32)
    assert "keeps the verification server's seed in plaintext" in plaintext_server_seed(store)[0]
    with pytest.raises(SystemExit):
        main(["store", "verify", str(store), "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}"])
    printed = capsys.readouterr()
    assert "server's seed in plaintext" in printed.out + printed.err
