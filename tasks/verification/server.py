"""The verification server (FastAPI): token-authenticated analysts ask whether a regression
result holds in the confidential data. Privacy cost: each distinct query spends its epsilon
once, from the asking analyst's budget and the server's global budget, both checked and
charged in one transaction of the ledger that keeps the answer, before the answer leaves
the server; a repeated query is answered from the stored answer at no cost; a query that
would exceed a budget is refused (HTTP 403) and spends nothing; so does a query that fails
or is not answered within the time limit (its noisy count is never released).

    GET  /          a page to paste a query and read the posterior (with its plot)
    POST /verify    a query (JSON, schema at /docs); header Authorization: Bearer TOKEN
    GET  /budget    the analyst's spent and remaining epsilon
    GET  /docs      OpenAPI documentation

Bounds (limits.py), in the order a request meets them: the token, before any byte of the
body is read (401); the analyst's rate limit (429); the body's size (413, refused on its
declared Content-Length before reading); the query's schema and bounds (422: epsilon,
groups, trend periods within the data's cohorts, the model's terms and a group's design
matrix); the budget (403); then the measurement, in a worker thread off the event loop,
at most `concurrent_queries` at once, answered or refused (503) within `query_seconds`.
"""
from __future__ import annotations

import json
import math
import time
import weakref
from asyncio import Lock
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import anyio
import numpy as np
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from limits import parse
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from pydantic import ValidationError

from pseo_das.epsilon import epsilon_text
from pseo_das.reports.render import render_markdown
from pseo_das.tasks.verification.api_docs import serve_api_docs
from pseo_das.tasks.verification.groups import group_key, person_hashes
from pseo_das.tasks.verification.ledger import (BudgetRefused, Charge, KeptAnswer, Outcome,
                                                VerificationLedger, check_ledger_custody)
from pseo_das.tasks.verification.limits import DataBounds, ServerLimits
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
    cohort_years: tuple[int, int]
    session_log: SessionLog | None = None
    limits: ServerLimits = field(default_factory=ServerLimits)
    bounds: DataBounds = field(init=False)
    person_hash: np.ndarray = field(init=False)
    server_seed: bytes = b""
    _locks: weakref.WeakValueDictionary = field(default_factory=weakref.WeakValueDictionary)
    _rate: MovingWindowRateLimiter = field(
        default_factory=lambda: MovingWindowRateLimiter(MemoryStorage()))

    def __post_init__(self):
        check_ledger_custody(self.store)       # a deleted or re-initialised ledger: refused
        with VerificationLedger.open(self.store) as ledger:
            self.server_seed = ledger.server_seed
        self.person_hash = person_hashes(self.records.person_id, group_key(self.server_seed))
        self.bounds = DataBounds.of(self.records, *self.cohort_years)
        self.rate = parse(self.limits.rate_limit)
        self.compute_slots = anyio.CapacityLimiter(self.limits.concurrent_queries)

    def lock_of(self, query_sha: str) -> Lock:
        """One computation at a time per query (concurrent repeats wait for the answer)."""
        lock = self._locks.get(query_sha)
        if lock is None:
            lock = self._locks[query_sha] = Lock()
        return lock

    def within_rate(self, analyst: str) -> int:
        """0 when the analyst may ask now, else the seconds until they may."""
        if self._rate.hit(self.rate, analyst):
            return 0
        reset = self._rate.get_window_stats(self.rate, analyst).reset_time
        return max(1, math.ceil(reset - time.time()))

    def log(self, ledger: VerificationLedger, analyst, query_sha, outcome, charged, detail="",
            extra: dict | None = None, request: int | None = None) -> None:
        if request is None:
            request = ledger.log_request(analyst, query_sha, outcome, charged, detail)
        if self.session_log is not None:
            self.session_log.record({"request": request, "analyst": analyst,
                                     "query_sha256": query_sha, "outcome": outcome,
                                     "epsilon_charged": epsilon_text(charged), "detail": detail,
                                     **(extra or {})})

    async def refuse(self, status: int, analyst, query_sha, outcome, detail: str,
                     headers: dict | None = None, logged: str | None = None) -> HTTPException:
        """Log a refusal (nothing charged; `logged` when the log says more than the
        analyst is told) and return the HTTP error to raise."""
        def log():
            with VerificationLedger.open(self.store) as ledger:
                self.log(ledger, analyst, query_sha, outcome, 0, logged or detail)
        await anyio.to_thread.run_sync(log)
        return HTTPException(status, detail, headers=headers)

    async def answer(self, analyst: str, query: RegressionQuery) -> dict:
        """The stored answer, or a new measurement charged as it is kept."""
        canonical = query.canonical(self.records.data_version)
        sha = query_sha256(canonical)
        async with self.lock_of(sha):
            charge = await anyio.to_thread.run_sync(self._charge, analyst, query, sha, None)
            if charge.stored_answer is not None:
                return await anyio.to_thread.run_sync(self._reply, analyst, sha, charge,
                                                      Outcome.STORED)
            seconds = self.limits.query_seconds
            try:
                with anyio.fail_after(seconds):
                    measured = await anyio.to_thread.run_sync(
                        verify, self.records, self.person_hash, query, sha, self.server_seed,
                        time.monotonic() + seconds, abandon_on_cancel=True,
                        limiter=self.compute_slots)
            except TimeoutError:      # the time limit, or QueryTimeout from the worker
                raise await self.refuse(503, analyst, sha, Outcome.TIMED_OUT, (
                    f"not answered within the server's time limit of {seconds:g} s (busy, or a "
                    "query too large): nothing was charged; ask again later, or with fewer "
                    "groups, covariates or cohorts"), {"Retry-After": "60"}) from None
            except Exception as exc:     # its message may hold confidential values: logged only
                raise await self.refuse(500, analyst, sha, Outcome.FAILED, (
                    "the query failed on the server; nothing was charged"),
                    logged=repr(exc)) from exc
            kept = KeptAnswer(measured.released_count, {
                "query_sha256": sha, "canonical": canonical,
                "posterior": measured.posterior.as_dict()}, measured.entry.noise_stream)
            charge = await anyio.to_thread.run_sync(self._charge, analyst, query, sha, kept)
            outcome = (Outcome.ANSWERED if charge.charged else Outcome.RECOMPUTED
                       if charge.stored_answer is kept.answer else Outcome.STORED)
            return await anyio.to_thread.run_sync(self._reply, analyst, sha, charge, outcome)

    def _charge(self, analyst: str, query: RegressionQuery, sha: str,
                kept: KeptAnswer | None) -> Charge:
        """Without `kept`: check (the stored answer, or BudgetRefused); with it: charge."""
        with VerificationLedger.open(self.store) as ledger:
            try:
                if kept is None:
                    return ledger.check(analyst, sha, query.exact_epsilon)
                return ledger.charge(analyst, sha, canonical_text(
                    query.canonical(self.records.data_version)), query.exact_epsilon, kept)
            except BudgetRefused as exc:    # the ledger logged it already
                self.log(ledger, analyst, sha, Outcome.REFUSED_BUDGET, Fraction(0), str(exc),
                         request=exc.request)
                raise HTTPException(403, str(exc)) from exc

    def _reply(self, analyst: str, sha: str, charge: Charge, outcome: str) -> dict:
        answer = charge.stored_answer
        assert answer is not None, "replied with an answer"
        with VerificationLedger.open(self.store) as ledger:
            self.log(ledger, analyst, sha, outcome, charge.charged, extra={
                "canonical": answer["canonical"],
                "released_count": answer["posterior"]["released_count"],
                "mode": answer["posterior"]["mode"],
                "global_spent": epsilon_text(charge.global_spent)})
        return {**answer, "reused": outcome != Outcome.ANSWERED,
                "charged_epsilon": epsilon_text(charge.charged), "budget": charge.budget()}


bearer = HTTPBearer(auto_error=False)


class VerificationAPI(FastAPI):
    def openapi(self) -> dict:
        """FastAPI's schema with the query's: `query_of` reads the body after the token is
        checked, so FastAPI does not see the query as the body."""
        if self.openapi_schema is None:
            schema = super().openapi()
            query = RegressionQuery.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas = schema.setdefault("components", {}).setdefault("schemas", {})
            schemas.update(query.pop("$defs", {}))
            schemas["RegressionQuery"] = query
        return super().openapi()


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

    app = VerificationAPI(title="pseo-das verification server", lifespan=lifespan,
                          description=__doc__, docs_url=None, redoc_url=None)
    serve_api_docs(app)     # Swagger UI and ReDoc from the package: no CDN
    page = render_markdown("verify_page.html.j2", {
        "example_query": json.dumps(EXAMPLE_QUERY, indent=2), "default_groups": DEFAULT_GROUPS,
        "data_version": state.records.data_version})

    def analyst_of(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> str:
        """The analyst of the request's token (401), within their rate limit (429). Runs
        before any byte of the body is read."""
        with VerificationLedger.open(state.store) as ledger:
            analyst = ledger.analyst_of_token(credentials.credentials) if credentials else None
            if analyst is None:
                state.log(ledger, None, None, Outcome.REFUSED_AUTH, 0,
                          "no token" if credentials is None else "unknown token")
                raise HTTPException(401, "not authenticated: send the header 'Authorization: "
                                    "Bearer TOKEN' with a token from `pseo-das verify-server "
                                    "add-analyst`", headers={"WWW-Authenticate": "Bearer"})
            wait = state.within_rate(analyst)
            if wait:
                detail = (f"rate limit: at most {state.limits.rate_limit} requests per analyst; "
                          f"try again in {wait} s (nothing was charged)")
                state.log(ledger, analyst, None, Outcome.REFUSED_RATE, 0, detail)
                raise HTTPException(429, detail, headers={"Retry-After": str(wait)})
        return analyst

    async def query_of(request: Request, analyst: str = Depends(analyst_of)
                       ) -> tuple[str, RegressionQuery]:
        """The authenticated analyst's query: the body read up to its size limit (413),
        parsed and checked against the schema and the data's bounds (422)."""
        limit = state.limits.max_body_bytes
        declared = request.headers.get("content-length", "")
        too_large = (f"the request body is larger than the server's limit of {limit:,} bytes "
                     "(a query is a few hundred)")
        if declared.isdigit() and int(declared) > limit:
            raise await state.refuse(413, analyst, None, Outcome.REFUSED_LIMITS, too_large)
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise await state.refuse(413, analyst, None, Outcome.REFUSED_LIMITS, too_large)
        try:
            query = RegressionQuery.model_validate_json(bytes(body))
        except ValidationError as exc:
            errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
            await state.refuse(422, analyst, None, Outcome.REFUSED_LIMITS, str(exc)[:2000])
            raise RequestValidationError(errors) from None
        problems = state.bounds.refusals(query)
        if problems:
            raise await state.refuse(422, analyst, None, Outcome.REFUSED_LIMITS,
                                     "the query asks more than the server allows: "
                                     + "; ".join(problems))
        return analyst, query

    @app.get("/", response_class=HTMLResponse)
    async def index() -> str:
        return page

    @app.get("/budget")
    def budget(analyst: str = Depends(analyst_of)) -> dict:
        with VerificationLedger.open(state.store) as ledger:
            spent, total = ledger.spent(analyst), ledger.analyst_budget(analyst)
            return {"analyst": analyst, "spent": epsilon_text(spent),
                    "budget": epsilon_text(total), "remaining": epsilon_text(total - spent),
                    "global_spent": epsilon_text(ledger.spent()),
                    "global_cap": epsilon_text(ledger.global_cap())}

    @app.post("/verify", openapi_extra={"requestBody": {"required": True, "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/RegressionQuery"}}}}})
    async def verify_query(asked: tuple[str, RegressionQuery] = Depends(query_of)) -> dict:
        """Verify one coefficient (or trend): the noisy count and the posterior of r."""
        return await state.answer(*asked)

    return app
