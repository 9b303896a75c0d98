"""The mechanism layer: the only code that draws noise, and the privacy ledger it
writes to before every draw.

Noise comes from ChaCha20 (randomgen) under numpy's Generator: cryptographically
secure and seedable. Each tabulation gets its own stream, keyed by
SHA-256(release seed, tabulation id), and noise is assigned in the caller's canonical
cell order, so outputs depend only on seed, data and configuration.
"""
from __future__ import annotations

import hashlib
import math
import secrets
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from randomgen import ChaCha

GEOMETRIC = "two-sided geometric"
POST_PROCESSING = "post-processing (sum of noisy histograms)"
RANDOMIZED_POST_PROCESSING = "randomized post-processing (weighted draws)"
STREAM_DOMAIN = b"pseo-das/noise-stream/v1"


class PrivacyBudgetExceeded(RuntimeError):
    """A spend would take the release's total epsilon over its cap."""


@dataclass(frozen=True)
class LedgerEntry:
    tabulation_id: str
    product: str
    mechanism: str
    epsilon: float
    sensitivity: int
    n_cells: int
    n_bins: int
    composition: str
    derived_from: str
    noise_stream: str  # SHA-256 of the stream key: identifies the stream, reveals nothing


class PrivacyLedger:
    """Every measurement and derivation of a release. Spends compose sequentially
    and never exceed the cap; recording the same spend twice (a task retry) is a no-op."""

    def __init__(self, epsilon_cap: float):
        self.epsilon_cap = epsilon_cap
        self._entries: dict[str, LedgerEntry] = {}

    @property
    def entries(self) -> list[LedgerEntry]:
        return list(self._entries.values())

    @property
    def total_epsilon(self) -> float:
        return math.fsum(e.epsilon for e in self._entries.values())

    def record(self, entry: LedgerEntry) -> LedgerEntry:
        known = self._entries.get(entry.tabulation_id)
        if known is not None:
            if known != entry:
                raise PrivacyBudgetExceeded(
                    f"tabulation {entry.tabulation_id} is already in the ledger with "
                    "other parameters; a tabulation is measured once per release")
            return known
        if self.total_epsilon + entry.epsilon > self.epsilon_cap + 1e-12:
            raise PrivacyBudgetExceeded(
                f"spending epsilon {entry.epsilon:g} on {entry.tabulation_id} would take the "
                f"total to {self.total_epsilon + entry.epsilon:g}, over the cap "
                f"{self.epsilon_cap:g}")
        self._entries[entry.tabulation_id] = entry
        return entry

    @classmethod
    def of(cls, epsilon_cap: float, entries: list[LedgerEntry]) -> "PrivacyLedger":
        """The ledger of a release, assembled from the entries its tasks returned."""
        ledger = cls(epsilon_cap)
        for entry in entries:
            ledger.record(entry)
        return ledger

    def to_frame(self) -> pd.DataFrame:
        columns = list(LedgerEntry.__dataclass_fields__)
        return pd.DataFrame([asdict(e) for e in self._entries.values()], columns=columns)


def derived_entry(tabulation_id: str, product: str, n_cells: int, n_bins: int,
                  derived_from: str) -> LedgerEntry:
    """The ledger entry of a post-processed table (zero epsilon) and the noisy table it sums."""
    return LedgerEntry(tabulation_id, product, POST_PROCESSING, 0.0, 0, n_cells, n_bins,
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


def noise_generator(release_seed: bytes, tabulation_id: str) -> np.random.Generator:
    key = int.from_bytes(stream_key(release_seed, tabulation_id), "little")
    return np.random.Generator(ChaCha(key=key, counter=0, rounds=20))


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


def measure_with_geometric_noise(release_seed: bytes, measurement_id: str, tabulation_id: str,
                                 product: str, cells: pd.DataFrame, true_counts: np.ndarray,
                                 epsilon: float) -> NoisyMeasurement:
    """Noisy counts = true counts + (X - Y), X, Y i.i.d. Geometric(p = 1 - exp(-epsilon)),
    one draw per entry of `true_counts` (cells x bins, canonical order), zeros included,
    from the stream SHA-256(domain, seed, measurement id).

    Privacy cost: `epsilon` for the whole array, provided every person contributes to at
    most one entry (sensitivity 1; parallel composition across cells). The ledger entry is
    returned with the noise: no noise leaves this function without its entry.
    """
    n_cells, n_bins = true_counts.shape
    entry = LedgerEntry(
        tabulation_id, product, GEOMETRIC, float(epsilon), 1, n_cells, n_bins,
        "parallel across the cells of this tabulation (each graduate in at most one "
        "cell and bin); sequential with every other tabulation",
        "", hashlib.sha256(stream_key(release_seed, measurement_id)).hexdigest())
    generator = noise_generator(release_seed, measurement_id)
    p = -math.expm1(-epsilon)
    x = generator.geometric(p, size=true_counts.shape)
    y = generator.geometric(p, size=true_counts.shape)
    return NoisyMeasurement(measurement_id, cells, true_counts.astype(np.int64) + (x - y), entry)


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
        step_id, product, RANDOMIZED_POST_PROCESSING, 0.0, 0, n_cells, n_bins,
        "post-processing of noisy measurements: no additional privacy loss", derived_from,
        hashlib.sha256(stream_key(stream_seed, step_id)).hexdigest())
    return noise_generator(stream_seed, step_id).standard_exponential(n_draws), entry
