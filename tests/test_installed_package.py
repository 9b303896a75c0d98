"""The package as users install it: the wheel, built from a copy of the checkout, installed
(not editable, with its dependencies) into a new virtual environment; `pseo-das synth` and a
small release run from that installation, and mypy checks the installed package against the
committed baseline of known errors (tests/mypy_baseline.txt; `make mypy-baseline` rewrites it).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import warnings
import zipfile
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The folders that install inside the one top-level package: flows/ as pseo_das/flows/, ...
INSTALLED_FOLDERS = ("pseo_das", "flows", "tasks", "schemas", "reports")
OFFICIAL_FILES = ("all/pseoe_all.csv.gz", "all/pseof_all.csv.gz", "all/pseo_all_institutions.csv",
                  "all/pseo_all_partners.txt", "all/version_pseo.txt")
MYPY_BASELINE = ROOT / "tests" / "mypy_baseline.txt"
PRIVACY_CORE = "pseo_das/tasks/privacy/"   # no mypy error may stay there, baseline or not
WRITE_BASELINE = os.environ.get("PSEO_DAS_MYPY_BASELINE") == "write"   # make mypy-baseline

ErrorKey = tuple[str, str, str]   # (module path, error code, message): no line numbers


def checkout_files() -> list[Path]:
    """The files a commit of the checkout would hold (tracked or new, not ignored), as they
    are in the working tree: what a fresh clone of it would build."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return [Path(name) for name in listed.split("\0") if name and (ROOT / name).is_file()]


def wheel_name(path: Path) -> str | None:
    """Where a checkout file lies in the wheel (None: it is not part of the package)."""
    if path.parts[0] not in INSTALLED_FOLDERS:
        return None
    return path.as_posix() if path.parts[0] == "pseo_das" else f"pseo_das/{path.as_posix()}"


def run(command: list, **options) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], capture_output=True, text=True,
                          **options)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """`pip wheel --no-deps` of a copy of the checkout (the build leaves nothing in it)."""
    work = tmp_path_factory.mktemp("wheel")
    for path in checkout_files():
        (work / "source" / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, work / "source" / path)
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", work,
                 work / "source"], timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    found, = work.glob("pseo_das-*.whl")
    return found


@pytest.fixture(scope="session")
def installed(wheel, tmp_path_factory) -> Path:
    """The bin folder of a new virtual environment holding the wheel (not editable) and its
    dependencies. It lies in a git repository, as a user's .venv in a clone would.
    `--no-compile` skips writing .pyc files of every dependency at install time (40 of 130 s
    here): Python compiles what it imports when it imports it; the files installed and
    where they go are the same. The installer is this environment's pip (`pip --python`,
    the pip `make install` upgrades to), not the older one `venv` bundles: 12.1 + 8.0
    against 33.5 + 2.8 CPU s for the same install, and 3.5 s less to make the venv."""
    clone = tmp_path_factory.mktemp("clone")
    for command in (["git", "init", "-q"],
                    ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                     "--allow-empty", "-m", "a user's clone"],
                    [sys.executable, "-m", "venv", "--without-pip", ".venv"],
                    [sys.executable, "-m", "pip", "--python", ".venv/bin/python", "install",
                     "--quiet", "--no-compile", wheel]):
        done = run(command, cwd=clone, timeout=1200)
        assert done.returncode == 0, f"{command}: {done.stderr[-3000:]}"
    return clone / ".venv" / "bin"


@pytest.mark.slow
def test_the_wheel_holds_every_module_and_data_file_in_one_package(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"pseo_das"}
    expected = {wheel_name(path) for path in checkout_files()} - {None}
    assert "pseo_das/tasks/cip_recast/recast.py" in expected   # the one a package list forgot
    assert "pseo_das/py.typed" in expected
    assert sorted(expected - names) == []


@pytest.mark.slow
def test_a_release_from_the_installed_wheel(installed, tmp_path):
    where = run([installed / "python", "-c",
                 "import pseo_das.tasks.cip_recast.recast as m; print(m.__file__)"], cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(installed.parent), where.stderr
    data, out = tmp_path / "data", tmp_path / "release"
    synth = run([installed / "pseo-das", "synth", "--out", data, "--graduates", "2000",
                 "--institutions", "5", "--seed", "3"], cwd=tmp_path, timeout=300)
    assert synth.returncode == 0, synth.stderr[-3000:]
    # reports to the session's Prefect server (PREFECT_API_URL, conftest.prefect_server): a
    # release that boots its own on a new Prefect home, as on a fresh machine, is test_custody's
    release = run([installed / "pseo-das", "release", "--data", data, "--out", out,
                   "--tracking-uri", f"sqlite:///{tmp_path / 'audit' / 'mlflow.db'}",
                   "--store", tmp_path / "store", "--init-store"],
                  cwd=tmp_path, timeout=900)
    assert release.returncode == 0, release.stderr[-3000:]
    assert "This run spent a new epsilon of 7.5 (" in release.stdout
    assert "DEMO INPUTS:     the packaged SYNTHETIC J2J, QCEW, state coverage, IPEDS, " \
           "hard-coded transitions file(s) were used" in release.stdout
    assert [name for name in OFFICIAL_FILES if not (out / "public" / name).is_file()] == []
    layout = run([installed / "pseo-das", "validate-layout", out / "public"], cwd=tmp_path)
    assert layout.returncode == 0, layout.stdout[-3000:] + layout.stderr[-3000:]


VERSION_WITHOUT_PREFECT = """
import sys
from pseo_das.cli import main
try:
    main(["--version"])
except SystemExit:
    print("imported prefect" if "prefect" in sys.modules else "no prefect")
"""


@pytest.mark.slow
def test_the_installed_version_is_the_wheels(installed, wheel, tmp_path):
    version = wheel.name.split("-")[1]
    # inside a git repository, but installed: no commit of that repository is claimed
    assert run([installed / "pseo-das", "--version"], cwd=tmp_path).stdout == \
        f"pseo-das {version}\n"
    assert run([installed / "python", "-c", VERSION_WITHOUT_PREFECT], cwd=tmp_path).stdout == \
        f"pseo-das {version}\nno prefect\n"


def test_the_version_of_a_checkout_names_its_commit_without_importing_prefect():
    done = run([sys.executable, "-c", VERSION_WITHOUT_PREFECT], cwd=ROOT)
    assert re.fullmatch(r"pseo-das \d+\.\d+\.\d+\+git\.[0-9a-f]{12}(\.dirty)?\nno prefect\n",
                        done.stdout), done.stdout + done.stderr


# --- mypy against its baseline -------------------------------------------------------------

def mypy_errors(json_lines: str, site_packages: Path) -> Counter[ErrorKey]:
    """mypy's errors (`-O json`) by module path, error code and message, counted: line
    numbers left out (also those inside messages, and the position of an entry in a dict
    or list literal), so that edits elsewhere in a module do not change its keys."""
    errors: Counter[ErrorKey] = Counter()
    for line in json_lines.splitlines():
        error = json.loads(line)
        if error["severity"] == "error":
            path = Path(error["file"]).resolve().relative_to(site_packages.resolve())
            message = re.sub(r"\b(line|Dict entry|List item) \d+", r"\1 N", error["message"])
            errors[path.as_posix(), error["code"] or "", message] += 1
    return errors


def read_baseline(path: Path) -> Counter[ErrorKey]:
    baseline: Counter[ErrorKey] = Counter()
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            count, module, code, message = line.split("\t")
            baseline[module, code, message] = int(count)
    return baseline


def write_baseline(path: Path, errors: Counter[ErrorKey]) -> None:
    by_stage = Counter(stage(module) for (module, _, _), n in errors.items() for _ in range(n))
    path.write_text(
        "# mypy's known errors in the installed package (count, module, code, message), checked\n"
        "# by tests/test_installed_package.py; rewrite with `make mypy-baseline` (README, Tests).\n"
        f"# {sum(errors.values())} errors: "
        + ", ".join(f"{name} {n}" for name, n in sorted(by_stage.items())) + "\n"
        + "".join(f"{n}\t{module}\t{code}\t{message}\n"
                  for (module, code, message), n in sorted(errors.items())))


def stage(module: str) -> str:
    """pseo_das/tasks/privacy/store.py -> tasks/privacy; pseo_das/cli.py -> pseo_das."""
    parts = module.split("/")[1:-1]
    return "/".join(parts[:2]) if parts else "pseo_das"


def listed(errors: Counter[ErrorKey]) -> str:
    return "\n".join(f"  {module}: [{code}] {message}" + (f"  (x{n})" if n > 1 else "")
                     for (module, code, message), n in sorted(errors.items()))


def check_against_baseline(errors: Counter[ErrorKey], baseline: Counter[ErrorKey]) -> str:
    """Fails on an error in the privacy core or one the baseline does not hold; returns
    what the baseline holds that mypy no longer finds (the baseline can shrink), or ""."""
    core = Counter({key: n for key, n in errors.items() if key[0].startswith(PRIVACY_CORE)})
    if core:
        pytest.fail(f"mypy errors in the privacy core (none may stay there):\n{listed(core)}")
    new = errors - baseline
    if new:
        pytest.fail(f"{sum(new.values())} mypy error(s) not in {MYPY_BASELINE.name}:\n"
                    f"{listed(new)}\nFix them; if modules moved, rewrite the baseline with "
                    "`make mypy-baseline`.")
    fixed = baseline - errors
    return (f"{sum(fixed.values())} error(s) of {MYPY_BASELINE.name} are fixed: the baseline "
            f"can shrink (`make mypy-baseline`):\n{listed(fixed)}") if fixed else ""


@pytest.mark.slow
def test_mypy_finds_no_error_outside_its_baseline_in_the_installed_package(installed, tmp_path):
    python = installed / "python"
    site_packages = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                                            "['purelib'])"]).stdout.strip())
    # cwd outside the checkout, or mypy would read the checkout's folders instead
    checked = run([sys.executable, "-m", "mypy", "--config-file", ROOT / "pyproject.toml",
                   "--python-executable", python, "--cache-dir", tmp_path / "cache",
                   "-O", "json", "-p", "pseo_das"], cwd=tmp_path, timeout=900)
    assert checked.returncode in (0, 1) and not checked.stderr, checked.stderr[-3000:]
    errors = mypy_errors(checked.stdout, site_packages)
    if WRITE_BASELINE:
        check_against_baseline(errors, errors)   # still none in the privacy core
        write_baseline(MYPY_BASELINE, errors)
        return
    shrink = check_against_baseline(errors, read_baseline(MYPY_BASELINE))
    if shrink:
        warnings.warn(shrink)


def test_the_baseline_check_fails_on_a_new_error_and_reports_fixed_ones(tmp_path):
    site = tmp_path / "site-packages"

    def error(module: str, line: int, message: str, code: str = "arg-type") -> str:
        return json.dumps({"file": str(site / module), "line": line, "message": message,
                           "code": code, "severity": "error"})

    known = [error("pseo_das/cli.py", 10, 'Name "x" already defined on line 4'),
             error("pseo_das/cli.py", 20, "Incompatible types", "assignment"),
             error("pseo_das/cli.py", 30, "Incompatible types", "assignment"),
             error("pseo_das/cli.py", 40, 'Dict entry 4 has incompatible type "str": "int"')]
    write_baseline(tmp_path / "baseline.txt", mypy_errors("\n".join(known), site))
    baseline = read_baseline(tmp_path / "baseline.txt")
    assert baseline[("pseo_das/cli.py", "assignment", "Incompatible types")] == 2
    moved = [error("pseo_das/cli.py", 11, 'Name "x" already defined on line 5'),
             error("pseo_das/cli.py", 21, "Incompatible types", "assignment"),
             error("pseo_das/cli.py", 42, 'Dict entry 5 has incompatible type "str": "int"'),
             json.dumps({"file": str(site / "pseo_das/cli.py"), "line": 22, "message": "see",
                         "code": None, "severity": "note"})]
    assert "1 error(s) of mypy_baseline.txt are fixed" in \
        check_against_baseline(mypy_errors("\n".join(moved), site), baseline)
    assert check_against_baseline(mypy_errors("\n".join(known), site), baseline) == ""
    with pytest.raises(pytest.fail.Exception, match=r"1 mypy error\(s\) not in .*\n  "
                                                   r"pseo_das/cli.py: \[assignment\] Incomp"):
        check_against_baseline(mypy_errors("\n".join(known + known[1:2]), site), baseline)
    in_core = error("pseo_das/tasks/privacy/store.py", 1, "Incompatible types")
    with pytest.raises(pytest.fail.Exception, match="errors in the privacy core"):
        check_against_baseline(mypy_errors(in_core, site), mypy_errors(in_core, site))
