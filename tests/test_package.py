"""The package: one top-level package in the wheel, and the layering of its parts
(schemas <- tasks <- flows <- cli; reports render and do not compute)."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What each part may import from the others (besides itself and the modules every part may import).
SHARED = {"config", "version", "epsilon", "errors"}
ALLOWED = {
    "schemas": set(),
    "tasks": {"schemas", "reports"},   # tasks build document contexts; reports render them
    "reports": set(),                  # Jinja templates and the renderer only
    "flows": {"tasks", "schemas", "reports", "flows"},
}


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _part(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] in {"tasks", "flows", "schemas", "reports"}:
        return "top-level " + parts[0]       # never importable once installed
    if parts[0] == "pseo_das" and len(parts) > 1:
        return parts[1]
    return None


def test_parts_import_only_the_layers_below_them():
    offenders = []
    for part, allowed in ALLOWED.items():
        for path in sorted((ROOT / part).rglob("*.py")):
            for module in _imports(path):
                target = _part(module)
                if target is None or target == part or target in SHARED:
                    continue
                if target not in allowed:
                    offenders.append(f"{path.relative_to(ROOT)} imports {module}")
    assert offenders == []


def test_the_layering_check_sees_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from pseo_das.flows.quarterly_release import quarterly_release\n"
                   "from tasks.inputs import ingest\n")
    assert {_part(m) for m in _imports(bad)} == {"flows", "top-level tasks"}


@pytest.mark.slow
def test_the_wheel_holds_only_the_pseo_das_package(tmp_path):
    source = tmp_path / "source"  # a copy, so that the build leaves nothing in the checkout
    local = {".git", ".venv", "data", "releases", "demo-store", "audit", "build", ".pytest_cache"}

    def ignored(folder: str, names: list[str]) -> set[str]:
        top = Path(folder) == ROOT
        return {n for n in names if (top and n in local) or n == "__pycache__"
                or n.endswith(".egg-info")}

    shutil.copytree(ROOT, source, ignore=ignored)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                    "--quiet", "-w", str(tmp_path), str(source)], check=True, capture_output=True)
    wheel, = tmp_path.glob("pseo_das-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"pseo_das"}
    for expected in ["pseo_das/flows/quarterly_release.py", "pseo_das/tasks/privacy/mechanism.py",
                     "pseo_das/schemas/codes.py", "pseo_das/reports/templates/drb_report.md.j2",
                     "pseo_das/default_config.toml"]:
        assert expected in names
