"""The verification server, for real: `pseo-das verify-server` started as a process on
127.0.0.1 (uvicorn), queried over HTTP with analysts' tokens. The page at / is checked over
HTTP and its own script is run by node against the live server with a stubbed DOM; the API
docs are rendered by headless chromium where it is installed."""
from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from conftest import verification_server
from pseo_das.tasks.verification.ledger import VerificationLedger, verify_ledger

pytestmark = pytest.mark.slow  # a system test: the CLI serving in its own process
GLOBAL_CAP = 8


def query(lower: float = 0.0, epsilon: str = "1", **changes) -> dict:
    return {"outcome": "log_earnings", "covariates": ["degree_level", "cip2"],
            "references": {"degree_level": "05"}, "coefficient": "degree_level[07]",
            "interval": {"lower": lower}, "subset": {"years_after": [5]}, "groups": 50,
            "epsilon": epsilon, **changes}


@pytest.fixture(scope="module")
def server(synthetic_dir, tmp_path_factory):
    with verification_server(synthetic_dir, tmp_path_factory.mktemp("verification"),
                             {"alice": "2", "bob": "3", "carol": "100"},
                             "--rate-limit", "1000/minute") as info:
        yield info


def ask(server, who: str | None, body: dict, token: str | None = None) -> httpx.Response:
    headers = {}
    if who or token:
        headers["Authorization"] = f"Bearer {token or server['tokens'][who]}"
    return httpx.post(f"{server['base']}/verify", json=body, headers=headers, timeout=120)


def test_requests_without_a_valid_token_are_refused_and_spend_nothing(server):
    for response in (ask(server, None, query()), ask(server, None, query(), token="not-a-token")):
        assert response.status_code == 401
        assert "Authorization: Bearer" in response.json()["detail"]
    assert httpx.get(f"{server['base']}/budget", timeout=10).status_code == 401
    with VerificationLedger.open(server["store"]) as ledger:
        assert ledger.spent() == 0


def test_the_page_and_the_openapi_docs_are_served(server):
    page = httpx.get(f"{server['base']}/", timeout=10)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'id="query"' in page.text and "fetch(\"/verify\"" in page.text and "<svg" in page.text
    assert '"coefficient": "degree_level[07]"' in page.text     # an example query to start from
    spec = httpx.get(f"{server['base']}/openapi.json", timeout=10).json()
    assert "/verify" in spec["paths"] and "RegressionQuery" in json.dumps(spec)


class _References(HTMLParser):
    """Every URL a page loads: src and href attributes, and Swagger UI's spec `url:`."""
    def __init__(self):
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.urls += [value for name, value in attrs if name in ("src", "href", "spec-url")]

    def handle_data(self, data):
        self.urls += re.findall(r"url: '([^']+)'", data)


@pytest.mark.parametrize("page, ui", [("/docs", "SwaggerUIBundle"), ("/redoc", "<redoc")])
def test_the_api_docs_load_only_what_the_server_serves(server, page, ui):
    """Without network access the API documentation still works (issue 36, item 6): every
    asset the page references is a path of this server, and the server serves it."""
    response = httpx.get(f"{server['base']}{page}", timeout=10)
    assert response.status_code == 200 and ui in response.text
    references = _References()
    references.feed(response.text)
    assert len(references.urls) >= 2, references.urls      # the script, the spec, ...
    for url in references.urls:
        assert url.startswith("/") and not url.startswith("//"), f"{page} loads {url}"
        asset = httpx.get(f"{server['base']}{url}", timeout=10)
        assert asset.status_code == 200 and len(asset.content) > 0, url
    assert "cdn." not in response.text and "fonts.googleapis" not in response.text


@pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium installed")
@pytest.mark.parametrize("page, rendered", [("/docs", 'class="opblock-summary-path" data-path="/verify"'),
                                            ("/redoc", "/verify")])
def test_a_browser_without_network_renders_the_api_docs(server, page, rendered):
    """Headless chromium with every non-local address sent to a dead proxy: the pages'
    scripts still run and draw the API's operations."""
    dom = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                          "--proxy-server=http://127.0.0.1:9", "--dump-dom",
                          "--virtual-time-budget=20000", f"{server['base']}{page}"],
                         capture_output=True, text=True, timeout=180).stdout
    assert rendered in dom, dom[-2000:]


def test_the_same_query_gets_the_same_stored_answer_at_no_new_cost(server):
    first = ask(server, "alice", query())
    assert first.status_code == 200, first.text
    answer = first.json()
    assert (answer["charged_epsilon"], answer["reused"]) == ("1", False)
    assert answer["budget"] == {"analyst_spent": "1", "analyst_budget": "2",
                                "global_spent": "1", "global_cap": "8"}
    posterior = answer["posterior"]
    assert posterior["groups"] == 50 and 0 <= posterior["mode"] <= 1
    assert posterior["interval_95"][0] <= posterior["mean"] <= posterior["interval_95"][1]
    reordered = query(covariates=["cip2", "degree_level"])            # the same canonical query
    for who, body in [("alice", query()), ("alice", reordered), ("bob", query())]:
        again = ask(server, who, body).json()
        assert again["posterior"] == posterior and again["query_sha256"] == answer["query_sha256"]
        assert (again["charged_epsilon"], again["reused"]) == ("0", True)
    with VerificationLedger.open(server["store"]) as ledger:
        assert ledger.spent() == 1 and ledger.spent("alice") == 1 and ledger.spent("bob") == 0


def test_a_query_over_the_analysts_budget_is_refused_and_spends_nothing(server):
    assert ask(server, "alice", query(lower=0.05)).status_code == 200      # alice: 2 of 2
    refused = ask(server, "alice", query(lower=0.1, epsilon="1/2"))
    assert refused.status_code == 403
    assert "analyst alice: spent 2 + this query 0.5 = 2.5, over the budget 2" in refused.json()["detail"]
    budget = httpx.get(f"{server['base']}/budget", timeout=10,
                       headers={"Authorization": f"Bearer {server['tokens']['alice']}"}).json()
    assert (budget["spent"], budget["remaining"], budget["global_spent"]) == ("2", "0", "2")
    assert ask(server, "alice", query()).status_code == 200                # repeats stay free


def test_an_invalid_query_is_refused_with_the_field_named(server):
    response = ask(server, "bob", query(coefficient="cip2[99"))
    assert response.status_code == 422 and "coefficient" in response.text
    response = ask(server, "bob", query(epsilon="-1"))
    assert response.status_code == 422 and "epsilon" in response.text


NODE_DOM = """
const elements = {};
function element(id) { return elements[id] || (elements[id] = {id, value: "", innerHTML: ""}); }
globalThis.document = {getElementById: element};
const realFetch = globalThis.fetch;
globalThis.fetch = (url, options) => realFetch(process.env.BASE + url, options);
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="no JavaScript engine (node) here")
def test_the_pages_script_asks_the_server_and_draws_the_posterior(server, tmp_path):
    """No headless browser installs here: the page's own script runs in node against the
    live server, with document.getElementById stubbed (the form's fields and the plot)."""
    page = httpx.get(f"{server['base']}/", timeout=10).text
    script = page.split("<script>", 1)[1].split("</script>", 1)[0]
    example = json.loads(page.split('<textarea id="query">', 1)[1].split("</textarea>", 1)[0]
                         .replace("&#34;", '"').replace("&quot;", '"'))
    driver = tmp_path / "page.mjs"

    def run(token: str) -> dict:
        driver.write_text(NODE_DOM + script + f"""
element("token").value = {json.dumps(token)};
element("query").value = {json.dumps(json.dumps(example))};
await ask();
console.log(JSON.stringify({{answer: element("answer").innerHTML, plot: element("plot").innerHTML}}));
""")
        done = subprocess.run(["node", str(driver)], capture_output=True, text=True, timeout=120,
                              env={"BASE": server["base"], "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    shown = run(server["tokens"]["bob"])
    assert "posterior mode of r" in shown["answer"] and "P(r &gt; 0.5)" in shown["answer"]
    assert "<polyline" in shown["plot"] and shown["plot"].count(",") > 200   # 201 points
    refused = run("wrong-token")
    assert "401" in refused["answer"] and "not authenticated" in refused["answer"]
    assert refused["plot"] == ""


def test_200_concurrent_queries_are_answered_or_refused_cleanly_within_the_global_budget(server):
    with VerificationLedger.open(server["store"]) as ledger:
        before_requests, before_spent = len(ledger.table("requests")), ledger.spent()
    assert before_spent == 3          # alice 2, bob 1 (the page's example query)
    bodies = [("carol", query(lower=0.2 + 0.01 * k)) for k in range(10) for _ in range(17)]
    bodies += [("bob", query())] * 20 + [(None, query())] * 10              # 200 requests
    with ThreadPoolExecutor(max_workers=50) as pool:
        responses = list(pool.map(lambda item: ask(server, *item), bodies))
    codes = [r.status_code for r in responses]
    assert set(codes) <= {200, 401, 403} and len(codes) == 200
    assert codes.count(401) == 10
    answers: dict[str, set] = {}
    for (who, body), response in zip(bodies, responses):
        if response.status_code == 200:
            answers.setdefault(json.dumps(body, sort_keys=True), set()).add(
                json.dumps(response.json()["posterior"], sort_keys=True))
        elif response.status_code == 403:
            assert "over the global budget 8" in response.json()["detail"]
    assert all(len(found) == 1 for found in answers.values())            # one answer per query
    carol_answered = [k for k in answers if json.loads(k)["interval"]["lower"] >= 0.2]
    assert len(carol_answered) == GLOBAL_CAP - 3                          # 5 of 10 new queries
    with VerificationLedger.open(server["store"]) as ledger:
        assert ledger.spent() == GLOBAL_CAP and ledger.spent("carol") == 5  # never over the cap
        assert len(ledger.table("requests")) == before_requests + 200     # every request logged
        assert len(ledger.table("answers")) == len(ledger.table("queries")) == GLOBAL_CAP
        total_requests = len(ledger.table("requests"))
    assert verify_ledger(server["store"]) == []
    # stop the server: the session's MLflow run gets every request, then ends FINISHED
    server["process"].send_signal(signal.SIGINT)
    assert server["process"].wait(60) == 0, server["log"].read_text()
    from mlflow.tracking import MlflowClient
    client = MlflowClient(server["uri"])
    run, = client.search_runs([client.get_experiment_by_name("pseo-das verification server")
                               .experiment_id])
    assert run.info.status == "FINISHED"
    logged = client.list_artifacts(run.info.run_id, "requests")
    assert len(logged) == total_requests
    spent = client.get_metric_history(run.info.run_id, "epsilon.verification_spent")
    assert max(m.value for m in spent) == GLOBAL_CAP
    assert Fraction(json.loads(client.download_artifacts(run.info.run_id, "session_summary.json")
                               and Path(client.download_artifacts(run.info.run_id,
                                                                  "session_summary.json"))
                               .read_text())["global_spent"]) == GLOBAL_CAP
