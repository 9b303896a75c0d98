"""What writing a release's files once saves (docs/develop/performance.md, "Files written
once"), in CPU seconds of this process (less sensitive to other work on the machine than
wall time), measured on the national tables of a release written before (any release
folder; its pseof_all.csv.gz is the largest file):

* gzip: the table's text compressed as main wrote it (zlib level 6) and as now (ISA-L,
  schemas/distribution.open_output), with the sizes;
* layout check: pseof_all read back from its file and checked (what the release did after
  writing it, as `pseo-das validate-layout` does) against the same rules applied to the
  table in memory (what the release now does as it writes);
* hashing: SHA-256 of every file of the release read back (what the manifest did; it now
  takes the hashes of the bytes as written).

    .venv/bin/python benchmarks/bench_files_written_once.py RELEASE_FOLDER
"""
from __future__ import annotations

import gzip
import resource
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv

from pseo_das.schemas.distribution import GZIP_LEVEL, open_output
from pseo_das.schemas.pseo_layout import Product, TableCheck, check_file, layout
from pseo_das.schemas.written_hashes import read_sha256

ROWS_PER_BLOCK = 250_000     # as the release's flows chunks (division_flows.ROWS_PER_CHUNK)


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(what: str, work) -> object:
    start, wall = cpu(), time.perf_counter()
    result = work()
    print(f"{what}: {cpu() - start:.2f} CPU s ({time.perf_counter() - wall:.2f} s wall)")
    return result


def main(release: Path) -> None:
    source = release / "public" / "all" / "pseof_all.csv.gz"
    text = gzip.decompress(source.read_bytes())
    print(f"{source}: {len(text) / 1e6:.1f} MB of CSV")
    with tempfile.TemporaryDirectory() as folder:
        old, new = Path(folder) / "zlib.csv.gz", Path(folder) / "isal.csv.gz"

        def zlib_6():
            with open(old, "wb") as raw, gzip.GzipFile("", "wb", 6, raw, mtime=0) as out:
                out.write(text)

        def isal():
            with open_output(new) as out:
                out.write(text)
        timed("gzip, zlib level 6 (before)", zlib_6)
        timed(f"gzip, ISA-L level {GZIP_LEVEL} (now)", isal)
        print(f"  sizes: zlib {old.stat().st_size:,} bytes, ISA-L {new.stat().st_size:,} bytes;"
              f" same text: {gzip.decompress(new.read_bytes()) == text}")
    product = layout(Product.PSEOF)
    as_text = list(product.identifiers) + list(product.status_flags)
    table = pa_csv.read_csv(source, convert_options=pa_csv.ConvertOptions(
        column_types={c: pa.string() for c in as_text}))     # codes as text, values as numbers

    def in_stream():
        check = TableCheck(source.name, Product.PSEOF, table.column_names)
        for start in range(0, table.num_rows, ROWS_PER_BLOCK):
            check.add(table.slice(start, ROWS_PER_BLOCK))
        return check.rows, check.problems()
    rows, problems = timed("layout check of pseof_all, its file read back (before)",
                           lambda: check_file(source, Product.PSEOF))
    print(f"  {rows:,} rows, {len(problems)} problems")
    rows, problems = timed("layout check of pseof_all, the table as written (now)", in_stream)
    print(f"  {rows:,} rows, {len(problems)} problems")
    files = [p for p in sorted(release.rglob("*")) if p.is_file()]
    timed(f"SHA-256 of the {len(files)} files read back (before)",
          lambda: [read_sha256(p) for p in files])
    print(f"  {sum(p.stat().st_size for p in files) / 1e6:.1f} MB")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
