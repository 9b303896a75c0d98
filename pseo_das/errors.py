"""The one root of every refusal and failed check pseo-das reports to a user.

Every exception class of the package derives from `PseoDasError` (a test walks the
package's modules), so the CLI maps them all in one place: it prints the message after the
command's headline, with no traceback unless `--debug`, and exits with the class's
`exit_code`. A new refusal therefore never surfaces as an "unexpected error".

Prefect keeps the message of every failed flow and task run (state, run log, the pickled
exception under ~/.prefect/storage) and a release tags its MLflow run with it: places
people who may not see the microdata read (auditors are handed the MLflow store). A message
about bad input quotes rows ("row 7 has 6 fields: '6,1,42000.0,48,62,extra'"), so the
release's tasks and flows `withhold` the message of an error that may quote records before
Prefect sees it, and the CLI prints it, `disclosed`, on the operator's terminal.

This module imports nothing of the project: every layer may import it.
"""
from __future__ import annotations

EXIT_CHECK_FAILED = 1   # a check on the outputs failed (or could not run)
EXIT_BAD_INPUT = 2      # refused: bad input, argument, configuration, store or budget


class PseoDasError(Exception):
    """A refusal or a failed check the user can act on. Its message (`str(exc)`) says what
    is wrong and what to do; `exit_code` is the CLI's exit status for it (a class sets its
    own; an instance may too). `quotes_records`: the message may quote values of the
    confidential inputs (rows, codes, counts), so Prefect and MLflow are not given it
    (`withhold`); a class whose messages never do sets it False."""

    exit_code: int = EXIT_BAD_INPUT
    quotes_records: bool = True


class WithheldError(PseoDasError):
    """Stands in, outside the operator's terminal, for an error whose message may quote
    records and cannot be withheld in place (its `str` ignores its arguments)."""

    exit_code = EXIT_CHECK_FAILED


WITHHELD = ("message withheld from Prefect and MLflow: it may quote confidential input "
            "values; the pseo-das command printed it on the operator's terminal")

# id(exception) -> (the arguments it carries now, its own): kept in this process only, so
# nothing pickled, logged or sent holds them. Exceptions are few (a run's failure).
_withheld: dict[int, tuple[tuple, tuple]] = {}
_stand_ins: dict[int, tuple[WithheldError, BaseException]] = {}


def quotes_records(exc: BaseException) -> bool:
    """May the message quote a confidential value? Yes unless the class says no; an error
    of the operating system names files, never values."""
    if isinstance(exc, PseoDasError):
        return exc.quotes_records
    return not isinstance(exc, OSError)


def withhold(exc: BaseException) -> BaseException:
    """`exc` as Prefect and MLflow may see it: its type, and its message only if it quotes
    no record. In place (the same object, its arguments replaced by WITHHELD), so that
    `except` clauses and retry conditions act on it as before; a `WithheldError` when its
    `str` does not follow its arguments. Idempotent; `disclosed` undoes it."""
    if not quotes_records(exc) or is_withheld(exc):
        return exc
    own, notice = exc.args, (WITHHELD,)
    exc.args = notice
    if WITHHELD in str(exc):
        _withheld[id(exc)] = (notice, own)
        return exc
    exc.args = own
    stand_in = WithheldError(f"{type(exc).__name__}: {WITHHELD}")
    _stand_ins[id(stand_in)] = (stand_in, exc)
    return stand_in


def is_withheld(exc: BaseException) -> bool:
    """Is `exc` withheld (in place, or a stand-in)?"""
    return _in_place(exc) or isinstance(exc, WithheldError)


def _in_place(exc: BaseException) -> bool:
    kept = _withheld.get(id(exc))
    return kept is not None and exc.args is kept[0]


def disclosed(exc: BaseException) -> BaseException:
    """The error as raised, for the operator's terminal: its own message back in place
    (a stand-in gives the original)."""
    stand_in = _stand_ins.pop(id(exc), None)
    if stand_in is not None and stand_in[0] is exc:
        exc = stand_in[1]
    if _in_place(exc):
        exc.args = _withheld.pop(id(exc))[1]
    return exc
