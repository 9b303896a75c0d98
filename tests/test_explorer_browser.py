"""The release explorer in a real browser: Debian's chromium (`apt-get install chromium`),
driven headlessly by Playwright pointed at it (`playwright` is a test extra; no browser
download). Without either, every test here is skipped and says why (pytest -ra prints it);
tests/test_explorer.py still checks the data files and the page's local references.

Checked: the page loads from disk with no console error and no request outside its
folder; a chosen cell shows the p50 of its pseoe_all.csv row, a suppressed one the word
"suppressed"; the flow diagram's links out of the graduates add up to the published pseof
row; the tabs answer the keyboard; the page fits a phone's width. A screenshot of each view
goes to $PSEO_DAS_EXPLORER_SCREENSHOTS (the docs' pictures) or the test's folder."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import csv_fields, public_table
from test_explorer import INSTITUTION, STATE, tiny_release
from pseo_das.tasks.publication.explorer import EXPLORER, write_release_explorers

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
VIEWS = ("earnings", "histogram", "flows", "counts", "board")
DESKTOP, PHONE = {"width": 1280, "height": 900}, {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("browser tests skipped: playwright is not installed (pip install -e '.[test]')")
    if CHROMIUM is None:
        pytest.skip("browser tests skipped: no chromium on PATH (Debian: apt-get install chromium)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                              args=["--no-sandbox"])
        yield chromium
        chromium.close()


class Page:
    """One page of an explorer folder, with its console errors and requests."""

    def __init__(self, browser, folder: Path, viewport: dict = DESKTOP):
        self.folder = folder.resolve()
        self.page = browser.new_page(viewport=viewport)
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        started = time.perf_counter()
        self.page.goto((self.folder / "index.html").as_uri())
        self.page.wait_for_selector("body[data-ready]", timeout=60_000)
        self.load_seconds = time.perf_counter() - started

    def outside(self) -> list[str]:
        return [u for u in self.requests if not u.startswith(self.folder.as_uri() + "/")]

    def ready(self, text: str) -> None:
        self.page.wait_for_function(f"(document.body.dataset.ready || '').includes({text!r})",
                                    timeout=60_000)

    def choose(self, state: str, unit: str, degree: str, cip: str, cohort: str,
               years: int = 1) -> None:
        p = self.page
        if p.input_value("#state") != state:
            p.select_option("#state", state)
            self.ready(f"|{state}|" if len(unit) == 2 else "|")
        if p.input_value("#unit") != unit:
            p.select_option("#unit", unit)
        self.ready(f"|{unit}|")
        p.select_option("#years", str(years))
        p.select_option("#degree", degree)
        p.select_option("#field", cip)
        p.select_option("#cohort", cohort)
        self.ready(f"{degree}|{cip}|{cohort}|{unit}|")

    def tab(self, view: str) -> None:
        self.page.click(f"#tab-{view}")
        self.ready(f"|{view}")

    def text(self, selector: str) -> str:
        return self.page.inner_text(selector).strip()

    def flow_links(self) -> dict:
        return self.page.evaluate("""() => {
            const d = document.getElementById('flows-chart').data[0];
            const out = {}; const labels = d.node.label;
            d.link.source.forEach((s, n) => { if (s === 0) out[labels[d.link.target[n]]] = d.link.value[n]; });
            return out; }""")


def dollars(text: str) -> int:
    return int(text.replace("$", "").replace(",", ""))


def screenshots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("PSEO_DAS_EXPLORER_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_the_tiny_release_in_the_browser(browser, tmp_path):
    release = tiny_release(tmp_path / "release")
    _, internal = write_release_explorers(release)
    page = Page(browser, internal)
    page.choose(STATE, INSTITUTION, "05", "00", "0000", years=5)
    assert dollars(page.text('#earnings-table td[data-field="y1_p50_earnings"]')) == 40001
    assert page.text('#earnings-table td[data-field="y5_p50_earnings"]') == "suppressed"
    assert page.text('#earnings-table td[data-field="y10_p50_earnings"]') == "not available"
    assert dollars(page.text('#earnings-table td[data-field="state_y1_p50_earnings"]')) == 50001
    page.tab("flows")
    assert page.flow_links() == {"Agriculture, Forestry, Fishing and Hunting": 5,
                                 "Construction": 10, "Health Care and Social Assistance": 15,
                                 "Not employed": 7}
    assert "suppressed" in page.text("#flows-division-table")
    page.tab("histogram")
    assert page.text('#histogram-table td[data-field="bin3"]') == "13"
    page.tab("board")
    assert "30-49" in page.text("#accuracy-table") and "6/5" in page.text("#epsilon-table")
    # keyboard: the arrow keys move between the tabs
    page.page.focus("#tab-board")
    page.page.keyboard.press("ArrowLeft")
    assert page.page.get_attribute("#tab-counts", "aria-selected") == "true"
    assert page.page.evaluate("document.activeElement.id") == "tab-counts"
    labelled = page.page.evaluate(
        "[...document.querySelectorAll('select')].every(s => document.querySelector(`label[for=${s.id}]`))")
    assert labelled
    assert page.errors == [] and page.outside() == []
    public = Page(browser, release / "public" / EXPLORER)
    assert public.page.is_hidden("#tab-board") and public.errors == []


@pytest.fixture(scope="module")
def demo(releases) -> Path:
    root, _ = releases
    return root / "a"


def _first(frame: pd.DataFrame, **where) -> pd.Series:
    rows = frame
    for column, value in where.items():
        rows = rows[rows[column] == value]
    return rows.iloc[0]


def test_the_release_explorer_in_the_browser(browser, demo, tmp_path):
    shots = screenshots(tmp_path)
    page = Page(browser, demo / "internal" / EXPLORER)
    print(f"the demo release's explorer loaded in {page.load_seconds:.2f} s")
    assert page.load_seconds < 20
    pseoe = pd.read_csv(public_table(demo, "pseoe_all.csv"), dtype=str, keep_default_na=False)
    institutions = pd.read_csv(public_table(demo, "pseo_all_institutions.csv"), dtype=str)
    state_of = dict(zip(institutions["institution"], institutions["statefips"]))
    published = _first(pseoe, inst_level="I", cip_level="4", status_y1_earnings="1")
    page.choose(state_of[published.institution], published.institution, published.degree_level,
                published.cipcode, published.grad_cohort)
    assert dollars(page.text('#earnings-table td[data-field="y1_p50_earnings"]')) == \
        int(published.y1_p50_earnings)
    suppressed = _first(pseoe, inst_level="I", status_y1_earnings="5")
    page.choose(state_of[suppressed.institution], suppressed.institution,
                suppressed.degree_level, suppressed.cipcode, suppressed.grad_cohort)
    assert page.text('#earnings-table td[data-field="y1_p50_earnings"]') == "suppressed"
    pseof = csv_fields(public_table(demo, "pseof_all.csv")).to_pandas()
    pseof = pseof[~pseof["y5_grads_emp"].isin(["", "0"])]          # a cell with a diagram
    origin = _first(pseof, inst_level="I", cip_level="2", geo_level="N", industry="00",
                    status_y5_grads_emp="1", status_y5_grads_nme="1")
    page.choose(state_of[origin.institution], origin.institution, origin.degree_level,
                origin.cipcode, origin.grad_cohort, years=5)
    page.tab("flows")
    links = page.flow_links()
    assert links.pop("Not employed", 0) == int(origin.y5_grads_nme)
    assert sum(links.values()) == int(origin.y5_grads_emp)          # sectors add up to the row
    assert int(page.text('#flows-industry-table td[data-field="y5_grads_emp"]').replace(",", "")) \
        == int(origin.y5_grads_emp)
    for view in VIEWS:
        page.tab(view)
        page.page.screenshot(path=str(shots / f"explorer-{view}.png"), full_page=True)
    phone = Page(browser, demo / "public" / EXPLORER, PHONE)
    phone.choose(state_of[published.institution], published.institution,
                 published.degree_level, published.cipcode, published.grad_cohort)
    assert phone.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    phone.page.screenshot(path=str(shots / "explorer-phone.png"), full_page=True)
    assert page.errors == [] and phone.errors == []
    assert page.outside() == [] and phone.outside() == []
