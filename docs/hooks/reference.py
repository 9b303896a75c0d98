"""MkDocs hook: the generated references, built from the code at every docs build.

A page holds a marker line `<!-- generated: NAME -->`; this hook replaces it with the text
that NAME's function computes from the source of truth, so the reference cannot drift:

* `cli`: every command's `--help`, from the argparse parser (`pseo_das.cli.parser`);
* `configuration`: every section and key of `pseo_das/default_config.toml` with its comment
  and default, and the type and bounds of its pydantic model (`pseo_das.config`);
* `outputs`: the official files' columns (as `schemas/table_package.py` describes them for the
  datapackage), aggregation levels and flags from the LEHD
  schema's label files shipped in the package, and the extension files' columns from their
  pandera schemas (`schemas/outputs.py`).

An unknown marker fails the build. The hook is listed in mkdocs.yml (`hooks:`) and lives
outside the package, so the wheel ships no docs code.
"""
from __future__ import annotations

import argparse
import os
import re
import tomllib
from fractions import Fraction
from pathlib import Path

MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)


def cli_reference() -> str:
    from pseo_das.cli import parser

    os.environ["COLUMNS"] = "100"            # argparse wraps to the terminal: a fixed width
    main = parser()
    out = ["## pseo-das", "", "```text", main.format_help().rstrip(), "```", ""]
    commands = next(a for a in main._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in commands._choices_actions}
    for name, sub in commands.choices.items():
        out += [f"## {name}", "", helps.get(name) or "", ""]
        out += ["```text", sub.format_help().rstrip(), "```", ""]
        nested = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
        for action in nested:
            for sub_name, subsub in action.choices.items():
                out += [f"### {name} {sub_name}", "", "```text", subsub.format_help().rstrip(),
                        "```", ""]
    return "\n".join(out)


def _comments_and_keys(text: str) -> dict[str, dict[str, list[str]]]:
    """Per section, per key (commented-out keys included), the comment lines between the
    key before it and the key, and the comment at the end of its line. A blank line ends a
    comment that is not about the key after it (a section's introduction, a note)."""
    sections: dict[str, dict[str, list[str]]] = {}
    section, pending = None, []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            pending = []
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            section, pending = stripped[1:-1], []
            sections[section] = {}
            continue
        key = re.match(r"^#?\s*([a-z_]+) = ", stripped)
        if key and stripped.startswith("#"):        # a commented-out key, not prose
            try:
                tomllib.loads(stripped.lstrip("#").strip())
            except tomllib.TOMLDecodeError:
                key = None
        if section is not None and key:
            name = key.group(1)
            trailing = line.split("#")[-1].strip() if re.search(r"\s#\s", line) and not stripped.startswith("#") else ""
            sections[section].setdefault(name, pending + ([trailing] if trailing else []))
            pending = []
        elif stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
    return sections


def _type_text(annotation: object) -> str:
    text = str(annotation)
    text = re.sub(r"typing\.|pseo_das\.[a-z_.]+\.|<class '([^']+)'>", lambda m: m.group(1) or "", text)
    text = text.replace("NoneType", "None").replace("fractions.", "")
    text = text.replace("Fraction", "exact decimal")
    return text


def _bounds(field: object) -> str:
    parts = []
    for item in getattr(field, "metadata", []):
        for name, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"),
                           ("min_length", "at least"), ("max_length", "at most")):
            value = getattr(item, name, None)
            if value is not None:
                parts.append(f"{sign} {value}" + (" items" if "length" in name else ""))
    return ", ".join(parts)


def configuration_reference() -> str:
    import pseo_das
    from pseo_das.config import ReleaseConfig
    from pseo_das.reports.render import toml_value

    path = Path(pseo_das.__file__).parent / "default_config.toml"
    text = path.read_text()
    defaults = tomllib.loads(text)
    comments = _comments_and_keys(text)
    out = []
    for section, model_field in ReleaseConfig.model_fields.items():
        model = model_field.annotation
        out += [f"## [{section}]", ""]
        out += ["| key | type and bounds | default | meaning (from `default_config.toml`) |",
                "|---|---|---|---|"]
        for key, field in model.model_fields.items():
            if key in defaults.get(section, {}):
                default = defaults[section][key]
            elif field.is_required():
                default = "(required)"
            else:
                default = field.default
            if default == {}:
                default = "{}"
            elif default != "(required)":
                default = toml_value(float(default) if isinstance(default, Fraction) else default)
            kind = _type_text(field.annotation)
            bounds = _bounds(field)
            meaning = " ".join(comments.get(section, {}).get(key, [])) or (field.description or "")
            cells = [f"`{key}`", f"`{kind}`" + (f" ({bounds})" if bounds else ""),
                     f"`{default}`", meaning.replace("|", "\\|")]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def _table(frame, columns: list[str] | None = None) -> list[str]:
    columns = columns or list(frame.columns)
    lines = ["| " + " | ".join(c.replace("\ufeff", "") for c in columns) + " |", "|" + "---|" * len(columns)]
    for _, row in frame.iterrows():
        lines.append("| " + " | ".join(str(row[c]).replace("|", "\\|").replace("\ufeff", "")
                                       for c in columns) + " |")
    return lines + [""]


def _fields_table(fields) -> list[str]:
    """The columns of a public table as `schemas/table_package.py` describes them for the
    datapackage and the Parquet copies (the layout validator's columns and code lists)."""
    lines = ["| # | column | type | meaning |", "|---|---|---|---|"]
    for number, field in enumerate(fields, 1):
        codes = f" ({len(field.codes)} codes)" if field.codes else ""
        meaning = field.description.replace("|", "\\|")
        lines.append(f"| {number} | `{field.name}` | {field.type.value} | {meaning}{codes} |")
    return lines + [""]


def _check_text(check) -> str:
    """A pandera check as a reader wants it: a short list of values in full, a long one
    counted; a named check by its name."""
    values = check.statistics.get("allowed_values")
    if values is not None and len(values) > 12:
        return f"one of {len(values)} codes ({values[0]} ... {values[-1]})"
    return check.error or check.name


def outputs_reference() -> str:
    from pseo_das.schemas import outputs, pseo_layout
    from pseo_das.schemas.pseo_layout import Product, layout
    from pseo_das.schemas.table_package import institutions_fields, official_fields

    read = pseo_layout.read_label_file
    out = [f"Generated from the LEHD Public Use Schema {pseo_layout.SCHEMA_VERSION} label files "
           "shipped in `pseo_das/reference/lehd-schema-v4.14.0/` and the pandera schemas of "
           "`schemas/outputs.py`.", ""]
    for product in Product:
        spec = layout(product)
        out += [f"## {product.value}_all.csv: columns in order", ""]
        out += _fields_table(official_fields(product))
        out += [f"### {product.value}_all.csv: aggregation levels", ""]
        out += _table(spec.levels, ["agg_level_pseo", "grad_char", "inst_level", "cip_level",
                                    "geo_level", "ind_level", "by_grad_cohort"])
    out += ["## Status flags", "", "`label_flags.csv` (pseo-das writes -1, 1 and 5):", ""]
    out += _table(read("label_flags.csv"))
    out += ["`label_flags_ipeds_count.csv` (the `status_y*_ipeds_count` flags):", ""]
    out += _table(read("label_flags_ipeds_count.csv"))
    out += ["## Code lists", ""]
    for name in ("label_inst_level.csv", "label_degree_level.csv", "label_cip_level.csv",
                 "label_geo_level.csv", "label_ind_level.csv", "label_geography_division.csv"):
        out += [f"### {name}", ""] + _table(read(name))
    industry = read("label_industry.csv")
    out += ["### label_industry.csv (NAICS sectors, ind_level S)", ""]
    out += _table(industry[industry["ind_level"].isin(["A", "S"])])
    out += ["## pseo_all_institutions.csv", ""] + _fields_table(institutions_fields())
    for title, schema in (("pseoh_all.csv (pseo-das extension: the noisy histograms)",
                           outputs.pseoh_schema()),
                          ("pseoemp_all.csv (pseo-das extension: the employer-side table)",
                           outputs.pseoemp_schema((1, 5, 10)))):
        out += [f"## {title}", "", "| column | type | checks |", "|---|---|---|"]
        for name, column in schema.columns.items():
            checks = "; ".join(_check_text(check) for check in column.checks)
            kind = "text" if "string" in str(column.dtype) or str(column.dtype) == "str" else str(column.dtype)
            out.append(f"| `{name}` | `{kind}`{' (may be empty)' if column.nullable else ''} | {checks} |")
        table_checks = "; ".join(str(check.name) for check in schema.checks)
        unique = f"; one row per {', '.join(schema.unique)}" if schema.unique else ""
        out += ["", f"Table checks: {table_checks or 'none'}{unique}.", ""]
    return "\n".join(out)


GENERATORS = {"cli": cli_reference, "configuration": configuration_reference,
              "outputs": outputs_reference}


def on_page_markdown(markdown: str, page, config, files) -> str:
    def replace(match: re.Match) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"{page.file.src_path}: unknown generated section {name!r}; "
                             f"known: {', '.join(GENERATORS)}")
        return GENERATORS[name]()
    return MARKER.sub(replace, markdown)
