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
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np
import pandas as pd
from randomgen import ChaCha

from pseo_das.tasks.privacy.discrete_laplace import draw, inversion_table
from pseo_das.tasks.privacy.establishment import (MECHANISM_NAMES, SMOOTH_GAMMA_FACTOR,
                                                  SMOOTH_LAPLACE_FACTOR, EmployerProtection,
                                                  FlowsMechanism, PrivacyNotion,
                                                  employer_epsilon, log_laplace_values,
                                                  smooth_sensitivity)
from pseo_das.epsilon import epsilon_text, exact_epsilon

GEOMETRIC = "two-sided geometric"
POST_PROCESSING = "post-processing (sum of noisy histograms)"
RANDOMIZED_POST_PROCESSING = "randomized post-processing (weighted draws)"
LAPLACE = "Laplace (continuous)"
# Whether a ledger entry's epsilon is a formal differential-privacy guarantee. "no": the
# noise scale depends on a data-dependent parameter that is published without noise (the
# maximum observed sensitivity of Chetty and Friedman 2019).
FORMAL_YES = "yes"
FORMAL_NO = "no"
STREAM_DOMAIN = b"pseo-das/noise-stream/v1"
# The mechanisms whose entries are measurements (noise drawn, epsilon spent).
MEASURING_MECHANISMS = frozenset({GEOMETRIC, *MECHANISM_NAMES.values()})


class PrivacyBudgetExceeded(RuntimeError):
    """A spend would take the release's total epsilon over its cap."""


@dataclass(frozen=True)
class LedgerEntry:
    tabulation_id: str
    product: str
    mechanism: str
    epsilon: Fraction  # exact
    sensitivity: int | float  # float: a data-dependent bound (MOS chi)
    n_cells: int
    n_bins: int
    composition: str
    derived_from: str
    noise_stream: str  # SHA-256 of the stream key: identifies the stream, reveals nothing
    formal_guarantee: str = FORMAL_YES  # FORMAL_NO: epsilon is not a formal DP guarantee
    # Employer-side protection (tasks/privacy/establishment.py); empty for the geometric
    # mechanism, and then not written to ledger.csv (the columns of earlier versions).
    alpha: str = ""
    delta: str = ""
    employer_notion: str = ""
    employer_epsilon: str = ""  # the employers' worst case: epsilon, or d x epsilon (weak)


EMPLOYER_COLUMNS = ("alpha", "delta", "employer_notion", "employer_epsilon")


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
    def formal_epsilon(self) -> Fraction:
        """The epsilon of the entries that are formal differential-privacy guarantees."""
        return sum((e.epsilon for e in self._entries.values()
                    if e.formal_guarantee == FORMAL_YES), Fraction(0))

    @property
    def non_formal_epsilon(self) -> Fraction:
        """The epsilon of the entries that are not (maximum observed sensitivity): noise
        calibrated as if to epsilon, but with a data-dependent scale published without
        noise, so no formal bound holds for them."""
        return self.total_epsilon - self.formal_epsilon

    def epsilon_statement(self) -> str:
        """The release's total epsilon, formal and non-formal spending apart."""
        if self.non_formal_epsilon == 0:
            return f"total epsilon {epsilon_text(self.total_epsilon)} (all formal, pure epsilon-DP)"
        return (f"total epsilon {epsilon_text(self.total_epsilon)}: formal (pure epsilon-DP) "
                f"{epsilon_text(self.formal_epsilon)}, plus {epsilon_text(self.non_formal_epsilon)}"
                " spent by maximum observed sensitivity (MOS), which is NOT a formal "
                "differential-privacy guarantee (its scale chi is published without noise)")

    @classmethod
    def of(cls, epsilon_cap: float | str | Fraction, entries: list[LedgerEntry]
           ) -> "PrivacyLedger":
        """The ledger of a release, assembled from the entries its tasks returned."""
        ledger = cls(epsilon_cap)
        for entry in entries:
            ledger.record(entry)
        return ledger

    def to_frame(self) -> pd.DataFrame:
        """The ledger as ledger.csv has it: epsilons as exact decimals (or fractions)."""
        columns = list(LedgerEntry.__dataclass_fields__)
        if not any(e.employer_notion for e in self._entries.values()):
            columns = [c for c in columns if c not in EMPLOYER_COLUMNS]
        rows = [{c: v for c, v in dict(asdict(e), epsilon=epsilon_text(e.epsilon)).items()
                 if c in columns} for e in self._entries.values()]
        return pd.DataFrame(rows, columns=columns)


def derived_entry(tabulation_id: str, product: str, n_cells: int, n_bins: int,
                  derived_from: str) -> LedgerEntry:
    """The ledger entry of a post-processed table (zero epsilon) and the noisy table it sums."""
    return LedgerEntry(tabulation_id, product, POST_PROCESSING, Fraction(0), 0, n_cells, n_bins,
                       "post-processing of noisy measurements: no additional privacy loss",
                       derived_from, "")


def stream_key(release_seed: bytes, tabulation_id: str) -> bytes:
    return hashlib.sha256(STREAM_DOMAIN + b"\x00" + release_seed + b"\x00"
                          + tabulation_id.encode()).digest()


def stream_sha256(release_seed: bytes, stream_id: str) -> str:
    """What a ledger entry records of a noise stream: the SHA-256 of its key (the key
    itself would let anyone redraw the noise)."""
    return hashlib.sha256(stream_key(release_seed, stream_id)).hexdigest()


def stream_bits(release_seed: bytes, tabulation_id: str) -> ChaCha:
    """The ChaCha20 stream (20 rounds) keyed by SHA-256(domain, seed, tabulation id)."""
    key = int.from_bytes(stream_key(release_seed, tabulation_id), "little")
    return ChaCha(key=key, counter=0, rounds=20)


def noise_generator(release_seed: bytes, tabulation_id: str) -> np.random.Generator:
    return np.random.Generator(stream_bits(release_seed, tabulation_id))


def geometric_variance(epsilon: float) -> float:
    """Variance of the two-sided geometric noise: 2a/(1-a)^2 with a = exp(-epsilon)."""
    a = math.exp(-epsilon)
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
    bits = stream_bits(release_seed, measurement_id)
    size = int(np.prod(shape, dtype=np.int64))
    noise = draw(table, bits.random_raw(size), lambda: int(bits.random_raw()))
    return noise.reshape(shape)


def measure_with_geometric_noise(release_seed: bytes, measurement_id: str, tabulation_id: str,
                                 product: str, cells: pd.DataFrame, true_counts: np.ndarray,
                                 epsilon: float | str | Fraction) -> NoisyMeasurement:
    """Noisy counts = true counts + two-sided geometric noise (discrete Laplace, P(k) =
    (1-q)/(1+q) q^|k|, q = exp(-epsilon)), one draw per entry of `true_counts` (cells x
    bins, canonical order), zeros included, drawn exactly (no floating point; unbounded
    support) from the stream SHA-256(domain, seed, measurement id).

    Privacy cost: `epsilon` (pure epsilon-DP) for the whole array, provided every person
    contributes to at most one entry (sensitivity 1; parallel composition across cells).
    The ledger entry is returned with the noise: no noise leaves this function without
    its entry.
    """
    n_cells, n_bins = true_counts.shape
    entry = LedgerEntry(
        tabulation_id, product, GEOMETRIC, exact_epsilon(epsilon), 1, n_cells, n_bins,
        "parallel across the cells of this tabulation (each graduate in at most one "
        "cell and bin); sequential with every other tabulation",
        "", stream_sha256(release_seed, measurement_id))
    noise = discrete_laplace_noise(release_seed, measurement_id, epsilon, true_counts.shape)
    return NoisyMeasurement(measurement_id, cells, true_counts.astype(np.int64) + noise, entry)


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
        step_id, product, RANDOMIZED_POST_PROCESSING, Fraction(0), 0, n_cells, n_bins,
        "post-processing of noisy measurements: no additional privacy loss", derived_from,
        stream_sha256(stream_seed, step_id))
    return noise_generator(stream_seed, step_id).standard_exponential, entry


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
        step_id, product, RANDOMIZED_POST_PROCESSING, Fraction(0), 0, n_cells, n_bins,
        "post-processing of noisy measurements: no additional privacy loss", derived_from,
        stream_sha256(stream_seed, step_id))
    counts = np.asarray(counts, dtype=np.int64)
    if len(counts) != len(shares) * repeat:
        raise ValueError(f"{step_id}: {len(counts)} counts for {len(shares)} share rows "
                         f"of {repeat} counts each")

    def blocks() -> Iterator[tuple[int, np.ndarray]]:
        generator = noise_generator(stream_seed, step_id)
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
    return noise_generator(synthesis_seed, "synthesis/" + step_id).random(count)


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


def employer_protection_entry(release_seed: bytes, measurement_id: str, tabulation_id: str,
                              product: str, n_cells: int, n_bins: int,
                              protection: EmployerProtection, notion: PrivacyNotion,
                              graduate_cells: int) -> LedgerEntry:
    """The ledger entry of a measurement with employer protection: the graduates' epsilon
    (each graduate is in one count: parallel composition), alpha, delta, the employers'
    notion and their worst-case epsilon (`graduate_cells` x epsilon for the weak notion)."""
    worst = employer_epsilon(notion, protection.epsilon, graduate_cells)
    if notion is PrivacyNotion.STRONG:
        composition = ("graduates: parallel across the cells (each graduate in one cell); "
                       "employers: strong (alpha, epsilon), parallel across the cells (each "
                       "establishment in one state x sector); sequential with every other "
                       "tabulation")
    else:
        composition = ("graduates: parallel across the cells (each graduate in one cell and "
                       "destination); employers: weak (alpha, epsilon) per cell, "
                       f"{graduate_cells:,} graduate-attribute cells x epsilon in the worst "
                       "case; sequential with every other tabulation")
    return LedgerEntry(
        tabulation_id, product, MECHANISM_NAMES[protection.mechanism],
        exact_epsilon(protection.epsilon), 1, n_cells, n_bins, composition, "",
        stream_sha256(release_seed, measurement_id),
        alpha=f"{protection.alpha:g}", delta=f"{protection.delta:g}",
        employer_notion=notion.value, employer_epsilon=f"{worst:g}")


def measure_with_employer_protection(release_seed: bytes, measurement_id: str,
                                     tabulation_id: str, product: str, cells: pd.DataFrame,
                                     true_counts: np.ndarray,
                                     largest_at_one_employer: np.ndarray,
                                     protection: EmployerProtection,
                                     notion: PrivacyNotion) -> NoisyMeasurement:
    """Noisy counts (cells x columns, canonical order) by `protection`'s mechanism, noise
    from the ChaCha20 stream SHA-256(domain, seed, measurement id), rounded to whole
    graduates (post-processing). `largest_at_one_employer`: x_v per count (same shape).

    Privacy cost: for the graduates, epsilon (and delta for Smooth Laplace) for the whole
    array (each graduate in one count: parallel composition); for the employers, (alpha,
    epsilon[, delta]) per count, `notion` deciding the composition (ledger entry). The
    ledger entry comes with the noise."""
    protection.check()   # infeasible parameters are refused before anything is recorded
    n_cells, n_bins = true_counts.shape
    entry = employer_protection_entry(release_seed, measurement_id, tabulation_id, product,
                                      n_cells, n_bins, protection, notion, n_cells)
    values = employer_protected_values(noise_generator(release_seed, measurement_id),
                                       true_counts, largest_at_one_employer, protection)
    return NoisyMeasurement(measurement_id, cells, whole_graduates(values), entry)


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
    unit = noise_generator(release_seed, measurement_id).laplace(0.0, 1.0, scales.shape)
    return unit * scales


def measure_with_laplace_noise(release_seed: bytes, measurement_id: str, tabulation_id: str,
                               product: str, values: np.ndarray, scales: np.ndarray,
                               epsilon: float | str | Fraction, sensitivity: float,
                               composition: str, formal: bool
                               ) -> tuple[np.ndarray, LedgerEntry]:
    """`values` + Laplace(`scales`) (one draw per value, canonical order), and the ledger
    entry that records it: no noise leaves this function without its entry.

    Privacy cost: `epsilon` for the whole array when `scales` = (a bound on the sensitivity
    of each value) / epsilon and every person affects at most one value (parallel
    composition). `formal` False marks the entry as not a formal guarantee (the maximum
    observed sensitivity method: the scale chi / (epsilon N_g) uses a chi computed from the
    data and published without noise). `sensitivity`: the largest sensitivity bound used
    (for MOS, chi itself), as recorded in the ledger.
    """
    values = np.asarray(values, dtype=np.float64)
    scales = np.broadcast_to(np.asarray(scales, dtype=np.float64), values.shape)
    entry = LedgerEntry(
        tabulation_id, product, LAPLACE, exact_epsilon(epsilon), sensitivity, values.size, 1,
        composition, "", stream_sha256(release_seed, measurement_id),
        FORMAL_YES if formal else FORMAL_NO)
    return values + laplace_noise(release_seed, measurement_id, scales), entry
