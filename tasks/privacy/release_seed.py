"""The release seed as a value: 256 bits from which every measurement's noise stream is
derived (streams.stream_key: the SHA-256 of the seed and the measurement id). Privacy
cost: none; the seed itself is secret.

Held as bytes. Written as hexadecimal text only at the edges: reading it (--seed,
$PSEO_DAS_SEED, --seed-file, the flow's masked parameter, the privacy store's and the MLflow
run's records of it) through the one validator `ReleaseSeed.from_hex`, and writing it to
the audit stores with `hex()`. Its repr and str name its public fingerprint, never the seed.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from pydantic import SecretStr

from pseo_das.errors import PseoDasError
from pseo_das.tasks.privacy.streams import fresh_seed_bits

SEED_BYTES = 32


def seed_sha256(seed: bytes) -> str:
    """A seed's public fingerprint (documents carry this, never the seed)."""
    return hashlib.sha256(seed).hexdigest()


class SeedError(PseoDasError, ValueError):
    """A seed that is not 256 bits (64 hexadecimal digits)."""

    quotes_records = False


@dataclass(frozen=True, repr=False)
class ReleaseSeed:
    bits: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if type(self.bits) is not bytes or len(self.bits) != SEED_BYTES:
            raise SeedError(f"a release seed is {SEED_BYTES} bytes (256 bits)")

    @classmethod
    def from_hex(cls, text: str) -> "ReleaseSeed":
        """The seed written as 64 hexadecimal digits (any case, an optional 0x, surrounding
        white space allowed); SeedError otherwise."""
        digits = text.strip().lower().removeprefix("0x")
        if len(digits) != 2 * SEED_BYTES or any(c not in "0123456789abcdef" for c in digits):
            raise SeedError("the seed must be 64 hexadecimal digits (256 bits)")
        return cls(bytes.fromhex(digits))

    @classmethod
    def fresh(cls) -> "ReleaseSeed":
        """256 fresh bits from the operating system's CSPRNG (drawn by the mechanism layer,
        the only code that touches randomness)."""
        return cls(fresh_seed_bits())

    def hex(self) -> str:
        """The seed as 64 hexadecimal digits: for the audit stores only."""
        return self.bits.hex()

    def secret(self) -> SecretStr:
        """The seed as a flow parameter (Prefect stores it masked)."""
        return SecretStr(self.hex())

    @property
    def sha256(self) -> str:
        """The seed's public fingerprint (documents carry this, never the seed)."""
        return seed_sha256(self.bits)

    def __repr__(self) -> str:
        return f"ReleaseSeed(sha256={self.sha256[:16]}...)"

    __str__ = __repr__
