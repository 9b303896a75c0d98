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
from pseo_das.errors import (EXIT_BAD_INPUT, EXIT_CHECK_FAILED, WITHHELD, PseoDasError,
                             WithheldError, disclosed, is_withheld, withhold)

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
    """Its type and object; its message, which may quote records, withheld from Prefect
    (the state of the runs) until the CLI discloses it."""
    from prefect import flow
    from prefect.client.orchestration import get_client

    from pseo_das.tasks import release_task
    from pseo_das.tasks.inputs.ingest import InputValidationError

    @release_task("refuse an input")
    def refuse_input():
        raise InputValidationError("outcomes.csv: row 7 has 6 fields: '6,1,42000.0,48,62,extra'")

    task_runs = []

    @flow
    def refusing_flow():
        task_runs.append(refuse_input(return_state=True).state_details.task_run_id)
        return refuse_input()

    with pytest.raises(InputValidationError, match="^message withheld") as raised:
        refusing_flow()
    assert str(disclosed(raised.value)) == \
        "outcomes.csv: row 7 has 6 fields: '6,1,42000.0,48,62,extra'"
    with get_client(sync_client=True) as client:
        stored = client.read_task_run(task_runs[0]).state.message
    assert stored == f"Task run encountered an exception InputValidationError: {WITHHELD}"


class Unprintable(ValueError):
    """An error whose `str` does not follow its arguments (as UnicodeDecodeError)."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return self.text


@pytest.mark.parametrize("error, withheld", [
    (ValueError("row 3: '424242'"), True), (KeyError("424242"), True),
    (OSError(28, "No space left on device"), False),
    (PseoDasError("row 3: '424242'"), True)])
def test_a_message_that_may_quote_records_is_withheld_until_disclosed(error, withheld):
    text = str(error)
    assert withhold(error) is error and is_withheld(error) == withheld
    assert ("424242" not in str(error) and WITHHELD in str(error)
            and "424242" not in repr(error)) == withheld
    assert withhold(error) is error          # once
    assert disclosed(error) is error and str(error) == text
    assert not is_withheld(error)


def test_a_class_says_its_messages_quote_no_records():
    from pseo_das.tasks.privacy.store import StoreError
    from pseo_das.tasks.privacy.store_integrity import StoreTampered
    for error in (StoreError("the store is locked"), StoreTampered("row 3 changed")):
        assert withhold(error) is error and not is_withheld(error)
        assert str(error) != WITHHELD


def test_an_error_that_cannot_be_withheld_in_place_gets_a_stand_in():
    error = Unprintable("row 3: '424242'")
    stand_in = withhold(error)
    assert isinstance(stand_in, WithheldError) and is_withheld(stand_in)
    assert str(stand_in) == f"Unprintable: {WITHHELD}"
    assert disclosed(stand_in) is error and str(error) == "row 3: '424242'"
