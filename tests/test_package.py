"""The package's stages, layered one way (the wheel and its installation:
tests/test_installed_package.py).

A stage is a sub-package of tasks/ (tasks.privacy, tasks.earnings, ...), one of the other
top-level folders (flows, schemas, reports) or a module of pseo_das/ (pseo_das.config, ...).
Every import counts, lazy ones inside functions and TYPE_CHECKING ones included: a stage
imports only stages of its own layer or the layers below, and no stages import each other
round a cycle."""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"pseo_das": "pseo_das", "flows": "pseo_das.flows", "tasks": "pseo_das.tasks",
           "schemas": "pseo_das.schemas", "reports": "pseo_das.reports"}
# Bottom to top. The privacy core imports nothing above it; the products (earnings, flows,
# the CIP recast) sit on the codes and the inputs; the release plan and the store readers
# (measurements) take the products; publication, audit and the flows come last.
LAYERS = [
    {"pseo_das", "pseo_das.epsilon", "pseo_das.errors", "pseo_das.version",
     "pseo_das.process_memory", "schemas", "reports",
     "tasks"},
    {"tasks.privacy"},
    {"pseo_das.config"},
    {"tasks.codes"},
    {"tasks.inputs"},
    {"tasks.earnings", "tasks.employment_flows", "tasks.cip_recast"},
    {"tasks.measurements"},
    {"tasks.study"},
    {"tasks.publication"},
    {"tasks.audit"},
    {"tasks.verification", "tasks.synthesis"},
    {"flows"},
    {"pseo_das.synth", "pseo_das.synth_employers", "pseo_das.synth_jobs", "pseo_das.synth_ipeds",
     "pseo_das.ipeds_demo", "pseo_das.ipeds_layout", "pseo_das.reference_demo",
     "pseo_das.prefect_runtime", "pseo_das.prefect_server", "pseo_das.cli", "pseo_das.__main__"},
]
LAYER_OF = {stage: n for n, stages in enumerate(LAYERS) for stage in stages}


def _module(root: Path, path: Path) -> str:
    folder = path.relative_to(root).parts[0]
    parts = list(path.relative_to(root / folder).with_suffix("").parts)
    return ".".join([FOLDERS[folder]] + [p for p in parts if p != "__init__"])


def _stage(root: Path, module: str) -> str | None:
    parts = module.split(".")
    if parts[0] in {"tasks", "flows", "schemas", "reports"}:
        return "top-level " + parts[0]       # never importable once installed
    if parts[0] != "pseo_das":
        return None
    if len(parts) == 1:
        return "pseo_das"
    if parts[1] == "tasks":                  # a stage, or a name of tasks/__init__.py
        return "tasks." + parts[2] if len(parts) > 2 and (root / "tasks" / parts[2]).is_dir() \
            else "tasks"
    if parts[1] in {"flows", "schemas", "reports"}:
        return parts[1]
    own_module = (root / "pseo_das" / f"{parts[1]}.py").exists()
    return "pseo_das." + parts[1] if own_module else "pseo_das"


def _imported(module: str, is_package: bool, node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:   # relative: resolved against the importing module's package
        package = module.split(".")[: len(module.split(".")) - node.level + is_package]
        base = ".".join(package + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    # `from pseo_das.tasks import earnings` names a stage; `from x.y import f`, a module
    return [f"{base}.{alias.name}" for alias in node.names]


def stage_imports(root: Path) -> dict[str, dict[str, str]]:
    """stage -> {imported stage: an importing file}, every import of every module."""
    edges: dict[str, dict[str, str]] = defaultdict(dict)
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            module = _module(root, path)
            source = _stage(root, module)
            for node in ast.walk(ast.parse(path.read_text())):
                for name in _imported(module, path.name == "__init__.py", node):
                    target = _stage(root, name)
                    if target is not None and target != source:
                        edges[source].setdefault(target, str(path.relative_to(root)))
    return edges


def layering_violations(edges: dict[str, dict[str, str]]) -> list[str]:
    found = []
    for source, targets in sorted(edges.items()):
        for target, where in sorted(targets.items()):
            if source not in LAYER_OF or target not in LAYER_OF:
                found.append(f"{where}: {source} -> {target} (a stage missing from LAYERS, or "
                             "a top-level import that fails once installed)")
            elif LAYER_OF[target] > LAYER_OF[source]:
                found.append(f"{where}: {source} imports {target}, a layer above it")
    return found


def stage_cycles(edges: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one stage (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(stage: str) -> None:
        index[stage] = low[stage] = len(index)
        stack.append(stage)
        for target in edges.get(stage, {}):
            if target not in index:
                visit(target)
                low[stage] = min(low[stage], low[target])
            elif target in stack:
                low[stage] = min(low[stage], index[target])
        if low[stage] == index[stage]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == stage:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for stage in sorted(set(edges) | {t for targets in edges.values() for t in targets}):
        if stage not in index:
            visit(stage)
    return cycles


def test_stages_import_only_their_layer_and_the_layers_below():
    assert layering_violations(stage_imports(ROOT)) == []


def test_no_stages_import_each_other_round_a_cycle():
    assert stage_cycles(stage_imports(ROOT)) == []


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for folder in FOLDERS:
        (root / folder).mkdir(exist_ok=True)
    return root


def test_the_layering_checks_see_a_planted_cycle(tmp_path):
    """A lazy import of a product from the privacy core, and a product importing the core
    back: both a layering violation and a cycle, found in a tree of that shape."""
    edges = stage_imports(_tree(tmp_path, {
        "tasks/privacy/mechanism.py": "def f():\n    from pseo_das.tasks.earnings import tables\n",
        "tasks/earnings/tables.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                    "    from ..privacy.mechanism import f\n",
        "flows/release.py": "import tasks.inputs\n"}))
    assert edges["tasks.privacy"] == {"tasks.earnings": "tasks/privacy/mechanism.py"}
    assert edges["tasks.earnings"] == {"tasks.privacy": "tasks/earnings/tables.py"}
    assert stage_cycles(edges) == [["tasks.earnings", "tasks.privacy"]]
    violations = layering_violations(edges)
    assert len(violations) == 2
    assert "tasks.privacy imports tasks.earnings, a layer above it" in violations[1]
    assert "top-level import" in violations[0]



def test_no_file_holds_a_merge_conflict_marker():
    """A merge left half-resolved is caught before it ships (README, sources, templates)."""
    import subprocess
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    assert tracked.returncode == 0, tracked.stderr      # the tests run in a checkout
    found = []
    for name in tracked.stdout.splitlines():
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".j2", ".toml", ".txt", ".cfg", ".yml", ".html"}:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if line.startswith(("<<<<<<< ", ">>>>>>> ")):
                found.append(f"{name}:{number}")
    assert not found, found
