"""`write_national_table` (the earnings files of a release): the Parquet copy written from
the table's Arrow blocks is, byte for byte, the copy converted from the file it wrote, in
both table formats and with rows arriving in several blocks."""
import pandas as pd
import pytest

from pseo_das.schemas.distribution import TableFormat, published_table
from pseo_das.schemas.pseo_layout import Product
from pseo_das.schemas.table_package import official_fields
from pseo_das.tasks.publication import parquet_files
from pseo_das.tasks.publication.parquet_files import (parquet_name, write_national_table,
                                                      write_parquet_copy)
from tests.test_layout_in_stream import typed
from tests.test_layout_validator import PSEOE, write_valid_folder


@pytest.mark.parametrize("table_format", list(TableFormat))
def test_the_copy_from_the_blocks_is_the_copy_of_the_file(tmp_path, monkeypatch, table_format):
    monkeypatch.setattr(parquet_files, "COPY_BLOCK_ROWS", 7)   # several blocks, one partial
    frame = typed(pd.read_csv(write_valid_folder(tmp_path / "valid") / PSEOE, dtype=str,
                              keep_default_na=False))
    assert frame.isna().any().any() and len(frame) % 7   # nulls, and a last partial block
    public, other = tmp_path / "public", tmp_path / "other"
    for folder in (public, other):
        (folder / "all").mkdir(parents=True)     # as a release's staging folder has it
    copied = write_national_table(frame, public, Product.PSEOE.file_name, table_format,
                                  parquet=True)
    copy = public / "all" / "parquet" / parquet_name(Product.PSEOE.file_name)
    assert copied == {str(copy.relative_to(public)): len(frame)}
    converted = tmp_path / "converted.parquet"
    written = published_table(public, Product.PSEOE.file_name, table_format)
    assert write_parquet_copy(written, converted, official_fields(Product.PSEOE)) == len(frame)
    assert copy.read_bytes() == converted.read_bytes()
    assert write_national_table(frame, other, Product.PSEOE.file_name,
                                table_format) == {}       # no copy asked: none made
    assert not (other / "all" / "parquet").exists()
