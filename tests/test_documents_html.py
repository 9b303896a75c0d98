"""The release's documents render as written (issue 36, item 4): the release notes (with
the certificate) and the DRB report of a real release, as the release writes them in
Markdown and HTML, checked with an HTML parser (tests/rendered_html.py; the audit report is
checked in test_audit_command.py; the study reports, from the studies' own runs, in
test_accuracy_study.py, test_bounding_study.py and test_flows_study.py). Identical published data give identical documents: the
DRB's accuracy table of a release that reuses every measurement is the first one's."""
from __future__ import annotations

import re

import pytest

from pseo_das.reports.render import to_html
from rendered_html import markdown_problems, parse_html

pytestmark = pytest.mark.slow  # system tests: real releases (make test-fast leaves them out)

DOCUMENTS = ["public/release_notes", "internal/drb_report"]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_a_release_document_renders_as_written(releases, document):
    root, _ = releases
    markdown = (root / "a" / f"{document}.md").read_text()
    html = (root / "a" / f"{document}.html").read_text()
    assert markdown_problems(markdown, html) == []


def test_the_certificate_is_a_table_with_a_header(releases):
    root, _ = releases
    page = parse_html((root / "a" / "public" / "release_notes.html").read_text())
    heading = next(h for h in page.iter("h2") if h.text() == "Certificate")
    tables = list(page.iter("table"))
    certificate = next(t for t in tables if "release id" in t.text())
    assert heading and [th.text() for th in certificate.iter("th")] == ["item", "value"]


def test_the_checker_finds_markdown_left_as_text():
    """Negative control: the faults issue 36 found in the documents are reported."""
    faulty = ("# Notes\n\n| | |\n|---|---|\n| a | b |\n\n1. one\n   text\n\n   **Why.** x\n"
              "2. two\n")
    problems = markdown_problems(faulty, to_html(faulty, "t"))
    assert "table 1 has an empty header row" in problems
    assert "2 list lines but 1 HTML list items" in problems
    assert any(p.startswith("a line starting '2.' inside a paragraph") for p in problems)
    left = "Some **bold text and a `tick\n\n|---|\n"
    assert any(p.startswith("literal bold marker") for p in
               markdown_problems(left, to_html(left, "t")))


def test_the_checker_finds_a_study_table_broken_by_its_template():
    """Negative control for the study reports: a table run into the sentence before it, and
    two rows a template joined into one line (the HTML table drops the second row)."""
    run_in = "## Accuracy by k\n\nMean error per k:\n| k | error |\n|---:|---:|\n| 1 | 0.2 |\n"
    problems = markdown_problems(run_in, to_html(run_in, "t"))
    assert "1 Markdown tables but 0 HTML tables" in problems
    assert any(p.startswith("literal table rule") for p in problems)
    joined = "## Accuracy by k\n\n| k | error |\n|---:|---:|\n| 1 | 0.2 || 2 | 0.3 |\n"
    assert markdown_problems(joined, to_html(joined, "t")) == [
        "a table row of 5 cells under a header of 2: '| 1 | 0.2 || 2 | 0.3 |'"]
    fine = joined.replace("|| 2", "|\n| 2")
    assert markdown_problems(fine, to_html(fine, "t")) == []


def accuracy_section(drb: str) -> str:
    return re.search(r"## Expected accuracy.*?(?=\n## )", drb, re.S).group(0)


def test_identical_published_data_give_an_identical_accuracy_table(releases):
    """2026Q4-next reuses every measurement of 2026Q4-test (another release id, another
    seed): same table. 2026Q4-other measured with seed B: another table."""
    root, _ = releases
    drb = {name: (root / name / "internal" / "drb_report.md").read_text()
           for name in ("a", "a_next", "b")}
    assert accuracy_section(drb["a"]) == accuracy_section(drb["a_next"])
    assert accuracy_section(drb["a"]) != accuracy_section(drb["b"])
    assert "| 30-49 | 50 |" in accuracy_section(drb["a"])
