"""The floor of a release's largest public files: what writing them costs with their
libraries alone, measured on a release written before (any release folder), against issue
35's time targets (docs/develop/performance.md, "The floor of the largest files"):

* the labelled workbook `all/pseoe_all.xlsx`, written from the release's `pseoe_all` as a
  release writes it (`write_release_workbook`: XlsxWriter, one cell at a time);
* `pseof_all`'s text: its rows as Arrow's CSV reader gives them back from the published
  file (identifiers as text, the rest as read), formatted in blocks as a release formats
  them (`release_files.csv_text`: Arrow's CSV writer, nothing quoted);
* its gzip: that text compressed as a release compresses it (ISA-L, `open_output`).

Each in CPU seconds (getrusage and thread time; reading the file not counted).
The release does all three and much else (the state copies, the Parquet copies,
flows_state, the layout check, the measurements, the CIP recast): their sum divided by the
machine's cores is a wall time no release of that universe can beat on this machine.

    .venv/bin/python benchmarks/bench_file_floor.py RELEASE_FOLDER [--target-s 120]

Writes results/file-floor-<date>.json (rendered in the docs).
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv

from pseo_das.schemas.distribution import ALL_FOLDER, open_bytes, open_output, table_path
from pseo_das.schemas.pseo_layout import Product, layout
from pseo_das.tasks.publication.labelled_workbook import write_release_workbook
from pseo_das.tasks.publication.release_files import csv_text

from bench_files_written_once import cpu
from result_file import Run, table

READ_BLOCK_BYTES = 1 << 26


def workbook_cost(public: Path, release_id: str) -> tuple[float, int]:
    """CPU s and bytes of the labelled workbook written from `public`'s pseoe_all (into a
    temporary folder: the release's own workbook is left as it is)."""
    source = table_path(public, Product.PSEOE.file_name)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / ALL_FOLDER).mkdir()
        (Path(folder) / ALL_FOLDER / source.name).symlink_to(source.resolve())
        start = cpu()
        path = write_release_workbook(folder, release_id)
        return cpu() - start, path.stat().st_size


def pseof_cost(public: Path) -> dict[str, float]:
    """CPU s of formatting pseof_all's rows as CSV text (this thread's, reading apart) and of
    compressing that text (the other threads' while the rows go by: the compressor's),
    with the rows, text bytes and compressed bytes. The published file is gunzipped first
    (not counted), so that reading it costs no thread but this one."""
    source = table_path(public, Product.PSEOF.file_name)
    text_columns = {name: pa.string() for name in layout(Product.PSEOF).identifiers}
    out = {"rows": 0, "text_bytes": 0, "format_s": 0.0}
    with tempfile.TemporaryDirectory() as folder:
        plain, gzipped = Path(folder) / "pseof_all.csv", Path(folder) / "pseof_all.csv.gz"
        with open_bytes(source) as packed, open(plain, "wb") as unpacked:
            shutil.copyfileobj(packed, unpacked, READ_BLOCK_BYTES)
        reader = pa_csv.open_csv(
            plain, read_options=pa_csv.ReadOptions(block_size=READ_BLOCK_BYTES, use_threads=False),
            convert_options=pa_csv.ConvertOptions(column_types=text_columns))
        process_start, thread_start = cpu(), time.thread_time()
        with open_output(gzipped) as compressed:
            for batch in reader:
                start = time.thread_time()
                text = csv_text(pa.Table.from_batches([batch]))
                out["format_s"] += time.thread_time() - start
                compressed.write(text)
                out["rows"] += batch.num_rows
                out["text_bytes"] += text.size
        out["gzip_s"] = (cpu() - process_start) - (time.thread_time() - thread_start)
        out["gzip_bytes"] = gzipped.stat().st_size
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("release", type=Path, help="a release folder (OUT of pseo-das release)")
    parser.add_argument("--target-s", type=float, default=120.0,
                        help="the wall time target to compare the floor with (default 120 s)")
    args = parser.parse_args(argv)
    run = Run("file-floor")
    public = args.release / "public"
    cores = os.cpu_count() or 1
    wall = time.perf_counter()
    print(f"writing the labelled workbook of {public} ...", flush=True)
    workbook_s, workbook_bytes = workbook_cost(public, args.release.name)
    print(f"  {workbook_s:.1f} CPU s, {workbook_bytes / 1e6:.1f} MB", flush=True)
    print("formatting and compressing pseof_all ...", flush=True)
    pseof = pseof_cost(public)
    print(f"  {pseof['rows']:,} rows: text {pseof['format_s']:.1f} CPU s "
          f"({pseof['text_bytes'] / 1e9:.2f} GB), gzip {pseof['gzip_s']:.1f} CPU s "
          f"({pseof['gzip_bytes'] / 1e6:.0f} MB)", flush=True)
    total = workbook_s + pseof["format_s"] + pseof["gzip_s"]
    floor = total / cores
    verdict = "within reach" if floor < args.target_s else "out of reach"
    summary = (f"floor of the three: {total:.1f} CPU s = {floor:.1f} s of wall on {cores} "
               f"cores; target {args.target_s:g} s: {verdict}")
    print(summary)
    rows = [["labelled workbook (XlsxWriter)", round(workbook_s, 1),
             round(workbook_bytes / 1e6, 1)],
            [f"pseof_all text, {pseof['rows']:,} rows (csv_text: Arrow)",
             round(pseof["format_s"], 1), round(pseof["text_bytes"] / 1e6, 1)],
            ["pseof_all gzip (ISA-L)", round(pseof["gzip_s"], 1),
             round(pseof["gzip_bytes"] / 1e6, 1)],
            ["sum", round(total, 1), None],
            [f"sum / {cores} cores: the wall floor (s)", round(floor, 1), None]]
    path = run.write([table(f"The largest files of the release in {args.release}, written alone",
                            ["file", "CPU s", "MB"], rows),
                      table("Against the target", ["target"], [[summary]])],
                     details={"release": str(args.release), "cores": cores,
                              "wall_s": round(time.perf_counter() - wall, 1),
                              "workbook": {"cpu_s": workbook_s, "bytes": workbook_bytes},
                              "pseof": pseof, "target_s": args.target_s})
    print(f"results written to {path}")


if __name__ == "__main__":
    main()
