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
from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np
import pandas as pd
from randomgen import ChaCha

from pseo_das.tasks.privacy.discrete_laplace import draw, inversion_table
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
        rows = [dict(asdict(e), epsilon=epsilon_text(e.epsilon)) for e in self._entries.values()]
        return pd.DataFrame(rows, columns=columns)


def derived_entry(tabulation_id: str, product: str, n_cells: int, n_bins: int,
                  derived_from: str) -> LedgerEntry:
    """The ledger entry of a post-processed table (zero epsilon) and the noisy table it sums."""
    return LedgerEntry(tabulation_id, product, POST_PROCESSING, Fraction(0), 0, n_cells, n_bins,
                       "post-processing of noisy measurements: no additional privacy loss",
                       derived_from, "")


def fresh_release_seed() -> str:
    """256 fresh bits from the operating system's CSPRNG, as 64 hex digits."""
    return secrets.token_hex(32)


def seed_sha256(release_seed: bytes) -> str:
    """The seed's public fingerprint (documents carry this, never the seed)."""
    return hashlib.sha256(release_seed).hexdigest()


def stream_key(release_seed: bytes, tabulation_id: str) -> bytes:
    return hashlib.sha256(STREAM_DOMAIN + b"\x00" + release_seed + b"\x00"
                          + tabulation_id.encode()).digest()


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
        "", hashlib.sha256(stream_key(release_seed, measurement_id)).hexdigest())
    noise = discrete_laplace_noise(release_seed, measurement_id, epsilon, true_counts.shape)
    return NoisyMeasurement(measurement_id, cells, true_counts.astype(np.int64) + noise, entry)


def post_processing_seed(sources: tuple[str, ...]) -> bytes:
    """The seed of a randomized post-processing step: SHA-256 of the content addresses of
    the stored measurements it reads. The same stored measurements give the same draws in
    every release and every republication; the draws carry no secret (post-processing)."""
    return hashlib.sha256(b"pseo-das/post-processing/v1\x00" + "\x00".join(sorted(sources))
                          .encode()).digest()


def post_processing_exponentials(stream_seed: bytes, step_id: str, product: str, n_cells: int,
                                 n_bins: int, derived_from: str,
                                 n_draws: int) -> tuple[np.ndarray, LedgerEntry]:
    """`n_draws` standard exponential variates for a randomized post-processing step
    (`step_id`) that reads only the noisy table `derived_from`, and its ledger entry.

    Privacy cost: none (post-processing of noisy values).
    """
    entry = LedgerEntry(
        step_id, product, RANDOMIZED_POST_PROCESSING, Fraction(0), 0, n_cells, n_bins,
        "post-processing of noisy measurements: no additional privacy loss", derived_from,
        hashlib.sha256(stream_key(stream_seed, step_id)).hexdigest())
    return noise_generator(stream_seed, step_id).standard_exponential(n_draws), entry


def post_processing_split(stream_seed: bytes, step_id: str, product: str, n_cells: int,
                          n_bins: int, derived_from: str, counts: np.ndarray,
                          shares: np.ndarray) -> tuple[np.ndarray, LedgerEntry]:
    """Split each noisy count across destinations at random by `shares` (the CIP recast,
    technical appendix B): the magnitude |c| follows Multinomial(|c|, shares of its row)
    and every part keeps the sign of c, so the parts sum to c exactly. `counts`: (n,)
    int64; `shares`: (n, k) rows summing to 1 (zeros for destinations a row lacks).
    Returns the (n, k) parts and the ledger entry of the step.

    Privacy cost: none (randomized post-processing of noisy measurements; the draws come
    from a stream keyed by the measurements' content addresses, recorded in the ledger).
    """
    entry = LedgerEntry(
        step_id, product, RANDOMIZED_POST_PROCESSING, Fraction(0), 0, n_cells, n_bins,
        "post-processing of noisy measurements: no additional privacy loss", derived_from,
        hashlib.sha256(stream_key(stream_seed, step_id)).hexdigest())
    counts = np.asarray(counts, dtype=np.int64)
    parts = np.zeros(shares.shape, dtype=np.int64)
    moving = counts != 0
    if moving.any():
        generator = noise_generator(stream_seed, step_id)
        drawn = generator.multinomial(np.abs(counts[moving]), shares[moving])
        parts[moving] = np.sign(counts[moving])[:, None] * drawn
    return parts, entry


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
        composition, "", hashlib.sha256(stream_key(release_seed, measurement_id)).hexdigest(),
        FORMAL_YES if formal else FORMAL_NO)
    return values + laplace_noise(release_seed, measurement_id, scales), entry
