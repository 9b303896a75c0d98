"""The release seed is a value: 256 bits inside, one validator for its hexadecimal text, and
a repr that never shows it."""
from __future__ import annotations

import dataclasses
import pickle

import pytest

from pseo_das.tasks.privacy.release_seed import ReleaseSeed, SeedError, seed_sha256

TEXT = "0123456789abcdef" * 4


def test_the_seed_is_read_from_hex_text_as_its_256_bits():
    seed = ReleaseSeed.from_hex(f"  0x{TEXT.upper()}\n")   # a seed file's line, any case
    assert seed.bits == bytes.fromhex(TEXT) and seed.hex() == TEXT
    assert seed == ReleaseSeed.from_hex(TEXT) and hash(seed) == hash(ReleaseSeed.from_hex(TEXT))
    assert seed.sha256 == seed_sha256(bytes.fromhex(TEXT))
    assert seed.secret().get_secret_value() == TEXT and TEXT not in str(seed.secret())
    assert pickle.loads(pickle.dumps(seed)) == seed   # crosses task boundaries unchanged


@pytest.mark.parametrize("text", ["", TEXT[:-1], TEXT + "0", TEXT[:-1] + "g", "ab cd" * 13])
def test_anything_but_64_hexadecimal_digits_is_refused(text):
    with pytest.raises(SeedError, match=r"^the seed must be 64 hexadecimal digits \(256 bits\)$"):
        ReleaseSeed.from_hex(text)


@pytest.mark.parametrize("bits", [b"\x00" * 31, b"\x00" * 33, bytearray(32), TEXT])
def test_a_seed_holds_exactly_32_bytes(bits):
    with pytest.raises(SeedError, match="32 bytes"):
        ReleaseSeed(bits)


def test_the_repr_names_the_public_fingerprint_never_the_seed():
    seed = ReleaseSeed.from_hex(TEXT)
    for shown in (repr(seed), str(seed), f"{seed}", repr([seed]), repr({"seed": seed})):
        assert TEXT not in shown and seed.bits.hex() not in shown and str(seed.bits) not in shown
        assert seed.sha256[:16] in shown
    with pytest.raises(dataclasses.FrozenInstanceError):
        seed.bits = bytes(32)


def test_fresh_seeds_are_new_256_bit_values():
    first, second = ReleaseSeed.fresh(), ReleaseSeed.fresh()
    assert first != second and len(first.bits) == len(second.bits) == 32
