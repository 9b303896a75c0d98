"""The public folder of a release as the Census Bureau distributes PSEO, and how to open its
tables whatever their compression.

lehd_csv_naming, Directory Paths: `SERVER/data/[PRODUCT]/[RELEASE]/[GEOHI]/{files}`, geohi
`all` ("Collection of all available states") or a state's lower-case postal code; the
schema's Metadata section: "The ALL directory consolidates the individual state files".
So a release's `public/` holds

* `all/`: the national tables `pseoe_all`, `pseof_all` (and pseo-das's extensions
  `pseoh_all`, `pseom_all`, `pseoemp_all`), `pseo_all_institutions.csv`,
  `pseo_all_partners.txt`, `version_pseo.txt`;
* `[st]/` for each state with institutions: `pseoe_[st]`, `pseof_[st]`,
  `pseo_[st]_institutions.csv`, `pseo_[st]_partners.txt`, `version_pseo.txt`;
* `release_notes.md` / `.html` beside the folders.

The data tables are gzipped as the site serves them (`pseoe_all.csv.gz`, what every
consumer's pipeline downloads), in deterministic bytes: gzip level GZIP_LEVEL, header time 0,
no file name in the header, so a rerun writes the same bytes. Plain CSV (`TableFormat.CSV`)
is the configuration's other choice (`[publication] format`). The metadata files are plain
text as on the site.

Readers name a table by its CSV name (`pseoe_all.csv`, `pseof_co.csv`) and call
`table_path` (the file in `all/` or the state's folder, `.csv.gz` or `.csv`, or in a flat
folder of downloads) and `open_table` (text, gunzipped when it is gzipped)."""
from __future__ import annotations

import gzip
import io
from enum import StrEnum
from pathlib import Path
from typing import TextIO

ALL_FOLDER = "all"
GZIP_SUFFIX = ".gz"
GZIP_LEVEL = 6            # gzip's and zlib's default level
GZIP_MTIME = 0            # no time in the header: the bytes do not depend on when they were written


class TableFormat(StrEnum):
    """How the data tables are written (`[publication] format`)."""
    CSV_GZ = "csv.gz"     # as the Census Bureau distributes them
    CSV = "csv"           # plain CSV, for users who want it


def folder_of(name: str) -> str:
    """The folder of a public file by its name: `pseoe_all.csv`, `pseo_all_partners.txt` ->
    `all`; `pseof_co.csv`, `pseo_co_institutions.csv` -> `co` (the geohi after the type)."""
    parts = name.split(".")[0].split("_")
    if len(parts) < 2 or parts[0] == "version":
        raise ValueError(f"{name}: the name says no folder (version_pseo.txt is in every one)")
    return parts[1]


def published_name(name: str, table_format: TableFormat | str) -> str:
    """The file name of a data table (`pseoe_all.csv`) as written in `table_format`."""
    return name + GZIP_SUFFIX if TableFormat(table_format) is TableFormat.CSV_GZ else name


def published_table(public: Path, name: str, table_format: TableFormat | str) -> Path:
    """Where a release writes the data table `name` (its CSV name) in its public folder."""
    return Path(public) / folder_of(name) / published_name(name, table_format)


def table_path(public: Path, name: str, folder: str | None = None) -> Path:
    """The file of the public table or metadata file `name` (`pseoe_all.csv`,
    `pseof_co.csv`, `version_pseo.txt` with `folder`): in `public/<folder>/` (its folder,
    `folder_of`), or in `public/` itself (a folder of downloads, the `all/` folder given
    directly), gzipped (`name.gz`) or not. Raises FileNotFoundError naming where it looked."""
    public = Path(public)
    folders = [public / (folder or folder_of(name)), public]
    tried = [where / candidate for where in folders for candidate in (name + GZIP_SUFFIX, name)]
    for path in tried:
        if path.is_file():
            return path
    raise FileNotFoundError(f"{name}: not in {public} (looked for "
                            f"{', '.join(str(p.relative_to(public)) for p in tried)})")


def is_gzipped(path: Path) -> bool:
    return Path(path).name.endswith(GZIP_SUFFIX)


def open_bytes(path: Path) -> io.BufferedIOBase:
    """A public table's CSV bytes, gunzipped when it is gzipped."""
    return gzip.open(path, "rb") if is_gzipped(path) else open(path, "rb")


def open_table(path: Path) -> TextIO:
    """A public table as UTF-8 text, gunzipped when it is gzipped."""
    if is_gzipped(path):
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


class _DeterministicGzip(gzip.GzipFile):
    """A gzip stream to a file it owns: level GZIP_LEVEL, header time GZIP_MTIME, no name."""

    def __init__(self, path: Path):
        self._raw = open(path, "wb")
        super().__init__(filename="", mode="wb", fileobj=self._raw,
                         compresslevel=GZIP_LEVEL, mtime=GZIP_MTIME)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def open_output(path: Path) -> io.BufferedIOBase:
    """A binary file to write a public table to: gzipped (deterministic bytes) when its name
    ends in .gz, plain otherwise."""
    return _DeterministicGzip(path) if is_gzipped(path) else open(path, "wb")
