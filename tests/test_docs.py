"""The documentation: the MkDocs site builds with warnings as errors (broken links, pages
missing from the navigation, a generated reference that fails), and the README stays a
screen long and points only inside the repository."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 150
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def test_the_docs_build_strict(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    site = tmp_path / "site"
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "usage: pseo-das release" in cli and "--hold-for-review" in cli
    configuration = (site / "reference" / "configuration" / "index.html").read_text()
    assert "epsilon_per_tabulation" in configuration and "frame_not_in_ipeds" in configuration
    outputs = (site / "reference" / "outputs" / "index.html").read_text()
    assert "y1_p50_earnings" in outputs and "noisy_count" in outputs
    benchmarks = (site / "develop" / "benchmarks" / "index.html").read_text()
    assert "<!-- bench:" not in benchmarks and "benchmarks/bench_light_commands.py" in benchmarks
    assert benchmarks.count("<table>") >= 6            # rendered from benchmarks/results/


def reference_hook():
    """docs/hooks/reference.py, the generator of the reference pages."""
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        import reference
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    return reference


def test_every_command_is_in_the_generated_cli_reference(tmp_path):
    """The reference is the parser's: a command added to the CLI appears without an edit."""
    reference = reference_hook()
    from pseo_das.cli import parser
    text = reference.cli_reference()
    commands = next(a for a in parser()._actions if hasattr(a, "choices") and a.choices)
    assert all(f"## {name}\n" in text for name in commands.choices)


def test_every_configuration_key_has_its_own_meaning_in_the_reference():
    """Each key of the generated configuration reference has a meaning from the comment
    above it (or at the end of its line) in default_config.toml, and a section's
    introduction or a note that a blank line ends is no key's meaning."""
    reference = reference_hook()
    meanings = {}
    section = None
    for line in reference.configuration_reference().splitlines():
        if line.startswith("## ["):
            section = line[4:-1]
        elif line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            meanings[f"{section}.{cells[0].strip('`')}"] = cells[-1]
    assert len(meanings) >= 50
    assert not [key for key, meaning in meanings.items() if not meaning]
    assert meanings["privacy.store"].startswith("The privacy store folder")
    assert meanings["flows.epsilon_per_tabulation"].startswith("Epsilon of each measured")


def test_readme_is_a_screen_long_and_links_inside_the_repository():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES
    targets = LINK.findall(readme)
    assert targets, "the README points to the docs"
    outside = [t for t in targets if re.match(r"[a-z]+:", t) or t.startswith(("/", "//"))]
    assert not outside, f"README.md links outside the repository: {outside}"
    missing = [t for t in targets if not (ROOT / t.split("#")[0]).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"
