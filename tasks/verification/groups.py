"""The M disjoint groups of subsample-and-aggregate (Barrientos et al. 2017, section 3.1):
a graduate's group is a keyed hash of their person_id modulo M, so all of a graduate's
records fall in one group, and the groups are the same for every query with the same M.
Privacy cost: none. Why it matters: adding or removing one graduate changes the data of
one group only, so the count S of groups whose estimate lies in an interval moves by at
most 1 (sensitivity 1).
"""
from __future__ import annotations

import hashlib

import numpy as np

GROUP_KEY_DOMAIN = b"pseo-das/verification-groups/v1"


def group_key(server_seed: bytes) -> bytes:
    """The hash key of the groups, derived from the server's seed (kept in the store)."""
    return hashlib.sha256(GROUP_KEY_DOMAIN + b"\x00" + server_seed).digest()


def person_hashes(person_ids: np.ndarray, key: bytes) -> np.ndarray:
    """A keyed 64-bit hash (BLAKE2b) of each person id, computed once per distinct id."""
    ids = np.asarray(person_ids, dtype=np.int64)
    unique, inverse = np.unique(ids, return_inverse=True)
    hashed = np.fromiter(
        (int.from_bytes(hashlib.blake2b(int(i).to_bytes(8, "little", signed=True), key=key,
                                        digest_size=8).digest(), "little") for i in unique),
        dtype=np.uint64, count=len(unique))
    return hashed[inverse]


def person_groups(hashes: np.ndarray, groups: int) -> np.ndarray:
    """Group 0..M-1 of each record (by its person's hash)."""
    return (hashes % np.uint64(groups)).astype(np.int64)
