"""The one root of every refusal and failed check pseo-das reports to a user.

Every exception class of the package derives from `PseoDasError` (a test walks the
package's modules), so the CLI maps them all in one place: it prints the message after the
command's headline, with no traceback unless `--debug`, and exits with the class's
`exit_code`. A new refusal therefore never surfaces as an "unexpected error".

This module imports nothing of the project: every layer may import it.
"""
from __future__ import annotations

EXIT_CHECK_FAILED = 1   # a check on the outputs failed (or could not run)
EXIT_BAD_INPUT = 2      # refused: bad input, argument, configuration, store or budget


class PseoDasError(Exception):
    """A refusal or a failed check the user can act on. Its message (`str(exc)`) says what
    is wrong and what to do; `exit_code` is the CLI's exit status for it (a class sets its
    own; an instance may too)."""

    exit_code: int = EXIT_BAD_INPUT
