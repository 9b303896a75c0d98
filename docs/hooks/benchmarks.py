"""MkDocs hook: measured figures from the benchmark result files, at every docs build.

A page's line `<!-- bench: NAME -->` becomes the latest result of benchmark NAME in
benchmarks/results/ (its command, date, commit, CPUs and load average, then its figures as
tables), as `benchmarks/result_file.py` reads and renders it. A name without a result
fails the build. Listed in mkdocs.yml (`hooks:`).
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

MARKER = re.compile(r"^<!-- bench: ([a-z0-9-]+) -->$", re.M)
RESULT_FILE = Path(__file__).resolve().parents[2] / "benchmarks" / "result_file.py"


def _result_file():
    spec = importlib.util.spec_from_file_location("pseo_das_bench_result_file", RESULT_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render(markdown: str, where: str, folder: Path | None = None) -> str:
    """`markdown` with every bench marker replaced by its benchmark's latest result."""
    results = _result_file()
    folder = folder or results.RESULTS

    def replace(match: re.Match) -> str:
        try:
            return results.markdown(results.latest(match.group(1), folder))
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return render(markdown, page.file.src_path)
