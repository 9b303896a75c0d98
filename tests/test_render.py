"""The documents show configuration values as the TOML a user writes, not Python reprs."""
from __future__ import annotations

import tomllib

import pytest

from pseo_das.config import load_config
from pseo_das.reports.render import toml_value


@pytest.mark.parametrize("value", [True, False, 10000, 1.5, 3e-06, "", "a \"quoted\" path",
                                   [1, 5, 10], {"05": 3}, {"4": "measure", "A": "derive"}])
def test_a_value_renders_as_toml_that_reads_back_as_itself(value):
    assert tomllib.loads(f"x = {toml_value(value)}")["x"] == value


def test_the_shipped_configuration_renders_without_python_reprs():
    rendered = {key: toml_value(value) for key, value in load_config().flat().items()}
    for key, text in rendered.items():
        assert not any(word in text for word in ("True", "False", "None", "{'")), (key, text)
        if text != "(not set)":
            tomllib.loads(f"x = {text}")     # every value is valid TOML
    assert rendered["release.production"] == "false"
    assert rendered["cells.cohort_years_by_degree"] == '{ "05" = 3 }'
