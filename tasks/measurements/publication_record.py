"""The publication record: everything `republish` needs besides the noisy measurements (the
release's identity, configuration, input checks and fingerprints, the store's policy and
chain heads, the dollar years, and the store addresses of the public tables it read), kept
in the privacy store with each publication and read for the life of the store. Privacy
cost: none (bookkeeping).

A versioned model. A record's stored bytes are covered by the store's hash chain and are
never rewritten: a record of an earlier version is migrated when it is read, one version
at a time, by the small functions of MIGRATIONS. Records before version 6 carry no
`record_version`; their version is known by the keys they have:

  1  (f0c02f6, the first store with a hash chain) identity, attempt, config,
     input_fingerprints, input_checks, new_spending, superseded, store_policy,
     store_chain, reference_tables, reference_fingerprints
  2  (de89723) + recast_tables, recast_fingerprints, recast_packaged: the CIP recast's inputs
  3  (7ce6eda) + dollars: the dollar years and the CPI-U values that link them
  4  (be951cb) + demo_inputs: the packaged demo inputs the release used
  5  (a19c1f9) + ipeds_awards, ipeds_years: the inputs of the IPEDS counts; from 8c06e9f
     to 3d46d45 also cell_statistics, when the release measured them outside the store
  6  + record_version; the tables a release read grouped by what they are (reference,
     recast, ipeds); what a release of an earlier version did not have is an explicit None
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Final, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from pseo_das.config import ReleaseConfig
from pseo_das.tasks.inputs.constant_dollars import DollarYears
from pseo_das.tasks.privacy.store import ChainHead, PrivacyStore, ReleaseAttempt, StoreError

RECORD_VERSION: Final = 6


class PublicationRecordError(StoreError):
    """A publication record this version cannot read (of a later version, or malformed)."""


@dataclass(frozen=True)
class ReleaseIdentity:
    release_id: str
    seed_sha256: str
    code_version: str
    mlflow_run_id: str
    tracking_uri: str
    config_sha256: str  # SHA-256 of the configuration as canonical JSON (sorted keys)
    store: str          # the privacy store the release's measurements are kept in


class _Recorded(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StoredReference(_Recorded):
    """The public reference tables a release read (J2J, QCEW, state coverage)."""
    tables: dict[str, str]          # j2j, qcew, coverage -> SHA-256 of the stored table
    fingerprints: dict[str, str]    # file name -> SHA-256 of the file read


class StoredRecastInputs(_Recorded):
    """The CIP recast's inputs a release read (crosswalk, IPEDS completions, hard-coded
    transitions) and which of them were the packaged demo files."""
    tables: dict[str, str]          # crosswalk, completions, hard_coded -> stored table
    fingerprints: dict[str, str]
    packaged: tuple[str, ...]


class StoredIpedsAwards(_Recorded):
    """The IPEDS awards of a release's IPEDS counts and the years with a completions file."""
    awards: str                     # SHA-256 of the stored table
    years: tuple[int, ...]


class StoreChain(_Recorded):
    """The store's chain heads when the release was planned and after its measurements."""
    read: ChainHead
    written: ChainHead


class PublicationRecord(_Recorded):
    record_version: Literal[6] = RECORD_VERSION
    identity: ReleaseIdentity
    attempt: int
    config: ReleaseConfig
    input_fingerprints: dict[str, str]
    input_checks: list[dict[str, Any]]
    new_spending: bool
    superseded: int | None          # the attempt a superseding release replaced
    store_policy: dict[str, int | str]   # the store's policy as the release read it
    store_chain: StoreChain
    dollars: DollarYears | None     # None: a release of version 1 or 2 (no dollar conversion)
    demo_inputs: tuple[str, ...]    # the packaged demo inputs used (none recorded before 4)
    reference: StoredReference
    recast: StoredRecastInputs | None   # None: a release of version 1 (codes as measured)
    ipeds: StoredIpedsAwards | None     # None: a release of version 1 to 4 (no IPEDS counts)
    # The noisy cell statistics a release of version 5 measured outside the store (their
    # NoisyCellStatistics.record() and stored table); None for every other release.
    cell_statistics: dict[str, Any] | None = None

    def objects(self) -> list[tuple[str, str]]:
        """The store objects (SHA-256, extension) the record names: the tables it read."""
        tables = list(self.reference.tables.values())
        tables += list(self.recast.tables.values()) if self.recast else []
        tables += [self.ipeds.awards] if self.ipeds else []
        tables += [self.cell_statistics["table"]] if self.cell_statistics else []
        return [(sha, "parquet") for sha in tables]

    def stored(self) -> dict:
        """The record as it is kept in the store (JSON values, in field order)."""
        return self.model_dump(mode="json")

    @classmethod
    def from_stored(cls, stored: dict, what: str) -> "PublicationRecord":
        """The record kept as `stored` (of this version or an earlier one, migrated);
        PublicationRecordError naming `what` if it cannot be read."""
        version = stored_version(stored, what)
        record = stored
        for step in range(version, RECORD_VERSION):
            record = MIGRATIONS[step](record)
        try:
            return cls.model_validate(record)
        except ValidationError as exc:
            error = exc.errors()[0]
            raise PublicationRecordError(
                f"{what} is not a valid publication record of version {version} "
                f"({'.'.join(map(str, error['loc']))}: {error['msg']})") from None


def read_publication_record(store: PrivacyStore, release_id: str
                            ) -> tuple[ReleaseAttempt, PublicationRecord]:
    """The attempt that published `release_id` last and its publication record."""
    attempt, stored = store.stored_publication_record(release_id)
    return attempt, PublicationRecord.from_stored(
        stored, f"the publication record of release {release_id} in the store {store.path}")


# --- versions and migrations ---------------------------------------------------------------

# The key each version before 6 added: an unversioned record is of the latest version whose
# key it has.
KEY_ADDED_BY_VERSION = {2: "recast_tables", 3: "dollars", 4: "demo_inputs", 5: "ipeds_awards"}


def stored_version(stored: dict, what: str) -> int:
    """The version of a stored record; PublicationRecordError for a version this code does
    not know (a record written by a later version of pseo-das)."""
    if "record_version" not in stored:
        return max((version for version, key in KEY_ADDED_BY_VERSION.items() if key in stored),
                   default=1)
    version = stored["record_version"]
    if type(version) is not int or not 1 <= version <= RECORD_VERSION:
        raise PublicationRecordError(
            f"{what} has record version {version!r}; this version of pseo-das reads versions "
            f"1 to {RECORD_VERSION}: republish it with the version that wrote it, or a later one")
    return version


def v1_to_v2_no_recast_inputs(record: dict) -> dict:
    """Version 1 published the CIP codes as measured: it read no recast inputs."""
    return {**record, "recast_tables": None, "recast_fingerprints": None,
            "recast_packaged": None}


def v2_to_v3_no_dollar_conversion(record: dict) -> dict:
    """Versions 1 and 2 published earnings in the dollars of the records (no conversion)."""
    return {**record, "dollars": None}


def v3_to_v4_no_demo_inputs_recorded(record: dict) -> dict:
    """Versions 1 to 3 did not record which inputs were the packaged demo files."""
    return {**record, "demo_inputs": []}


def v4_to_v5_no_ipeds_counts(record: dict) -> dict:
    """Versions 1 to 4 published no IPEDS counts (flag 3): they read no IPEDS awards."""
    return {**record, "ipeds_awards": None, "ipeds_years": None}


def v5_to_v6_tables_grouped(record: dict) -> dict:
    """The tables' addresses and fingerprints grouped by what they are; the cell statistics
    of a release that measured them outside the store (8c06e9f to 3d46d45) kept as they
    are, None for the others."""
    flat = ("reference_tables", "reference_fingerprints", "recast_tables",
            "recast_fingerprints", "recast_packaged", "ipeds_awards", "ipeds_years")
    grouped = {key: value for key, value in record.items() if key not in flat}
    recast = None if record["recast_tables"] is None else {
        "tables": record["recast_tables"], "fingerprints": record["recast_fingerprints"],
        "packaged": record["recast_packaged"]}
    ipeds = None if record["ipeds_awards"] is None else {
        "awards": record["ipeds_awards"], "years": record["ipeds_years"]}
    return {"record_version": 6, **grouped,
            "reference": {"tables": record["reference_tables"],
                          "fingerprints": record["reference_fingerprints"]},
            "recast": recast, "ipeds": ipeds,
            "cell_statistics": record.get("cell_statistics")}


MIGRATIONS: dict[int, Callable[[dict], dict]] = {
    1: v1_to_v2_no_recast_inputs, 2: v2_to_v3_no_dollar_conversion,
    3: v3_to_v4_no_demo_inputs_recorded, 4: v4_to_v5_no_ipeds_counts,
    5: v5_to_v6_tables_grouped}


def record_objects(stored: dict) -> list[tuple[str, str]]:
    """The objects a stored publication record (of any version) names, for the store's
    integrity check."""
    return PublicationRecord.from_stored(stored, "a publication record").objects()
