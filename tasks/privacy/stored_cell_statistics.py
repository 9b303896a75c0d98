"""Keeping the noisy cell statistics (pseom_all.csv's values) with the publication record
in the privacy store, so that `republish` re-derives pseom_all.csv without microdata and
without new noise. Privacy cost: none (noisy values only).

What is NOT kept: the cell statistics are not questions of the release plan, so their
spending is in the release's ledger (capped per release) but not in the store's lifetime
budget per population, and a later release with the product enabled measures (and spends)
again. README, "Cell statistics".
"""
from __future__ import annotations

from pathlib import Path


from pseo_das.tasks import file_task
from pseo_das.tasks.earnings.cell_statistics import NoisyCellStatistics
from pseo_das.tasks.privacy.store import PrivacyStore

TEXT = ("institution", "inst_state", "degree_level", "cipcode", "statistic")
RECORD_KEY = "cell_statistics"


@file_task("keep cell statistics in the privacy store")
def keep_cell_statistics(store_path: Path, measured: NoisyCellStatistics) -> dict:
    """The publication record's entry for the noisy cell statistics (their table's
    content address, chi, the ledger entries). Storing it again is a no-op."""
    table = measured.table.astype({c: str for c in TEXT})
    with PrivacyStore.open(store_path) as store:
        sha = store.put_frame(table)
    return {**measured.record(), "table": sha}


def cell_statistics_from_record(store_path: Path, record: dict) -> NoisyCellStatistics | None:
    """The noisy cell statistics a release published; None when it had none."""
    kept = record.get(RECORD_KEY)
    if kept is None:
        return None
    with PrivacyStore.open(store_path) as store:
        table = store.get_frame(kept["table"])
    return NoisyCellStatistics.from_record(kept, table)
