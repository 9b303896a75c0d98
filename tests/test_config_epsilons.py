"""Epsilons are an exact type in the configuration: a decimal in the TOML file is the
rational it writes (0.1 is 1/10, never the double nearest it), whichever field has the
type, and config.json writes it as the same JSON number as before."""
from __future__ import annotations

import json
import tomllib
from decimal import Decimal
from fractions import Fraction

import pytest
from pydantic import ValidationError

from pseo_das.config import Epsilon, MosConfig, ReleaseConfig, load_config


def test_a_decimal_epsilon_stays_exact_through_the_configuration(tmp_path):
    path = tmp_path / "release.toml"
    path.write_text("[privacy]\nepsilon_per_tabulation = 0.1\nepsilon_cap = 1.2\n"
                    "[flows]\nepsilon_per_tabulation = 0.1\ncorrection = \"measured-total\"\n"
                    "total_epsilon_per_tabulation = 0.2\n")
    cfg = load_config(path)
    # a float path would hold 0.1000000000000000055511151231257827 (!= 1/10)
    assert cfg.privacy.epsilon_per_tabulation == Fraction(1, 10)
    assert cfg.flows.total_epsilon_per_tabulation == Fraction(1, 5)
    # 3 earnings x 0.1 + 3 flows x 0.1 + 3 origin totals x 0.2 = 1.2 exactly, within the cap
    # 1.2 (as doubles 1.2000000000000002: over it)
    assert cfg.planned_total_epsilon() == cfg.privacy.epsilon_cap == Fraction(6, 5)
    dumped = cfg.model_dump(mode="json")
    assert (dumped["privacy"]["epsilon_per_tabulation"], dumped["privacy"]["epsilon_cap"],
            dumped["flows"]["total_epsilon_per_tabulation"]) == (0.1, 1.2, 0.2)
    assert '"epsilon_per_tabulation": 0.1,' in json.dumps(dumped)   # config.json: a number
    again = ReleaseConfig.model_validate(json.loads(json.dumps(dumped)))  # a recorded one
    assert again == cfg and again.model_dump(mode="json") == dumped


def test_an_epsilon_field_added_to_a_model_is_exact_without_being_listed():
    """No list of epsilon keys: the type alone makes a new field exact, refuses digits a
    double cannot hold (config.json writes a double) and writes the same JSON number."""
    class WithNewEpsilon(MosConfig):
        new_epsilon: Epsilon = Fraction(1)

    def read(text: str) -> WithNewEpsilon:
        return WithNewEpsilon.model_validate(tomllib.loads(text, parse_float=Decimal),
                                             strict=True)

    settings = read("new_epsilon = 0.1\n")
    assert settings.new_epsilon == Fraction(1, 10)
    assert json.loads(settings.model_dump_json())["new_epsilon"] == 0.1
    with pytest.raises(ValidationError, match="more digits than a double holds"):
        read("new_epsilon = 0.10000000000000000001\n")
    with pytest.raises(ValidationError, match="outside the accepted range"):
        read("new_epsilon = 1e-99999999\n")        # refused before the exact value is built
    with pytest.raises(ValidationError, match="a valid number"):
        read('new_epsilon = "0.1"\n')
