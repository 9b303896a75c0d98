"""Code and package versions, for the audit trail."""
from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

AUDITED_PACKAGES = ("pseo-das", "prefect", "mlflow", "pandas", "numpy", "pandera", "pyarrow",
                    "randomgen", "jinja2", "markdown", "pydantic")


def code_version() -> str:
    """Package version plus git commit (and '.dirty' for uncommitted changes) when run from
    a checkout (an editable install); an installed wheel is its version alone, even when
    its environment lies inside some git repository."""
    version = metadata.version("pseo-das")
    repo = Path(__file__).resolve().parent.parent
    if not (repo / ".git").exists():   # site-packages, not a checkout
        return version
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=repo, check=True,
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                               check=True, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return version
    return f"{version}+git.{sha}{'.dirty' if dirty else ''}"


def package_versions() -> dict[str, str]:
    versions = {}
    for name in AUDITED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions
