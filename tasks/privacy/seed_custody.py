"""The release seed in custody: sealed with the agency's seed key (AES-256-GCM, the
`cryptography` package) before the privacy store keeps it, so that the store holds only its
SHA-256 (the commitment every log and document carries) and the sealed bytes. Whoever holds
the key (the custodian, and the operator's release process) unseals a recorded seed to
resume, rerun or replay a release; an auditor with the run log and the public files cannot.
Privacy cost: none.

The key is 256 bits written as 64 hexadecimal digits in a file created 0600 by `pseo-das key
new FILE`; a process finds it through $PSEO_DAS_SEED_KEY (the file's path, set by the CLI's
--seed-key). Keep it apart from the store (a key inside the store folder is refused).
"""
from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from pseo_das.errors import PseoDasError
from pseo_das.tasks.privacy.file_modes import write_private
from pseo_das.tasks.privacy.release_seed import ReleaseSeed

SEED_KEY_ENV = "PSEO_DAS_SEED_KEY"
KEY_BYTES = 32
SEALED_PREFIX = "aes-256-gcm:"
NONCE_BYTES = 12


class SeedKeyError(PseoDasError, RuntimeError):
    """No seed key where one is needed, a key file that is not one, or a sealed seed the key
    does not open."""

    quotes_records = False


@dataclass(frozen=True, repr=False)
class SeedKey:
    bits: bytes = field(repr=False)
    path: Path

    @classmethod
    def from_file(cls, path: Path) -> "SeedKey":
        path = Path(path).expanduser().resolve()
        try:
            text = path.read_text().strip()
        except OSError as exc:
            raise SeedKeyError(f"the seed key {path} cannot be read ({exc.strerror or exc})") \
                from exc
        if len(text) != 2 * KEY_BYTES or any(c not in "0123456789abcdef" for c in text.lower()):
            raise SeedKeyError(f"{path} is not a seed key (64 hexadecimal digits; create one "
                               "with `pseo-das key new FILE`)")
        return cls(bytes.fromhex(text), path)

    def __repr__(self) -> str:
        return f"SeedKey({self.path})"


def create_key_file(path: Path) -> Path:
    """A new random seed key in `path` (created 0600; an existing file is never replaced)."""
    path = Path(path).expanduser().resolve()
    if path.exists():
        raise SeedKeyError(f"{path} already exists; a seed key is never overwritten (the seeds "
                           "it sealed could not be opened again)")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, (os.urandom(KEY_BYTES).hex() + "\n").encode())
    return path


def environment_key() -> SeedKey | None:
    """The key named by $PSEO_DAS_SEED_KEY, or None."""
    named = os.environ.get(SEED_KEY_ENV)
    return SeedKey.from_file(Path(named)) if named else None


def required_key(purpose: str) -> SeedKey:
    key = environment_key()
    if key is None:
        raise SeedKeyError(f"{purpose} needs the agency's seed key: pass --seed-key FILE or set "
                           f"{SEED_KEY_ENV} to its file (the custodian creates one with "
                           "`pseo-das key new FILE`, kept apart from the privacy store)")
    return key


def check_key_outside(key: SeedKey, store: Path) -> None:
    """Refuse a key kept inside the store folder: whoever copies the store would hold both."""
    if key.path.is_relative_to(Path(store).resolve()):
        raise SeedKeyError(f"the seed key {key.path} is inside the privacy store {store}: keep "
                           "it apart, so that a copy of the store does not open its seeds")


def seal(seed: ReleaseSeed, key: SeedKey, context: str) -> str:
    """The seed encrypted and authenticated with `key`, bound to `context` (the store id and
    attempt): text for the store."""
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(key.bits).encrypt(nonce, seed.bits, context.encode())
    return SEALED_PREFIX + base64.b64encode(nonce + sealed).decode()


def unseal(text: str, key: SeedKey, context: str) -> ReleaseSeed:
    raw = base64.b64decode(text.removeprefix(SEALED_PREFIX))
    try:
        bits = AESGCM(key.bits).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], context.encode())
    except InvalidTag:
        raise SeedKeyError(f"the seed key {key.path} does not open the seed sealed for "
                           f"{context}: another agency key, or a changed store") from None
    return ReleaseSeed(bits)
