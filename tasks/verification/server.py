"""The verification server (FastAPI): token-authenticated analysts ask whether a regression
result holds in the confidential data. Privacy cost: each distinct query spends its epsilon
once, from the asking analyst's budget and the server's global budget (both checked and
charged in one transaction of the ledger before any noise is drawn); a repeated query is
answered from the stored answer at no cost; a query that would exceed a budget is refused
(HTTP 403) and spends nothing.

    GET  /          a page to paste a query and read the posterior (with its plot)
    POST /verify    a query (JSON, schema at /docs); header Authorization: Bearer TOKEN
    GET  /budget    the analyst's spent and remaining epsilon
    GET  /docs      OpenAPI documentation
"""
from __future__ import annotations

import json
import threading
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import HTMLResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from pseo_das.epsilon import epsilon_text
from pseo_das.reports.render import render_markdown
from pseo_das.tasks.verification.groups import group_key, person_hashes
from pseo_das.tasks.verification.ledger import (BudgetRefused, Outcome, VerificationLedger,
                                               check_ledger_custody)
from pseo_das.tasks.verification.measure import verify
from pseo_das.tasks.verification.query import (DEFAULT_GROUPS, RegressionQuery, canonical_text,
                                               query_sha256)
from pseo_das.tasks.verification.records import AnalysisRecords
from pseo_das.tasks.verification.session_log import SessionLog

EXAMPLE_QUERY = {
    "outcome": "log_earnings",
    "covariates": ["degree_level", "cip2", "grad_year"],
    "references": {"degree_level": "05"},
    "coefficient": "degree_level[07]",
    "interval": {"lower": 0.0},
    "subset": {"years_after": [5]},
    "groups": DEFAULT_GROUPS,
    "epsilon": "1",
}


@dataclass
class ServerState:
    store: Path
    records: AnalysisRecords
    session_log: SessionLog | None = None
    person_hash: object = None
    server_seed: bytes = b""
    _locks: dict = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self):
        check_ledger_custody(self.store)       # a deleted or re-initialised ledger: refused
        with VerificationLedger.open(self.store) as ledger:
            self.server_seed = ledger.server_seed
        self.person_hash = person_hashes(self.records.person_id, group_key(self.server_seed))

    def lock_of(self, query_sha: str) -> threading.Lock:
        """One computation at a time per query (concurrent repeats wait for the answer)."""
        with self._guard:
            return self._locks.setdefault(query_sha, threading.Lock())

    def log(self, ledger: VerificationLedger, analyst, query_sha, outcome, charged, detail="",
            extra: dict | None = None) -> None:
        request = ledger.log_request(analyst, query_sha, outcome, charged, detail)
        if self.session_log is not None:
            self.session_log.record({"request": request, "analyst": analyst,
                                     "query_sha256": query_sha, "outcome": outcome,
                                     "epsilon_charged": epsilon_text(charged), "detail": detail,
                                     **(extra or {})})


bearer = HTTPBearer(auto_error=False)


def create_app(state: ServerState) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        if state.session_log is not None:
            with VerificationLedger.open(state.store) as ledger:
                summary = {"requests": len(ledger.table("requests")),
                           "global_spent": epsilon_text(ledger.spent()),
                           "global_cap": epsilon_text(ledger.global_cap())}
            state.session_log.close(summary)

    app = FastAPI(title="pseo-das verification server", lifespan=lifespan,
                  description=__doc__)
    page = render_markdown("verify_page.html.j2", {
        "example_query": json.dumps(EXAMPLE_QUERY, indent=2), "default_groups": DEFAULT_GROUPS,
        "data_version": state.records.data_version})

    def analyst_of(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> str:
        with VerificationLedger.open(state.store) as ledger:
            analyst = ledger.analyst_of_token(credentials.credentials) if credentials else None
            if analyst is None:
                state.log(ledger, None, None, Outcome.REFUSED_AUTH, 0,
                          "no token" if credentials is None else "unknown token")
                raise HTTPException(401, "not authenticated: send the header 'Authorization: "
                                    "Bearer TOKEN' with a token from `pseo-das verify-server "
                                    "add-analyst`", headers={"WWW-Authenticate": "Bearer"})
        return analyst

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        return page

    @app.get("/budget")
    def budget(analyst: str = Depends(analyst_of)) -> dict:
        with VerificationLedger.open(state.store) as ledger:
            spent, total = ledger.spent(analyst), ledger.analyst_budget(analyst)
            return {"analyst": analyst, "spent": epsilon_text(spent),
                    "budget": epsilon_text(total), "remaining": epsilon_text(total - spent),
                    "global_spent": epsilon_text(ledger.spent()),
                    "global_cap": epsilon_text(ledger.global_cap())}

    @app.post("/verify")
    def verify_query(query: RegressionQuery, analyst: str = Depends(analyst_of)) -> dict:
        """Verify one coefficient (or trend): the noisy count and the posterior of r."""
        canonical = query.canonical(state.records.data_version)
        sha = query_sha256(canonical)
        with state.lock_of(sha), VerificationLedger.open(state.store) as ledger:
            try:
                charge = ledger.charge(analyst, sha, canonical_text(canonical), query.exact_epsilon)
            except BudgetRefused as exc:
                if state.session_log is not None:   # the ledger logged it already
                    state.session_log.record({"request": exc.request,
                                              "analyst": analyst, "query_sha256": sha,
                                              "outcome": Outcome.REFUSED_BUDGET,
                                              "epsilon_charged": "0", "detail": str(exc)})
                raise HTTPException(403, str(exc)) from exc
            answer, outcome = charge.stored_answer, Outcome.STORED
            if answer is None:
                try:
                    measured = verify(state.records, state.person_hash, query, sha,
                                      state.server_seed)
                except Exception as exc:
                    state.log(ledger, analyst, sha, Outcome.FAILED, charge.charged, repr(exc))
                    raise
                answer = ledger.keep_answer(sha, measured.released_count, {
                    "query_sha256": sha, "canonical": canonical,
                    "posterior": measured.posterior.as_dict()}, measured.entry.noise_stream)
                outcome = Outcome.ANSWERED if charge.charged else Outcome.RECOMPUTED
            state.log(ledger, analyst, sha, outcome, charge.charged, extra={
                "canonical": canonical, "released_count": answer["posterior"]["released_count"],
                "mode": answer["posterior"]["mode"], "global_spent":
                epsilon_text(charge.global_spent)})
            return {**answer, "reused": outcome != Outcome.ANSWERED,
                    "charged_epsilon": epsilon_text(charge.charged), "budget": charge.budget()}

    return app
