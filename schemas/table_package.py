"""The national public tables described column by column, for the Frictionless Data Package
(`all/datapackage.json`) and the Parquet copies (`all/parquet/*.parquet`), both pseo-das
extensions, not part of the Census Bureau's distribution.

One source of truth: the columns, their order and their rules are the layout validator's
(`pseo_layout.layout`, `code_lists`: the schema's label files shipped in
`pseo_das/reference/lehd-schema-v4.14.0/`) and, for pseo-das's own table `pseoh_all`, its
pandera schema (`schemas/outputs.py`); the labels of each code list are those of the label
files (`code_labels`, which the labelled workbook writes beside each code). Nothing here
lists a column by hand.

Each column becomes a `TableField`: its type (integer where the schema says Numeric, Count,
Dollars or a flag; text for every other identifier, so codes keep their leading zeros), its
description, and its code list (the codes with their labels: a Table Schema `enum`
constraint and `categories`) or pattern. `TableField.table_schema` is its Frictionless
field; `arrow_schema` the Parquet copy's schema (32-bit integers, text; empty values are
nulls; each field's description in its Arrow metadata)."""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cache

import pyarrow as pa

from pseo_das.schemas.outputs import pseoh_schema
from pseo_das.schemas.pseo_layout import (ALL_INDUSTRIES, FLAG_NOT_AVAILABLE, OPEID,
                                          ORIGIN_MEASURE_LEVELS, SCHEMA_VERSION, STATUS_FLAGS,
                                          YEAR, Product, code_labels, code_lists,
                                          is_origin_measure, layout, read_label_file)

NUMERIC_TYPE = "Numeric"           # lehd_identifiers_pseo.csv: an integer identifier
STATE_FIPS = r"[0-9]{2}"
POSTAL_CODE = r"[A-Z]{2}"
INSTITUTIONS_TABLE = "pseo_all_institutions.csv"


class FieldType(StrEnum):
    INTEGER = "integer"
    STRING = "string"

    @property
    def arrow(self) -> pa.DataType:
        return pa.int32() if self is FieldType.INTEGER else pa.string()


@dataclass(frozen=True)
class TableField:
    name: str
    type: FieldType
    description: str
    codes: tuple[tuple[str, str], ...] = ()     # its code list: (code, label), in order
    pattern: str | None = None
    minimum: int | None = None
    required: bool = False                      # never empty

    def value(self, code: str) -> int | str:
        return int(code) if self.type is FieldType.INTEGER else code

    def table_schema(self) -> dict:
        """The field of a Frictionless Table Schema."""
        constraints: dict[str, object] = {}
        if self.required:
            constraints["required"] = True
        if self.codes:
            constraints["enum"] = [self.value(code) for code, _ in self.codes]
        if self.pattern:
            constraints["pattern"] = self.pattern
        if self.minimum is not None:
            constraints["minimum"] = self.minimum
        field: dict[str, object] = {"name": self.name, "type": self.type.value,
                                    "description": self.description}
        if constraints:
            field["constraints"] = constraints
        if self.codes:
            field["categories"] = [{"value": self.value(code), "label": label}
                                   for code, label in self.codes]
        return field

    def arrow_field(self) -> pa.Field:
        return pa.field(self.name, self.type.arrow, nullable=not self.required,
                        metadata={"description": self.description})


def _labelled(column: str, codes) -> tuple[tuple[str, str], ...]:
    """`codes` (in their order) with their labels from the label files."""
    labels = code_labels()[column]
    if column == "geography":      # keyed by (geo_level, code): N 00, D 1-9 do not collide
        labels = {code: label for (_, code), label in labels.items()}
    return tuple((code, labels.get(code, "")) for code in codes)


def _identifier_codes(product: Product) -> dict[str, tuple[tuple[str, str], ...]]:
    """The code list of each coded identifier of `product`: the values its aggregation
    levels allow (label_agg_level_pseo.csv flagged for the product)."""
    levels, codes = layout(product).levels, code_lists()

    def used(column: str) -> list[str]:
        return list(dict.fromkeys(levels[column]))

    by_level = {"geography": ("geo_level", {"N": codes.nation, "D": codes.divisions}),
                "industry": ("ind_level", {"A": frozenset({ALL_INDUSTRIES}), "S": codes.sectors}),
                "cipcode": ("cip_level", codes.cipcodes)}
    lists = {column: _labelled(column, used(column))
             for column in ("agg_level_pseo", "inst_level", "cip_level", "geo_level", "ind_level")}
    lists["degree_level"] = _labelled("degree_level", sorted(codes.degree_levels))
    for column, (level, of_level) in by_level.items():
        lists[column] = _labelled(column, sorted(set().union(*(of_level[v] for v in used(level)))))
    return lists


IDENTIFIER_PATTERNS = {"institution": f"{OPEID}|{STATE_FIPS}",   # inst_level I / S
                       "grad_cohort": YEAR}


@cache
def official_fields(product: Product | str) -> tuple[TableField, ...]:
    """Every column of pseoe_all / pseof_all, in order (the layout validator's)."""
    product = Product(product)
    product_layout = layout(product)
    identifiers = read_label_file("lehd_identifiers_pseo.csv").set_index("Variable")
    variables = read_label_file(f"variables_{product.value}.csv").set_index("Indicator Variable")
    code_list = _identifier_codes(product)
    fields = [TableField(name, FieldType.INTEGER if identifiers.at[name, "Type"] == NUMERIC_TYPE
                         else FieldType.STRING, identifiers.at[name, "label"],
                         code_list.get(name, ()), IDENTIFIER_PATTERNS.get(name), required=True)
              for name in product_layout.identifiers]
    for indicator in product_layout.indicators:
        row = variables.loc[indicator.name]
        text = f"{row['Description']} ({row['Units']}); empty unless {indicator.status_flag} is " \
               + ("1, 2 or 4" if indicator.ipeds else "1")
        if product is Product.PSEOF and is_origin_measure(indicator.name):
            text += (f"; a measure of the origin: only on the all-industries national rows "
                     f"(geo_level {ORIGIN_MEASURE_LEVELS[0]}, ind_level "
                     f"{ORIGIN_MEASURE_LEVELS[1]}), empty with flag {FLAG_NOT_AVAILABLE} on "
                     "the sector and division rows")
        fields.append(TableField(indicator.name, FieldType.INTEGER, text,
                                 minimum=0 if indicator.units == "Count" else None))
    flag_labels = {"standard": read_label_file("label_flags.csv"),
                   "ipeds": read_label_file("label_flags_ipeds_count.csv")}
    for flag in product_layout.status_flags:
        of = [i for i in product_layout.indicators if i.status_flag == flag]
        labels = flag_labels["ipeds" if of[0].ipeds else "standard"]
        allowed = sorted(code_lists().ipeds_flags if of[0].ipeds else STATUS_FLAGS, key=int)
        described = dict(zip(labels["flag"], labels["label"]))
        fields.append(TableField(flag, FieldType.INTEGER,
                                 f"Status flag of {', '.join(i.name for i in of)}",
                                 tuple((code, described[code]) for code in allowed),
                                 required=True))
    return tuple(fields)


@cache
def institutions_fields() -> tuple[TableField, ...]:
    """pseo_all_institutions.csv (variables_pseo_institutions.csv)."""
    variables = read_label_file("variables_pseo_institutions.csv")
    patterns = {"institution": OPEID, "institution_state": POSTAL_CODE, "statefips": STATE_FIPS}
    return tuple(TableField(name.lstrip("\ufeff"), FieldType.STRING, label,
                            pattern=patterns.get(name.lstrip("\ufeff")),
                            required=name.lstrip("\ufeff") in patterns)
                 for name, label in zip(variables["variable"], variables["label"]))


@cache
def histogram_fields() -> tuple[TableField, ...]:
    """pseoh_all.csv: the earnings identifiers as in pseoe_all, then its pandera schema's
    columns with their descriptions."""
    earnings = {field.name: field for field in official_fields(Product.PSEOE)}
    return tuple(earnings.get(name) or TableField(
        name, FieldType.INTEGER if str(column.dtype).startswith("int") else FieldType.STRING,
        column.description or "", required=True)
        for name, column in pseoh_schema().columns.items())


def public_table_fields() -> dict[str, tuple[TableField, ...]]:
    """The national tables described, by CSV name (in all/)."""
    return {Product.PSEOE.file_name: official_fields(Product.PSEOE),
            Product.PSEOF.file_name: official_fields(Product.PSEOF),
            f"{pseoh_schema().name}.csv": histogram_fields(),
            INSTITUTIONS_TABLE: institutions_fields()}


def arrow_schema(fields: tuple[TableField, ...]) -> pa.Schema:
    return pa.schema([field.arrow_field() for field in fields])


PACKAGE_NAME = "pseo-das-national-tables"
SCHEMA_SOURCE = "https://github.com/LEDApplications/lehd-schema"


def datapackage(resources: dict[str, str]) -> dict:
    """The Data Package of the national tables: `resources` maps each table's CSV name to
    its file name as published (`pseoe_all.csv.gz`)."""
    fields = public_table_fields()
    return {
        "name": PACKAGE_NAME,
        "title": "PSEO national tables of a pseo-das release",
        "description": (
            "pseo-das extension, not part of the Census Bureau's PSEO distribution: every "
            "column of the national tables with its type, description, code list and status "
            f"flags, from the LEHD Public Use Schema {SCHEMA_VERSION} label files. The same "
            "tables as Parquet, typed as described here, are in parquet/."),
        "sources": [{"title": f"LEHD Public Use Schema {SCHEMA_VERSION}", "path": SCHEMA_SOURCE}],
        "resources": [{
            "name": csv_name.removesuffix(".csv"), "path": published,
            "format": "csv", "mediatype": "text/csv", "encoding": "utf-8",
            **({"compression": "gz"} if published.endswith(".gz") else {}),
            "schema": {"fields": [field.table_schema() for field in fields[csv_name]],
                       "missingValues": [""]},
        } for csv_name, published in resources.items()],
    }
