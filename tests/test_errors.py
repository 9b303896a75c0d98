"""One exception root: every exception class of the package is a PseoDasError, and the CLI
turns any of them into its message and exit code in one place (no traceback unless
--debug)."""
from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

from pseo_das.cli import main
from pseo_das.errors import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, PseoDasError

ROOT = Path(__file__).resolve().parent.parent


# The folders that install inside pseo_das (setup.py's PACKAGE_DIR).
MAPPED = ("pseo_das", "pseo_das.flows", "pseo_das.tasks", "pseo_das.schemas", "pseo_das.reports")


def package_modules() -> list[ModuleType]:
    """Every module of the installed package: the packages mapped into it, walked (so a new
    module is found without being named here)."""
    names = set(MAPPED)
    for package in MAPPED:
        path = importlib.import_module(package).__path__
        names.update(found.name for found in pkgutil.walk_packages(path, package + "."))
    return [importlib.import_module(name) for name in sorted(names)]


def exception_classes(modules: list[ModuleType]) -> list[type[BaseException]]:
    """The exception classes the modules define (not those they import)."""
    return [value for module in modules for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, BaseException)
            and value.__module__ == module.__name__]


def outside_the_root(classes: list[type[BaseException]]) -> list[str]:
    return [f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, PseoDasError)]


@pytest.fixture(scope="module")
def package_exceptions() -> list[type[BaseException]]:
    return exception_classes(package_modules())


def test_every_exception_class_of_the_package_derives_from_the_root(package_exceptions):
    names = {c.__name__ for c in package_exceptions}
    assert {"StoreError", "InputValidationError", "ConfigError", "SeedError",
            "LayoutInputMissing", "ReleaseCheckFailed", "BudgetRefused"} <= names
    assert len(package_exceptions) >= 22
    assert outside_the_root(package_exceptions) == []


def test_the_check_finds_a_class_outside_the_root(tmp_path, monkeypatch):
    (tmp_path / "planted_refusals.py").write_text(
        "from pseo_das.errors import PseoDasError\n"
        "class Rooted(PseoDasError, ValueError): pass\n"
        "class Forgotten(ValueError): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    planted = importlib.import_module("planted_refusals")
    assert outside_the_root(exception_classes([planted])) == ["planted_refusals.Forgotten"]


def test_the_secondary_bases_callers_catch_are_kept():
    from pseo_das.config import ConfigError
    from pseo_das.tasks.inputs.ingest import InputValidationError
    from pseo_das.tasks.publication.release_files import DestinationExistsError
    from pseo_das.tasks.privacy.store import StoreError

    assert issubclass(ConfigError, ValueError)       # pydantic validators raise ValueError
    assert issubclass(InputValidationError, ValueError)
    assert issubclass(DestinationExistsError, FileExistsError)
    assert issubclass(StoreError, RuntimeError)


def test_any_refusal_gives_its_class_exit_code_and_message_without_traceback(
        package_exceptions, tmp_path, monkeypatch, capsys):
    import pseo_das.schemas.pseo_layout as layout

    for refusal in package_exceptions:
        def refuse(folder, note=None, refusal=refusal):
            raise refusal(f"{folder}: refused by {refusal.__name__}")

        monkeypatch.setattr(layout, "check_public_folder", refuse)
        with pytest.raises(SystemExit) as stop:
            main(["validate-layout", str(tmp_path)])
        err = capsys.readouterr().err
        assert (stop.value.code, err) == (
            refusal.exit_code,
            f"pseo-das validate-layout: {tmp_path}: refused by {refusal.__name__}\n")
    codes = {refusal.__name__: refusal.exit_code for refusal in package_exceptions}
    assert codes["ReleaseCheckFailed"] == EXIT_CHECK_FAILED
    assert codes["StoreError"] == codes["InputValidationError"] == EXIT_BAD_INPUT


def test_debug_shows_the_traceback_of_a_refusal_and_keeps_its_exit_code(tmp_path, capsys):
    missing = tmp_path / "no-release" / "public"
    for debug in ([], ["--debug"]):
        with pytest.raises(SystemExit) as stop:
            main(["validate-layout", str(missing), *debug])
        err = capsys.readouterr().err
        assert stop.value.code == EXIT_BAD_INPUT
        assert err.endswith(f"pseo-das validate-layout: {missing}: no such folder\n")
        assert ("Traceback" in err and "LayoutInputMissing" in err) == bool(debug)


def test_a_refusal_raised_in_a_task_reaches_the_caller_of_the_flow_as_itself():
    from prefect import flow

    from pseo_das.tasks import release_task
    from pseo_das.tasks.inputs.ingest import InputValidationError

    @release_task("refuse an input")
    def refuse_input():
        raise InputValidationError("outcomes.parquet: column earnings is missing")

    @flow
    def refusing_flow():
        return refuse_input()

    with pytest.raises(InputValidationError, match="column earnings is missing"):
        refusing_flow()
