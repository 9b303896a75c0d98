"""Render release documents from Jinja templates: Markdown, and HTML from the Markdown."""
from __future__ import annotations

import json
import math
from pathlib import Path

import markdown
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from pseo_das.epsilon import epsilon_text

def toml_value(value: object) -> str:
    """A configuration value as a user writes it in the TOML file (the audit's replay
    writes its configuration file with it; the documents show values with it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else \
            ("nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))
    if isinstance(value, (int, str)):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}"
                                for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {value!r}")


TEMPLATES = Path(__file__).with_name("templates")
_env = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined,
                   trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
_env.filters["eps"] = epsilon_text      # exact: 7.5, 1/3, 0.00000000000000000001
_env.filters["toml"] = lambda x: "(not set)" if x is None else toml_value(x)
_env.filters["num"] = lambda x: f"{x:,}" if isinstance(x, int) else f"{x:,.2f}"


def render_markdown(template: str, context: dict) -> str:
    return _env.get_template(template).render(**context)


def to_html(markdown_text: str, title: str) -> str:
    body = markdown.markdown(markdown_text, extensions=["tables", "toc"])
    return _env.get_template("page.html.j2").render(title=title, body=body)
