"""The privacy ledger: one entry per measurement (its privacy statement) or derivation of a
release, composed sequentially under the release's cap in exact arithmetic, and ledger.csv
(and the flat records of earlier publication records) read from it. Every regime module
(geometric.py, employer_side.py, laplace.py, post_processing.py) returns its draws with
their entry. Privacy cost: none.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:        # pandas is imported where a frame is made: noise-sample starts without it
    import pandas as pd

from pseo_das.epsilon import epsilon_text, exact_epsilon
from pseo_das.errors import PseoDasError
from pseo_das.tasks.privacy.establishment import FlowsMechanism, PrivacyNotion
from pseo_das.tasks.privacy.statement import (EmployerGuarantee, Mechanism, PrivacyStatement,
                                              ReleaseGuarantee, geometric_statement,
                                              laplace_statement, release_guarantee)

POST_PROCESSING = "post-processing (sum of noisy histograms)"
RANDOMIZED_POST_PROCESSING = "randomized post-processing (weighted draws)"
# ledger.csv's `formal_guarantee`: whether an entry's epsilon is a formal differential-privacy
# guarantee. "no": the noise scale depends on a data-dependent parameter that is published
# without noise (the maximum observed sensitivity of Chetty and Friedman 2019).
FORMAL_YES = "yes"
FORMAL_NO = "no"
# The mechanisms whose entries are noisy counts (the values drawn are counted against the
# ledger); continuous Laplace measures the cell statistics' real values.
MEASURING_MECHANISMS = frozenset(Mechanism) - {Mechanism.LAPLACE}


class PrivacyBudgetExceeded(PseoDasError, RuntimeError):
    """A spend would take the release's total epsilon over its cap."""

    quotes_records = False


@dataclass(frozen=True)
class LedgerEntry:
    """One row of the privacy ledger: a measurement (its privacy statement) or a derivation
    (post-processing, zero epsilon: no statement). The columns of ledger.csv are properties
    read from the statement."""
    tabulation_id: str
    product: str
    n_cells: int
    n_bins: int
    composition: str
    derived_from: str
    noise_stream: str  # SHA-256 of the stream key: identifies the stream, reveals nothing
    statement: PrivacyStatement | None = None   # None: a derivation
    derivation: str = POST_PROCESSING           # what a derivation is (ledger `mechanism`)
    observed_sensitivity: float | None = None   # MOS: chi, computed from the data

    @property
    def mechanism(self) -> str:
        return self.derivation if self.statement is None else self.statement.mechanism.value

    @property
    def epsilon(self) -> Fraction:
        return Fraction(0) if self.statement is None else self.statement.epsilon

    @property
    def delta(self) -> Fraction:
        return Fraction(0) if self.statement is None else self.statement.delta

    @property
    def sensitivity(self) -> int | float | None:
        """Declared, or observed (MOS chi); None: a non-formal measurement recorded
        without its observed sensitivity."""
        if self.statement is None:
            return 0
        declared = self.statement.sensitivity
        return self.observed_sensitivity if declared is None else declared

    @property
    def formal_guarantee(self) -> str:
        return FORMAL_NO if self.statement is not None and not self.statement.formal else FORMAL_YES

    @property
    def employer(self) -> EmployerGuarantee | None:
        return None if self.statement is None else self.statement.employer

    @property
    def alpha(self) -> str:
        return "" if self.employer is None else f"{self.employer.alpha:g}"

    @property
    def employer_notion(self) -> str:
        return "" if self.employer is None else self.employer.notion.value

    @property
    def employer_epsilon(self) -> str:
        """The employers' worst case: epsilon, or d x epsilon (weak notion, d cells)."""
        if self.employer is None:
            return ""
        return f"{self.employer.worst_case_epsilon(self.epsilon, self.n_cells):g}"


# ledger.csv's columns; the employer ones only when some entry protects employers (the
# columns of earlier versions otherwise).
LEDGER_COLUMNS = ("tabulation_id", "product", "mechanism", "epsilon", "sensitivity", "n_cells",
                  "n_bins", "composition", "derived_from", "noise_stream", "formal_guarantee",
                  "alpha", "delta", "employer_notion", "employer_epsilon")
EMPLOYER_COLUMNS = ("alpha", "delta", "employer_notion", "employer_epsilon")


def measured_entry(statement: PrivacyStatement, n_cells: int, n_bins: int, composition: str,
                   noise_stream: str, observed_sensitivity: float | None = None) -> LedgerEntry:
    """The ledger entry of a measurement: its statement, cells and stream."""
    return LedgerEntry(statement.tabulation_id, statement.product, n_cells, n_bins, composition,
                       "", noise_stream, statement, observed_sensitivity=observed_sensitivity)


class PrivacyLedger:
    """Every measurement and derivation of a release. Spends compose sequentially
    and never exceed the cap, in exact arithmetic; recording the same spend twice (a task
    retry) is a no-op."""

    def __init__(self, epsilon_cap: float | str | Fraction):
        self.epsilon_cap = exact_epsilon(epsilon_cap)
        self._entries: dict[str, LedgerEntry] = {}

    @property
    def entries(self) -> list[LedgerEntry]:
        return list(self._entries.values())

    @property
    def total_epsilon(self) -> Fraction:
        return sum((e.epsilon for e in self._entries.values()), Fraction(0))

    def record(self, entry: LedgerEntry) -> LedgerEntry:
        known = self._entries.get(entry.tabulation_id)
        if known is not None:
            if known != entry:
                raise PrivacyBudgetExceeded(
                    f"tabulation {entry.tabulation_id} is already in the ledger with "
                    "other parameters; a tabulation is measured once per release")
            return known
        total = self.total_epsilon + entry.epsilon
        if total > self.epsilon_cap:
            raise PrivacyBudgetExceeded(
                f"spending epsilon {epsilon_text(entry.epsilon)} on {entry.tabulation_id} would "
                f"take the total to {epsilon_text(total)}, over the cap "
                f"{epsilon_text(self.epsilon_cap)}")
        self._entries[entry.tabulation_id] = entry
        return entry

    @property
    def statements(self) -> list[PrivacyStatement]:
        """The privacy statements of the release's measurements, in ledger order."""
        return [e.statement for e in self._entries.values() if e.statement is not None]

    def guarantee(self) -> ReleaseGuarantee:
        """The release's guarantee, derived from its measurements' statements."""
        return release_guarantee(self.statements)

    @classmethod
    def of(cls, epsilon_cap: float | str | Fraction, entries: list[LedgerEntry]
           ) -> "PrivacyLedger":
        """The ledger of a release, assembled from the entries its tasks returned."""
        ledger = cls(epsilon_cap)
        for entry in entries:
            ledger.record(entry)
        return ledger

    def to_frame(self) -> pd.DataFrame:
        """The ledger as ledger.csv has it: epsilons (and deltas) as exact decimals (or
        fractions); the employer columns only when some entry protects employers."""
        import pandas as pd

        columns = list(LEDGER_COLUMNS)
        if not any(e.employer is not None for e in self._entries.values()):
            columns = [c for c in columns if c not in EMPLOYER_COLUMNS]
        rows = [{c: _ledger_text(e, c) for c in columns} for e in self._entries.values()]
        return pd.DataFrame(rows, columns=columns)


def _ledger_text(entry: LedgerEntry, column: str) -> object:
    if column == "epsilon":
        return epsilon_text(entry.epsilon)
    if column == "delta":   # as earlier versions wrote it: empty where no employer column applies
        return "" if entry.employer is None else epsilon_text(entry.delta)
    return getattr(entry, column)


def ledger_row(entry: LedgerEntry) -> dict:
    """A ledger entry as a flat record (ledger.csv's columns, epsilon exact as text, and its
    statement's stream id), as publication records of earlier versions kept them."""
    return {**{c: _ledger_text(entry, c) for c in LEDGER_COLUMNS},
            "epsilon": str(entry.epsilon),
            "stream_id": "" if entry.statement is None else entry.statement.stream_id}


def entry_of_ledger_row(row: dict, geometric_sensitivity: int | None = None) -> LedgerEntry:
    """The ledger entry of a flat record (`ledger_row`, or the record of a release of an
    earlier version: its cell statistics, geometric counts and Laplace values). A geometric
    row's sensitivity is the record's, or `geometric_sensitivity` when given (the
    contribution bound the release was configured with: the audit)."""
    epsilon, formal = Fraction(row["epsilon"]), row.get("formal_guarantee", FORMAL_YES) == FORMAL_YES
    tab, product, stream = row["tabulation_id"], row["product"], row.get("stream_id", "")
    observed = None
    if row["mechanism"] == Mechanism.GEOMETRIC:
        statement = geometric_statement(tab, product, stream, epsilon, int(row["n_bins"]),
                                        geometric_sensitivity
                                        or _whole_sensitivity(row.get("sensitivity", 1)))
    elif row["mechanism"] == Mechanism.LAPLACE:
        sensitivity = float(row["sensitivity"])
        statement = laplace_statement(tab, product, stream, epsilon,
                                      sensitivity if formal else None, formal)
        observed = None if formal else sensitivity
    elif row["mechanism"] in set(Mechanism):
        protecting = {Mechanism.protecting_employers(m): m for m in FlowsMechanism
                      if m.protects_employers}
        statement = PrivacyStatement(
            tab, product, stream, Mechanism(row["mechanism"]), epsilon,
            exact_epsilon(row.get("delta") or 0), 1, int(row["n_bins"]), formal,
            employer=EmployerGuarantee(protecting[Mechanism(row["mechanism"])],
                                       float(row["alpha"]), PrivacyNotion(row["employer_notion"])))
    else:
        raise ValueError(f"{tab}: a recorded {row['mechanism']} entry cannot be read back")
    return measured_entry(statement, int(row["n_cells"]), int(row["n_bins"]),
                          row["composition"], row["noise_stream"], observed)


def _whole_sensitivity(text: object) -> int:
    """A geometric row's recorded sensitivity ('1', or '1.0' beside MOS chi) as the whole
    number it declares; ValueError for anything else."""
    value = float(str(text))
    if not value.is_integer():
        raise ValueError(f"a geometric measurement's sensitivity is a whole number, not {text!r}")
    return int(value)


def derived_entry(tabulation_id: str, product: str, n_cells: int, n_bins: int,
                  derived_from: str, noise_stream: str = "",
                  derivation: str = POST_PROCESSING) -> LedgerEntry:
    """The ledger entry of a post-processed table (zero epsilon) and the noisy table it is
    derived from; a randomized step names the stream of its draws."""
    return LedgerEntry(tabulation_id, product, n_cells, n_bins,
                       "post-processing of noisy measurements: no additional privacy loss",
                       derived_from, noise_stream, derivation=derivation)


class RowBlocks(Protocol):
    """A rows x columns integer table held in a file and read by rows
    (tasks/inputs/row_files.SpilledRows)."""
    @property
    def shape(self) -> tuple[int, int]: ...

    @property
    def dtype(self) -> np.dtype: ...

    def rows(self, start: int, stop: int) -> np.ndarray: ...

    def __array__(self, dtype=None, copy=None) -> np.ndarray: ...      # the whole table


@dataclass(frozen=True)
class NoisyMeasurement:
    """The noisy values of one measurement (cells x columns, canonical cell order; a
    national one in a file, read by rows: `RowBlocks`) and the ledger entry that records
    it. True counts never leave the measuring task."""
    measurement_id: str
    cells: pd.DataFrame
    values: np.ndarray | RowBlocks
    entry: LedgerEntry
