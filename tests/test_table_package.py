"""The Parquet copies and the Frictionless Data Package of the national tables (pseo-das's
extension, schemas/table_package.py, tasks/publication/parquet_files.py): described from
the schema's label files, validated by the `frictionless` package as a user runs it, the
Parquet bytes the same however the rows arrive, and its content the CSV's."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from conftest import csv_fields
from pseo_das.schemas.outputs import pseoh_schema
from pseo_das.schemas.pseo_layout import (STATUS_FLAGS, Product, code_lists, expected_columns,
                                          read_label_file)
from pseo_das.schemas.table_package import (FieldType, datapackage, institutions_fields,
                                            official_fields, public_table_fields)
from pseo_das.tasks.publication import release_files
from pseo_das.tasks.publication.metadata_files import institution_columns
from pseo_das.tasks.publication.parquet_files import parquet_name, write_parquet_copy
from pseo_das.tasks.publication.release_files import ParquetTableWriter
from test_layout_validator import write_valid_folder

FRICTIONLESS = Path(sys.executable).with_name("frictionless")


def frictionless_validate(descriptor: Path) -> dict:
    """`frictionless validate --json DESCRIPTOR`, as a user runs it; its report."""
    done = subprocess.run([str(FRICTIONLESS), "validate", "--json", str(descriptor)],
                          capture_output=True, text=True, timeout=900)
    return json.loads(done.stdout)


def assert_parquet_holds_csv(parquet: Path, csv: Path) -> None:
    """The Parquet copy as the text its CSV writes (integers in decimal, nulls empty) is the
    CSV file's fields as written, column by column and row by row: both read as Arrow text
    columns and compared there (no Python object per value)."""
    table = pq.read_table(parquet)
    names = table.column_names
    copy = {name: pc.fill_null(pc.cast(column, pa.string()), "")
            for name, column in zip(names, table.columns)}
    text = csv_fields(csv)
    assert (text.column_names, text.num_rows) == (names, table.num_rows), csv.name
    assert [name for name in names if not text[name].equals(copy[name])] == [], csv.name


def test_the_package_describes_the_validators_columns_and_code_lists():
    """Every column, in the layout validator's order (the schema's files), the pandera
    schema's for pseoh_all, variables_pseo_institutions.csv's for the institutions; each
    code list is the label files' codes with their labels; flags are the schema's."""
    for product in Product:
        fields = official_fields(product)
        assert tuple(f.name for f in fields) == expected_columns(product)
        by_name = {f.name: f for f in fields}
        assert by_name["agg_level_pseo"].type is FieldType.INTEGER
        assert by_name["institution"].type is FieldType.STRING       # OPEIDs keep their zeros
        cipcodes = set().union(*code_lists().cipcodes.values())
        assert {code for code, _ in by_name["cipcode"].codes} <= cipcodes
        assert dict(by_name["degree_level"].codes)["05"] == "Baccalaureate"
        flags = [f for f in fields if f.name.startswith("status_")]
        assert flags and all(f.required and f.type is FieldType.INTEGER for f in flags)
        standard = [f for f in flags if "ipeds" not in f.name]
        assert all([c for c, _ in f.codes] == sorted(STATUS_FLAGS, key=int) for f in standard)
        assert dict(standard[0].codes)["5"].startswith("Value suppressed")
    flows = {f.name: f for f in official_fields(Product.PSEOF)}
    assert "all-industries national rows" in flows["y1_grads_nme"].description
    assert [c for c, _ in flows["geography"].codes] == ["00"] + [str(d) for d in range(1, 10)]
    histograms = public_table_fields()["pseoh_all.csv"]
    assert [f.name for f in histograms] == list(pseoh_schema().columns)
    assert all(f.description for f in histograms)
    assert [f.name for f in institutions_fields()] == list(institution_columns())
    labels = read_label_file("label_agg_level_pseo.csv")
    assert [c for c, _ in flows["agg_level_pseo"].codes] == \
        list(labels.loc[labels["pseof"] == "1", "agg_level_pseo"])


@pytest.fixture
def package(tmp_path) -> Path:
    """The test layout's valid pseoe_all and pseof_all as published (gzipped), their
    Parquet copies and the Data Package of the two."""
    folder = write_valid_folder(tmp_path / "all")
    published = {}
    for product in Product:
        plain = folder / product.file_name
        gz = plain.with_name(plain.name + ".gz")
        subprocess.run(["gzip", "-n", str(plain)], check=True)
        write_parquet_copy(gz, folder / parquet_name(product.file_name),
                           official_fields(product))
        published[product.file_name] = gz.name
    (folder / "datapackage.json").write_text(json.dumps(datapackage(published), indent=2))
    return folder


def test_frictionless_validates_the_package_and_names_a_bad_code(package, tmp_path):
    report = frictionless_validate(package / "datapackage.json")
    assert report["valid"], json.dumps(report["tasks"], indent=1)[:3000]
    assert sorted(t["name"] for t in report["tasks"]) == ["pseoe_all", "pseof_all"]
    # negative control: a status flag the schema does not allow, a CIP code of no label file
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "datapackage.json").write_text((package / "datapackage.json").read_text())
    frame = pd.read_csv(package / "pseoe_all.csv.gz", dtype=str, keep_default_na=False)
    frame.loc[3, "status_y1_earnings"] = "7"
    frame.loc[4, "cipcode"] = "99.99"
    frame.to_csv(bad / "pseoe_all.csv.gz", index=False)
    (bad / "pseof_all.csv.gz").write_bytes((package / "pseof_all.csv.gz").read_bytes())
    report = frictionless_validate(bad / "datapackage.json")
    assert not report["valid"]
    errors = [e for t in report["tasks"] for e in t["errors"]]
    assert {(e["fieldName"], e["rowNumber"]) for e in errors} == \
        {("status_y1_earnings", 5), ("cipcode", 6)}          # row 1 is the header
    assert all(e["type"] == "constraint-error" for e in errors)


def test_parquet_holds_the_csv_content_typed(package):
    for product in Product:
        parquet = package / parquet_name(product.file_name)
        assert_parquet_holds_csv(parquet, package / f"{product.file_name}.gz")
        schema = pq.read_schema(parquet)
        assert schema.field("institution").type == pa.string()
        assert schema.field("agg_level_pseo").type == pa.int32()
        assert b"Aggregation level" in schema.field("agg_level_pseo").metadata[b"description"]


def test_parquet_bytes_do_not_depend_on_how_the_rows_arrive(tmp_path, monkeypatch):
    """Fixed writer options, row groups of a fixed size whatever the pieces written, no
    time in the file: a second write, later, in other pieces, gives the same bytes."""
    monkeypatch.setattr(release_files, "PARQUET_ROW_GROUP_ROWS", 7)
    table = pa.table({"code": [f"{i:02d}" for i in range(30)],
                      "count": pa.array([i if i % 4 else None for i in range(30)], pa.int32())})

    def write(path: Path, sizes: list[int]) -> bytes:
        with ParquetTableWriter(path, table.schema) as writer:
            start = 0
            for size in sizes:
                writer.write(table.slice(start, size))
                start += size
        return path.read_bytes()

    first = write(tmp_path / "a.parquet", [30])
    time.sleep(1.1)
    assert write(tmp_path / "b.parquet", [5, 11, 1, 13]) == first
    metadata = pq.read_metadata(tmp_path / "a.parquet")
    assert [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] == \
        [7, 7, 7, 7, 2]
    assert metadata.row_group(0).column(0).compression == "ZSTD"
    assert pq.read_table(tmp_path / "b.parquet").equals(table)


def test_pseoh_with_its_codes_as_categories_writes_the_same_files(tmp_path):
    """A release holds pseoh_all with its text codes as categories
    (earnings_tables.histogram_table: a national table is millions of rows): the gzipped CSV
    and the Parquet copy written from it are those written from the text."""
    from pseo_das.schemas.distribution import TableFormat
    from pseo_das.tasks.publication.document_context import HISTOGRAMS_FILE
    from pseo_das.tasks.publication.parquet_files import write_national_table
    cells = 40
    text = {"inst_level": ["I", "S"], "institution": ["00100200", "00588900", "01"],
            "degree_level": ["03", "05"], "cip_level": ["2", "4"], "cipcode": ["11", "11.07"],
            "grad_cohort": ["2016", "0000"], "geo_level": ["N"], "geography": ["00"],
            "ind_level": ["A"], "industry": ["00"]}
    columns = {}
    for name in pseoh_schema().columns:
        if name in text:
            values = text[name]
            columns[name] = [values[(i // 3 + len(name)) % len(values)] for i in range(cells * 3)]
        else:
            columns[name] = [(i * 7 + len(name)) % 50 + 1 for i in range(cells * 3)]
    frame = pd.DataFrame(columns).astype({n: "int64" for n in columns if n not in text})
    coded = frame.astype({name: "category" for name in text})
    assert isinstance(coded["institution"].dtype, pd.CategoricalDtype)
    assert coded["agg_level_pseo"].dtype == "int64"
    written = {}
    for name, table in (("text", frame), ("coded", coded)):
        public = tmp_path / name
        (public / "all").mkdir(parents=True)
        write_national_table(table, public, HISTOGRAMS_FILE, TableFormat.CSV_GZ, parquet=True)
        written[name] = {p.relative_to(public): p.read_bytes()
                         for p in sorted(public.rglob("*")) if p.is_file()}
    assert len(written["text"]) == 2 and written["coded"] == written["text"]
