"""The "decision requested" section of the DRB report of a release held for review: what
the disclosure review board is asked to clear (tables and rows, epsilon and delta, the
lifetime budget, suppression, demo inputs, flows accuracy) and which files changed since
the last release the board cleared in the same privacy store. Privacy cost: none (figures
the report already holds, and file fingerprints)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pseo_das.schemas.distribution import ALL_FOLDER, open_bytes


DRB_REPORT = "internal/drb_report."


@dataclass(frozen=True)
class ClearedRelease:
    """The last release the board cleared in this store, and its published files' SHA-256."""
    release_id: str
    clearance: str
    files: dict[str, str]


@dataclass(frozen=True)
class ReviewRequest:
    """A release is held for review in `folder`; `previous` is the last cleared release
    (None: none yet)."""
    folder: Path
    previous: ClearedRelease | None = None


def csv_rows(path: Path) -> int:
    """Data rows of a CSV file, gzipped or not (lines after the header)."""
    with open_bytes(path) as handle:
        return max(sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
                   - 1, 0)


def changed_files(files: dict[str, str], previous: ClearedRelease | None) -> dict | None:
    """Files added, removed and changed (bytes) since the last cleared release; None when
    there is none."""
    if previous is None:
        return None
    before = {name: sha for name, sha in previous.files.items()   # hashed after `files`
              if not name.startswith(DRB_REPORT)}
    return {"release_id": previous.release_id, "clearance": previous.clearance,
            "added": sorted(set(files) - set(before)),
            "removed": sorted(set(before) - set(files)),
            "changed": sorted(n for n in set(files) & set(before) if files[n] != before[n]),
            "same": sum(1 for n in set(files) & set(before) if files[n] == before[n])}


def decision_request(review: ReviewRequest, staging: Path, written: dict[str, str],
                     cells: pd.DataFrame, release_summary: dict,
                     flows_accuracy: dict) -> dict:
    """The context of the DRB report's "decision requested" section."""
    public = staging / "public"
    tables = [{"file": p.name, "rows": csv_rows(p)}
              for p in sorted((public / ALL_FOLDER).glob("*.csv*"))]
    state_files = sum(1 for name in written if name.startswith("public/") and name.count("/") > 1
                      and not name.startswith(f"public/{ALL_FOLDER}/"))
    return {"folder": str(review.folder), "tables": tables, "state_files": state_files,
            "cells": len(cells), "suppressed": int((~cells["published"]).sum()),
            "summary": release_summary,
            "flows_cells": flows_accuracy.get("stand_in_cells", 0),
            "flows_draws": flows_accuracy.get("draws", 0),
            "changes": changed_files(written, review.previous)}
