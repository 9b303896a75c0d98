"""The mechanism layer: the only code that draws noise, and the privacy ledger it
writes to before every draw.

Noise comes from ChaCha20 (randomgen): cryptographically secure and seedable. Each
measurement gets its own stream, keyed by SHA-256(release seed, measurement id), and
noise is assigned in the caller's canonical cell order, so outputs depend only on seed,
data and configuration. The release noise is drawn exactly from the stream's 64-bit
words (`discrete_laplace`: integers only, unbounded support).
"""
from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd
from randomgen import ChaCha

from pseo_das.errors import PseoDasError
from pseo_das.tasks.privacy.discrete_laplace import draw, inversion_table
from pseo_das.tasks.privacy.establishment import (SMOOTH_GAMMA_FACTOR, SMOOTH_LAPLACE_FACTOR,
                                                  EmployerProtection, FlowsMechanism,
                                                  PrivacyNotion, log_laplace_values,
                                                  smooth_sensitivity)
from pseo_das.tasks.privacy.statement import (EmployerGuarantee, Mechanism, PrivacyStatement,
                                              ReleaseGuarantee, geometric_statement,
                                              laplace_statement, release_guarantee)
from pseo_das.epsilon import epsilon_text, exact_epsilon

GEOMETRIC = Mechanism.GEOMETRIC
LAPLACE = Mechanism.LAPLACE
POST_PROCESSING = "post-processing (sum of noisy histograms)"
RANDOMIZED_POST_PROCESSING = "randomized post-processing (weighted draws)"
# ledger.csv's `formal_guarantee`: whether an entry's epsilon is a formal differential-privacy
# guarantee. "no": the noise scale depends on a data-dependent parameter that is published
# without noise (the maximum observed sensitivity of Chetty and Friedman 2019).
FORMAL_YES = "yes"
FORMAL_NO = "no"
STREAM_DOMAIN = b"pseo-das/noise-stream/v1"
# The mechanisms whose entries are noisy counts (the values drawn are counted against the
# ledger); continuous Laplace measures the cell statistics' real values.
MEASURING_MECHANISMS = frozenset(Mechanism) - {Mechanism.LAPLACE}
COMPOSITION = ("parallel across the cells of this tabulation (each graduate in at most one "
               "cell and bin); sequential with every other tabulation")


def geometric_composition(k: int) -> str:
    """The ledger's composition text of geometric counts with contribution bound k."""
    if k == 1:
        return COMPOSITION
    return (f"each person in at most {k} cells and bins of this tabulation (at most {k} degree "
            f"records: sensitivity {k}, noise at epsilon / {k}); sequential with every other "
            "tabulation")


class PrivacyBudgetExceeded(PseoDasError, RuntimeError):
    """A spend would take the release's total epsilon over its cap."""

    quotes_records = False


class MeasurementRefused(PseoDasError, ValueError):
    """An array the mechanism is not calibrated for: its statement declares another
    mechanism, sensitivity or shape. Nothing is drawn."""


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
                  derived_from: str) -> LedgerEntry:
    """The ledger entry of a post-processed table (zero epsilon) and the noisy table it sums."""
    return LedgerEntry(tabulation_id, product, n_cells, n_bins,
                       "post-processing of noisy measurements: no additional privacy loss",
                       derived_from, "")


def fresh_seed_bits() -> bytes:
    """256 fresh bits from the operating system's CSPRNG: a new release seed."""
    return secrets.token_bytes(32)


def stream_key(release_seed: bytes, tabulation_id: str) -> bytes:
    return hashlib.sha256(STREAM_DOMAIN + b"\x00" + release_seed + b"\x00"
                          + tabulation_id.encode()).digest()


def stream_sha256(release_seed: bytes, stream_id: str) -> str:
    """What a ledger entry records of a noise stream: the SHA-256 of its key (the key
    itself would let anyone redraw the noise)."""
    return hashlib.sha256(stream_key(release_seed, stream_id)).hexdigest()


def _stream_bits(release_seed: bytes, tabulation_id: str) -> ChaCha:
    """The ChaCha20 stream (20 rounds) keyed by SHA-256(domain, seed, tabulation id)."""
    key = int.from_bytes(stream_key(release_seed, tabulation_id), "little")
    return ChaCha(key=key, counter=0, rounds=20)


def _noise_generator(release_seed: bytes, tabulation_id: str) -> np.random.Generator:
    return np.random.Generator(_stream_bits(release_seed, tabulation_id))


def geometric_variance(epsilon: float, sensitivity: int = 1) -> float:
    """Variance of the two-sided geometric noise at epsilon for counts of `sensitivity`
    k: 2a/(1-a)^2 with a = exp(-epsilon / k)."""
    a = math.exp(-epsilon / sensitivity)
    return 2 * a / (1 - a) ** 2


@dataclass(frozen=True)
class NoisyMeasurement:
    """The noisy values of one measurement (cells x columns, canonical cell order) and the
    ledger entry that records it. True counts never leave the measuring task."""
    measurement_id: str
    cells: pd.DataFrame
    values: np.ndarray
    entry: LedgerEntry


def discrete_laplace_noise(release_seed: bytes, measurement_id: str,
                           epsilon: float | str | Fraction, shape: tuple[int, ...]) -> np.ndarray:
    """Two-sided geometric noise, exactly: one value per entry of `shape`, from the
    ChaCha20 stream SHA-256(domain, seed, measurement id), 64-bit words in order, by the
    integer-only inversion of `discrete_laplace` (words it cannot decide alone take the
    following words of the same stream)."""
    table = inversion_table(exact_epsilon(epsilon))
    bits = _stream_bits(release_seed, measurement_id)
    size = int(np.prod(shape, dtype=np.int64))
    noise = draw(table, bits.random_raw(size), lambda: int(bits.random_raw()))
    return noise.reshape(shape)


def check_calibration(statement: PrivacyStatement, mechanism: Mechanism,
                      values: np.ndarray, sensitivity: int | float | None) -> None:
    """Refuse (MeasurementRefused, nothing drawn) an array the mechanism is not calibrated
    for: a statement of another mechanism, a declared sensitivity other than the one the
    noise is calibrated to, or values that are not cells x the statement's columns."""
    if statement.mechanism is not mechanism:
        raise MeasurementRefused(f"{statement.stream_id}: the statement declares "
                                 f"{statement.mechanism}, this mechanism is {mechanism}")
    if statement.sensitivity != sensitivity:
        raise MeasurementRefused(
            f"{statement.stream_id}: the statement declares sensitivity "
            f"{statement.sensitivity}, but {mechanism} noise is calibrated to sensitivity "
            f"{sensitivity}: refused, nothing drawn")
    shape = np.shape(values)
    if len(shape) != 2 or shape[1] != statement.columns:
        raise MeasurementRefused(
            f"{statement.stream_id}: an array of shape {shape}, but the statement declares "
            f"cells x {statement.columns} values: refused, nothing drawn")


def geometric_noise_epsilon(epsilon: float | str | Fraction, sensitivity: int) -> Fraction:
    """The parameter of the two-sided geometric noise that gives epsilon-DP for counts of
    L1 sensitivity `sensitivity`: epsilon / sensitivity, exactly (q = exp(-epsilon / k),
    p = 1 - q)."""
    return exact_epsilon(epsilon) / sensitivity


def measure_with_geometric_noise(release_seed: bytes, statement: PrivacyStatement,
                                 cells: pd.DataFrame, true_counts: np.ndarray,
                                 sensitivity: int = 1) -> NoisyMeasurement:
    """Noisy counts = true counts + two-sided geometric noise (discrete Laplace, P(x) =
    (1-q)/(1+q) q^|x|, q = exp(-epsilon / k)), one draw per entry of `true_counts` (cells
    x the statement's columns, canonical order), zeros included, drawn exactly (no floating
    point; unbounded support) from the stream SHA-256(domain, seed, statement's stream id).
    `sensitivity` k: what the counts were bounded to (each person adds at most k in all:
    the contribution bound of the counting pass); the statement must declare the same.

    Privacy cost: the statement's epsilon (pure epsilon-DP) for the whole array, provided
    every person contributes at most k to the entries in all (L1 sensitivity k; k = 1:
    parallel composition across cells). The ledger entry is returned with the noise: no
    noise leaves this function without its entry.
    """
    check_calibration(statement, Mechanism.GEOMETRIC, true_counts, sensitivity)
    n_cells, n_bins = true_counts.shape
    entry = measured_entry(statement, n_cells, n_bins,
                           geometric_composition(sensitivity),
                           stream_sha256(release_seed, statement.stream_id))
    noise = discrete_laplace_noise(release_seed, statement.stream_id,
                                   geometric_noise_epsilon(statement.epsilon, sensitivity),
                                   true_counts.shape)
    return NoisyMeasurement(statement.stream_id, cells, true_counts.astype(np.int64) + noise,
                            entry)


def post_processing_seed(sources: tuple[str, ...]) -> bytes:
    """The seed of a randomized post-processing step: SHA-256 of the content addresses of
    the stored measurements it reads. The same stored measurements give the same draws in
    every release and every republication; the draws carry no secret (post-processing)."""
    return hashlib.sha256(b"pseo-das/post-processing/v1\x00" + "\x00".join(sorted(sources))
                          .encode()).digest()


def post_processing_exponentials(stream_seed: bytes, step_id: str, product: str, n_cells: int,
                                 n_bins: int, derived_from: str
                                 ) -> tuple[Callable[[int], np.ndarray], LedgerEntry]:
    """Standard exponential variates for a randomized post-processing step (`step_id`) that
    reads only the noisy table `derived_from`, and its ledger entry. Returns `draw(n)`,
    which gives the stream's next n variates: successive calls continue one stream, so
    a step done block by block draws exactly what it would draw at once.

    Privacy cost: none (post-processing of noisy values).
    """
    entry = LedgerEntry(
        step_id, product, n_cells, n_bins,
        "post-processing of noisy measurements: no additional privacy loss", derived_from,
        stream_sha256(stream_seed, step_id), derivation=RANDOMIZED_POST_PROCESSING)
    return _noise_generator(stream_seed, step_id).standard_exponential, entry


SPLIT_BLOCK = 1 << 20   # counts split at a time by post_processing_split_blocks


def post_processing_split_blocks(stream_seed: bytes, step_id: str, product: str, n_cells: int,
                                 n_bins: int, derived_from: str, counts: np.ndarray,
                                 shares: np.ndarray, repeat: int = 1, block: int = SPLIT_BLOCK
                                 ) -> tuple[Iterator[tuple[int, np.ndarray]], LedgerEntry]:
    """Split each noisy count across destinations at random by `shares` (the CIP recast,
    technical appendix B): the magnitude |c| follows Multinomial(|c|, shares of its row)
    and every part keeps the sign of c, so the parts sum to c exactly. `counts`: (n,)
    int64; `shares`: (n / repeat, k) rows summing to 1 (zeros for destinations a row
    lacks), row i for counts i * repeat to (i + 1) * repeat - 1 (a cell's shares for each
    of its bins). Returns the parts, `block` counts at a time as (first count, parts of
    shape (b, k)), and the ledger entry of the step. The draws are the same whatever the
    block: one stream, consumed count by count in order.

    Privacy cost: none (randomized post-processing of noisy measurements; the draws come
    from a stream keyed by the measurements' content addresses, recorded in the ledger).
    """
    entry = LedgerEntry(
        step_id, product, n_cells, n_bins,
        "post-processing of noisy measurements: no additional privacy loss", derived_from,
        stream_sha256(stream_seed, step_id), derivation=RANDOMIZED_POST_PROCESSING)
    counts = np.asarray(counts, dtype=np.int64)
    if len(counts) != len(shares) * repeat:
        raise ValueError(f"{step_id}: {len(counts)} counts for {len(shares)} share rows "
                         f"of {repeat} counts each")

    def blocks() -> Iterator[tuple[int, np.ndarray]]:
        generator = _noise_generator(stream_seed, step_id)
        for first in range(0, len(counts), block):
            mine = counts[first:first + block]
            parts = np.zeros((len(mine), shares.shape[1]), dtype=np.int64)
            moving = mine != 0
            if moving.any():
                rows = (first + np.flatnonzero(moving)) // repeat
                drawn = generator.multinomial(np.abs(mine[moving]), shares[rows])
                parts[moving] = np.sign(mine[moving])[:, None] * drawn
            yield first, parts

    return blocks(), entry


def post_processing_split(stream_seed: bytes, step_id: str, product: str, n_cells: int,
                          n_bins: int, derived_from: str, counts: np.ndarray,
                          shares: np.ndarray) -> tuple[np.ndarray, LedgerEntry]:
    """`post_processing_split_blocks` in one piece: the (n, k) parts and the ledger entry.

    Privacy cost: none (randomized post-processing of noisy measurements).
    """
    blocks, entry = post_processing_split_blocks(stream_seed, step_id, product, n_cells, n_bins,
                                                 derived_from, counts, shares)
    parts = [part for _, part in blocks]
    return (np.concatenate(parts) if parts else np.zeros(np.shape(shares), dtype=np.int64)), entry


def synthesis_uniforms(synthesis_seed: bytes, step_id: str, count: int) -> np.ndarray:
    """`count` uniforms in [0, 1) for a step of the CART synthesizer (`pseo-das
    synthesize`, tasks/synthesis), from a ChaCha20 stream keyed by SHA-256(domain, seed,
    'synthesis/' + step id), so a synthetic file is reproducible from its seed.

    Privacy cost: NOT differentially private and not recorded in any ledger, because no
    guarantee is claimed: the synthesizer uses these draws to pick confidential donors'
    values from the leaves of models fitted on the confidential data. Its output carries no
    formal privacy guarantee and needs disclosure review before any release (its report
    says so).
    """
    return _noise_generator(synthesis_seed, "synthesis/" + step_id).random(count)


# Largest value of (1 + y^2) / (1 + y^4), reached at y^2 = sqrt(2) - 1: the rejection bound
# for sampling the density proportional to 1/(1 + y^4) from a Cauchy proposal.
_QUARTIC_OVER_CAUCHY = (1 + math.sqrt(2)) / 2


def sample_inverse_quartic(generator: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Exact draws (up to floating point) from the density (sqrt(2)/pi) / (1 + y^4), mean 0
    and variance 1, by rejection from a standard Cauchy proposal: accept y when
    u * (1 + sqrt(2))/2 <= (1 + y^2)/(1 + y^4); acceptance rate 2/(2 + sqrt(2)) = 0.586.
    Used by the Smooth Gamma mechanism (release streams) and, through
    tasks/study/simulation_noise.py, by the accuracy study (simulation streams).
    Privacy cost: none by itself (the caller scales it by a smooth sensitivity)."""
    size = math.prod(shape)
    accepted: list[np.ndarray] = []
    have = 0
    while have < size:
        want = int((size - have) * 1.75) + 64
        y = generator.standard_cauchy(want)
        u = generator.random(want)
        with np.errstate(over="ignore", invalid="ignore"):
            y2 = y * y
            keep = u * _QUARTIC_OVER_CAUCHY <= (1 + y2) / (1 + y2 * y2)
        accepted.append(y[keep])
        have += int(keep.sum())
    return np.concatenate(accepted)[:size].reshape(shape)


def employer_protected_values(generator: np.random.Generator, true_counts: np.ndarray,
                              largest_at_one_employer: np.ndarray,
                              protection: EmployerProtection) -> np.ndarray:
    """The real-valued outputs of `protection`'s mechanism for `true_counts` (any shape),
    with noise from `generator` (Log-Laplace, Smooth Gamma, Smooth Laplace: module doc of
    tasks/privacy/establishment.py). `largest_at_one_employer`: x_v of each count (same
    shape; unused by Log-Laplace). Privacy cost: (alpha, epsilon[, delta]) per count for
    the employers, epsilon[, delta] per graduate; the caller accounts for the composition."""
    protection.check()
    shape = np.shape(true_counts)
    counts = np.asarray(true_counts, dtype=np.float64)
    m = protection.mechanism
    if m is FlowsMechanism.LOG_LAPLACE:
        eta = generator.laplace(0.0, 1.0, shape)
        return log_laplace_values(counts, eta, protection.alpha, protection.epsilon,
                                  protection.unbiased)
    sensitivity = smooth_sensitivity(protection.alpha, largest_at_one_employer)
    if m is FlowsMechanism.SMOOTH_GAMMA:
        eta = sample_inverse_quartic(generator, shape)
        return counts + SMOOTH_GAMMA_FACTOR * sensitivity / protection.epsilon * eta
    if m is FlowsMechanism.SMOOTH_LAPLACE:
        eta = generator.laplace(0.0, 1.0, shape)
        return counts + SMOOTH_LAPLACE_FACTOR * sensitivity / protection.epsilon * eta
    raise ValueError(f"{m}: not an employer-protecting mechanism")


def whole_graduates(values: np.ndarray) -> np.ndarray:
    """Real-valued noisy counts rounded to whole graduates, halves up (post-processing),
    within +-2^62 (a log-Laplace draw far in its tail cannot overflow int64)."""
    rounded = np.floor(np.asarray(values, dtype=np.float64) + 0.5)
    return np.clip(rounded, -2.0 ** 62, 2.0 ** 62).astype(np.int64)


def employer_composition(notion: PrivacyNotion, graduate_cells: int) -> str:
    """The ledger's composition text of a measurement with employer protection."""
    if notion is PrivacyNotion.STRONG:
        return ("graduates: parallel across the cells (each graduate in one cell); "
                "employers: strong (alpha, epsilon), parallel across the cells (each "
                "establishment in one state x sector); sequential with every other "
                "tabulation")
    return ("graduates: parallel across the cells (each graduate in one cell and "
            "destination); employers: weak (alpha, epsilon) per cell, "
            f"{graduate_cells:,} graduate-attribute cells x epsilon in the worst "
            "case; sequential with every other tabulation")


def measure_with_employer_protection(release_seed: bytes, statement: PrivacyStatement,
                                     cells: pd.DataFrame, true_counts: np.ndarray,
                                     largest_at_one_employer: np.ndarray) -> NoisyMeasurement:
    """Noisy counts (cells x the statement's columns, canonical order) by the statement's
    employer-protecting mechanism, noise from the ChaCha20 stream SHA-256(domain, seed,
    stream id), rounded to whole graduates (post-processing). `largest_at_one_employer`:
    x_v per count (same shape).

    Privacy cost: for the graduates, epsilon (and delta for Smooth Laplace) for the whole
    array (each graduate in one count, sensitivity 1: parallel composition); for the
    employers, (alpha, epsilon[, delta]) per count, the statement's notion deciding the
    composition (ledger entry). The ledger entry comes with the noise."""
    protection = statement.protection()
    check_calibration(statement, Mechanism.protecting_employers(protection.mechanism),
                      true_counts, 1)
    protection.check()   # infeasible parameters are refused before anything is recorded
    n_cells, n_bins = true_counts.shape
    entry = measured_entry(statement, n_cells, n_bins,
                           employer_composition(statement.employer_guarantee().notion, n_cells),
                           stream_sha256(release_seed, statement.stream_id))
    values = employer_protected_values(_noise_generator(release_seed, statement.stream_id),
                                       true_counts, largest_at_one_employer, protection)
    return NoisyMeasurement(statement.stream_id, cells, whole_graduates(values), entry)


def laplace_noise(release_seed: bytes, measurement_id: str, scales: np.ndarray) -> np.ndarray:
    """Continuous Laplace noise, one draw per entry of `scales` (its scale b: density
    exp(-|x|/b) / 2b), in the caller's canonical order, from the ChaCha20 stream
    SHA-256(domain, seed, measurement id). Drawn in double precision by numpy's inversion
    of a uniform double, so, like every floating-point Laplace sampler (Mironov 2012), the
    set of values it can return is not the whole real line: the guarantee it carries is
    that of the Laplace mechanism up to that floating-point approximation. A scale of 0
    gives 0. Privacy cost: none by itself; `measure_with_laplace_noise` records it."""
    scales = np.asarray(scales, dtype=np.float64)
    if not np.isfinite(scales).all() or (scales < 0).any():
        raise ValueError(f"{measurement_id}: Laplace scales must be finite and non-negative")
    unit = _noise_generator(release_seed, measurement_id).laplace(0.0, 1.0, scales.shape)
    return unit * scales


def measure_with_laplace_noise(release_seed: bytes, statement: PrivacyStatement,
                               values: np.ndarray, scales: np.ndarray, composition: str,
                               observed_sensitivity: float | None = None
                               ) -> tuple[np.ndarray, LedgerEntry]:
    """`values` + Laplace(`scales`) (one draw per value, canonical order), and the ledger
    entry that records it: no noise leaves this function without its entry.

    Privacy cost: the statement's epsilon for the whole array when `scales` = (a bound on
    the sensitivity of each value) / epsilon and every person affects at most one value
    (parallel composition). A formal statement declares that bound and every scale must
    be exactly it / epsilon. A non-formal one (maximum observed sensitivity: the scale
    chi / (epsilon N_g) uses a chi computed from the data and published without noise)
    declares none; `observed_sensitivity` (chi) is then recorded in the ledger.
    """
    values = np.asarray(values, dtype=np.float64)
    check_calibration(statement, Mechanism.LAPLACE, values.reshape(-1, 1),
                      statement.sensitivity if statement.formal else None)
    scales = np.broadcast_to(np.asarray(scales, dtype=np.float64), values.shape)
    declared = statement.sensitivity   # a formal statement's (only those declare one: above)
    if declared is not None and not np.all(scales == declared / float(statement.epsilon)):
        raise MeasurementRefused(
            f"{statement.stream_id}: Laplace scales other than the declared sensitivity "
            f"{statement.sensitivity} / epsilon {epsilon_text(statement.epsilon)}: refused, "
            "nothing drawn")
    entry = measured_entry(statement, values.size, 1, composition,
                           stream_sha256(release_seed, statement.stream_id),
                           None if statement.formal else observed_sensitivity)
    return values + laplace_noise(release_seed, statement.stream_id, scales), entry
