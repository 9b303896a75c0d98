"""Writing a release: a staging folder next to the destination, a manifest of SHA-256
fingerprints, then one atomic rename. A failed run leaves no partial release."""
from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv

from tasks.ingest import sha256_file

MANIFEST = "internal/manifest.json"


class DestinationExistsError(FileExistsError):
    """The release folder already exists: releases are never overwritten."""


def check_destination(out_dir: Path) -> None:
    if out_dir.exists():
        raise DestinationExistsError(
            f"{out_dir} already exists; releases are never overwritten, choose a new --out")


def new_staging(out_dir: Path) -> Path:
    check_destination(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = out_dir.parent / f".{out_dir.name}.staging-{uuid.uuid4().hex[:8]}"
    (staging / "public").mkdir(parents=True)
    (staging / "internal").mkdir()
    return staging


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    frame.to_csv(path, index=False, lineterminator="\n")


def write_code_table(frame: pd.DataFrame, path: Path) -> None:
    """Fast plain CSV for the public tables: nothing quoted, empty for missing. Only for
    tables whose text columns are codes that passed the output schemas (digits and
    letters, never a comma or a quote)."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    with open(path, "wb") as out:
        out.write((",".join(frame.columns) + "\n").encode())
        pa_csv.write_csv(table, out, pa_csv.WriteOptions(include_header=False, quoting_style="none"))


def fingerprints(root: Path, folder: str | None = None) -> dict[str, str]:
    """SHA-256 of every file under root (or root/folder), by relative path, sorted."""
    base = root / folder if folder else root
    return {str(p.relative_to(root)): sha256_file(p)
            for p in sorted(base.rglob("*")) if p.is_file() and str(p.relative_to(root)) != MANIFEST}


def write_manifest(staging: Path, release_id: str, mlflow_run_id: str,
                   tracking_uri: str) -> dict[str, str]:
    """SHA-256 of every file, and where the release's audit run is."""
    files = fingerprints(staging)
    (staging / MANIFEST).write_text(json.dumps(
        {"release_id": release_id, "mlflow_run_id": mlflow_run_id, "tracking_uri": tracking_uri,
         "algorithm": "sha256", "files": files}, indent=2) + "\n")
    return files


def publish(staging: Path, out_dir: Path) -> Path:
    """Atomically move the staged release to its destination."""
    check_destination(out_dir)
    os.rename(staging, out_dir)
    return out_dir


def discard(staging: Path | None) -> None:
    if staging is not None and staging.exists():
        shutil.rmtree(staging)
