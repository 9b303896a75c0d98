"""The layering of the package's parts (schemas <- tasks <- flows <- cli; reports render
and do not compute). The wheel and its installation: tests/test_installed_package.py."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What each part may import from the others (besides itself and pseo_das.config/version/epsilon).
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
                if target is None or target == part or target in {"config", "version", "epsilon"}:
                    continue
                if target not in allowed:
                    offenders.append(f"{path.relative_to(ROOT)} imports {module}")
    assert offenders == []


def test_the_layering_check_sees_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from pseo_das.flows.quarterly_release import quarterly_release\n"
                   "from tasks.inputs import ingest\n")
    assert {_part(m) for m in _imports(bad)} == {"flows", "top-level tasks"}
