"""The verification server's bounds, against a real `pseo-das verify-server` process on
127.0.0.1 (issue 31): queries that froze it are refused at once while the home page keeps
answering; a huge body is refused without being read; each analyst's rate limit; a query
past the time limit is refused and charged nothing. The server runs with a time limit of
1 ms, so every new measurement times out (the limits before it never compute anything)."""
from __future__ import annotations

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import psutil
import pytest

from conftest import verification_server
from pseo_das.tasks.verification.ledger import Outcome, VerificationLedger, verify_ledger

pytestmark = pytest.mark.slow  # a system test: the CLI serving in its own process (30 s)
ANALYSTS = {name: "5" for name in ("frozen0", "frozen1", "frozen2", "frozen3", "big", "rate",
                                   "slow")}
RATE = 20          # per minute and analyst


def query(**changes) -> dict:
    return {"outcome": "log_earnings", "covariates": ["degree_level", "cip2"],
            "references": {"degree_level": "05"}, "coefficient": "degree_level[07]",
            "interval": {"lower": 0.0}, "subset": {"years_after": [5]}, "groups": 50,
            "epsilon": "1", **changes}


TREND = {"covariates": ["degree_level"], "interval": None,
         "trend": [{"first": -2_000_000_000, "last": 2_000_000_000, "interval": {"lower": 0}}]}


@pytest.fixture(scope="module")
def server(synthetic_dir, tmp_path_factory):
    with verification_server(synthetic_dir, tmp_path_factory.mktemp("verification-limits"),
                             ANALYSTS, "--query-seconds", "0.001",
                             "--rate-limit", f"{RATE}/minute") as info:
        yield info


def ask(server, who: str, body, timeout: float = 30) -> httpx.Response:
    return httpx.post(f"{server['base']}/verify", json=body, timeout=timeout,
                      headers={"Authorization": f"Bearer {server['tokens'][who]}"})


def spent(server) -> tuple:
    with VerificationLedger.open(server["store"]) as ledger:
        return ledger.spent(), len(ledger.table("queries")), len(ledger.table("answers"))


def test_the_queries_that_froze_the_server_are_refused_at_once_while_it_keeps_answering(server):
    """Issue 31: "epsilon": "1e-99999999" froze the server for minutes, "1e-400" and trend
    periods -2e9..2e9 were charged and never returned (40 of them stopped it). Now 40 of
    them at once are refused in seconds, and GET / answers all along."""
    bodies = [query(epsilon="1e-99999999"), query(epsilon="1e-400"), query(epsilon="5e-324"),
              {**query(), **TREND}]
    asked = [(f"frozen{k % 4}", bodies[k % 4]) for k in range(40)]
    with ThreadPoolExecutor(max_workers=41) as pool:
        started = time.monotonic()
        futures = [pool.submit(ask, server, who, body) for who, body in asked]
        probes = []
        while not all(f.done() for f in futures) and time.monotonic() - started < 60:
            t = time.monotonic()
            page = httpx.get(f"{server['base']}/", timeout=10)
            probes.append((page.status_code, time.monotonic() - t))
        responses = [f.result() for f in futures]
        elapsed = time.monotonic() - started
    assert elapsed < 20, f"40 refusals took {elapsed:.1f} s"
    assert probes and all(code == 200 and seconds < 2 for code, seconds in probes), probes
    for (who, body), response in zip(asked, responses):
        assert response.status_code == 422, response.text
    details = {json.dumps(b, sort_keys=True): r.text for (_, b), r in zip(asked, responses)}
    texts = [details[json.dumps(b, sort_keys=True)] for b in bodies]
    assert "not an exact number written as a decimal or a fraction" in texts[0]
    assert "must be at least 0.001 and at most 10" in texts[1] and "5e-324" in texts[2]
    assert "trend period -2000000000-2000000000 is outside the data's cohorts 2001-2022" \
        in texts[3]
    assert spent(server) == (0, 0, 0)
    with VerificationLedger.open(server["store"]) as ledger:
        outcomes = [r["outcome"] for r in ledger.table("requests")]
    assert outcomes.count(Outcome.REFUSED_LIMITS) >= 40           # each refusal logged


@pytest.mark.parametrize("changes, field", [
    ({"epsilon": 5e-324}, "epsilon"),                               # a JSON number this time
    ({"epsilon": "11"}, "epsilon"),
    ({"epsilon": "١"}, "epsilon"),                                  # an Arabic-Indic digit
    ({"groups": 1001}, "groups"),
    ({"covariates": ["degree_level", "cip4", "institution", "emp_state", "industry"],
      "groups": 2}, "design matrix"),
    ({**TREND, "trend": [{"first": 2010, "last": 2030, "interval": {"lower": 0}}]},
     "outside the data's cohorts"),
    ({"subset": {"years_after": [10**19]}}, "years_after"),
])
def test_queries_outside_the_bounds_are_refused_before_any_charge(server, changes, field):
    response = ask(server, "big", query(**changes))
    assert response.status_code == 422 and field in response.text, response.text
    assert spent(server) == (0, 0, 0)


def raw_post(server, headers: str, body_bytes: int) -> tuple[str, float]:
    """A POST /verify declaring Content-Length 300 MB, sending `body_bytes` of it: the
    server's status line and how long it took to come."""
    with socket.create_connection(("127.0.0.1", server["port"]), timeout=10) as s:
        started = time.monotonic()
        s.sendall(f"POST /verify HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                  f"\r\nContent-Length: 300000000\r\n{headers}\r\n".encode())
        s.sendall(b"{" + b" " * body_bytes)
        status = s.recv(4096).split(b"\r\n", 1)[0].decode()
        return status, time.monotonic() - started


def test_a_300_mb_body_is_refused_without_being_read(server):
    """Four unauthenticated 300 MB posts took the server from 0.5 to 3.0 GB: now the token
    is checked before any byte of the body is read (401), and an analyst's oversized body
    is refused on its declared length (413); the server's memory does not grow."""
    process = psutil.Process(server["process"].pid)
    before = process.memory_info().rss
    for _ in range(4):
        status, seconds = raw_post(server, "", 4 << 20)
        assert status == "HTTP/1.1 401 Unauthorized" and seconds < 5
    token = server["tokens"]["big"]
    status, seconds = raw_post(server, f"Authorization: Bearer {token}\r\n", 4 << 20)
    assert status == "HTTP/1.1 413 Request Entity Too Large" and seconds < 5
    assert process.memory_info().rss - before < 50 << 20
    assert httpx.get(f"{server['base']}/", timeout=10).status_code == 200
    with VerificationLedger.open(server["store"]) as ledger:
        refused = ledger.table("requests")[-1]
    assert refused["analyst"] == "big" and "larger than the server's limit" in refused["detail"]


def test_each_analyst_has_a_rate_limit(server):
    headers = {"Authorization": f"Bearer {server['tokens']['rate']}"}
    codes = [httpx.get(f"{server['base']}/budget", headers=headers, timeout=10)
             for _ in range(RATE + 1)]
    assert [r.status_code for r in codes] == [200] * RATE + [429]
    assert 1 <= int(codes[-1].headers["Retry-After"]) <= 60
    assert f"at most {RATE}/minute requests per analyst" in codes[-1].json()["detail"]
    slow = {"Authorization": f"Bearer {server['tokens']['slow']}"}        # another analyst
    assert httpx.get(f"{server['base']}/budget", headers=slow, timeout=10).status_code == 200


def test_a_query_past_the_time_limit_is_refused_and_charges_nothing(server):
    for _ in range(2):
        started = time.monotonic()
        response = ask(server, "slow", query(groups=1000))
        assert time.monotonic() - started < 5
        assert response.status_code == 503, response.text
        assert "time limit of 0.001 s" in response.json()["detail"]
        assert "nothing was charged" in response.json()["detail"]
        assert response.headers["Retry-After"] == "60"
    assert spent(server) == (0, 0, 0)
    with VerificationLedger.open(server["store"]) as ledger:
        assert ledger.spent("slow") == 0
        logged = [r for r in ledger.table("requests") if r["analyst"] == "slow"
                  and r["outcome"] == Outcome.TIMED_OUT]
    assert len(logged) == 2 and all(r["epsilon_charged"] == "0" for r in logged)
    assert httpx.get(f"{server['base']}/", timeout=10).status_code == 200
    assert verify_ledger(server["store"]) == []
