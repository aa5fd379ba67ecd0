"""One config per method: raw values (Inspect -T, lm-eval metadata strings) become checked parameters."""

from __future__ import annotations

import pytest

from medfuzz.options import ConfigError, as_bool, parameter_table
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.solvers.medguard.config import MedGuardConfig
from medfuzz.solvers.tces.config import TCESConfig


def test_strings_are_converted_by_annotation() -> None:
    config = MedFuzzConfig.from_options(turns="3", min_kept="0.25", require_options="true",
                                        target_temperature="none", seed=7)
    assert (config.turns, config.min_kept, config.require_options, config.target_temperature, config.seed) == \
        (3, 0.25, True, None, 7)
    assert TCESConfig.from_options(n="-20", budget="8.0", vocabulary="").n == -20.0
    assert MedGuardConfig.from_options(limit_per_aspect="2").limit_per_aspect == 2


@pytest.mark.parametrize(("raw", "message"), [
    ({"turns": "-1"}, "turns must be at least 1, got -1"),
    ({"replicates": 0}, "replicates must be at least 1"),
    ({"min_kept": 2}, "min_kept must be between 0 and 1"),
    ({"turns": "abc"}, "turns='abc' is not an integer"),
    ({"turns": 2.5}, "turns=2.5 is not an integer"),
    ({"require_options": "maybe"}, "require_options='maybe' is not a boolean"),
    ({"turn": 3}, "unknown MedFuzz parameter 'turn'; did you mean 'turns'"),
    ({"pvalue_prompt": "letters"}, "pvalue_prompt must be one of"),
    ({"alpha": 1.5}, "alpha must be between 0 and 1"),
])
def test_bad_medfuzz_values_name_the_parameter(raw: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        MedFuzzConfig.from_options(**raw)


def test_other_methods_check_their_parameters() -> None:
    with pytest.raises(ConfigError, match="sampler must be one of"):
        TCESConfig.from_options(sampler="greedy")
    with pytest.raises(ConfigError, match="budget must be at least 1"):
        TCESConfig.from_options(budget="0")
    with pytest.raises(ConfigError, match="unknown MedGuard aspect 'typo'"):
        MedGuardConfig.from_options(aspects="typo")
    with pytest.raises(ConfigError, match="unknown prompt strategy"):
        MedGuardConfig.from_options(strategy="loud")


def test_lm_eval_metadata_may_carry_other_names() -> None:
    # lm-eval merges --model_args into the metadata: unknown names are dropped only when asked to
    config = MedFuzzConfig.from_options(ignore_unknown=True, pretrained="x", turns="2")
    assert config.turns == 2
    with pytest.raises(ConfigError, match="unknown MedFuzz parameter 'pretrained'"):
        MedFuzzConfig.from_options(pretrained="x")


def test_as_bool_and_table() -> None:
    assert as_bool("On") is True and as_bool(0) is False and as_bool("no") is False
    with pytest.raises(ConfigError):
        as_bool("2")
    table = parameter_table(TCESConfig)
    assert table.splitlines()[0] == "| parameter | type | default | meaning |"
    assert "| `budget` | int | `8` |" in table


def test_a_dataclass_declares_its_command_line_options_once() -> None:
    """``flag`` metadata -> argparse options (``add_flags``) -> field values (``flag_values``): names from the
    fields, ``int`` checked, ``bool`` as --x/--no-x or one switch, ``parse`` applied only to what was given."""
    import argparse
    from dataclasses import dataclass, field

    from medfuzz.options import add_flags, flag, flag_values

    @dataclass
    class Example:
        name: str = field(metadata=flag("the name", required=True))
        max_items: int | None = field(default=None, metadata=flag("how many (10 % of them)"))
        colour: str = field(default="red", metadata=flag("a colour", choices=("red", "blue")))
        tags: tuple[str, ...] = field(default=("a",), metadata=flag("comma list",
                                                                    parse=lambda text: tuple(text.split(","))))
        pairs: list[str] = field(default_factory=list, metadata=flag("repeatable", name="--pair", short="-P",
                                                                     many=True, parse=sorted))
        live: bool = field(default=False, metadata=flag("--live/--no-live"))
        report: bool = field(default=True, metadata=flag("skip the report", name="--no-report", switch=True))
        hidden: int = 3  # no flag: not on the command line

    parser = argparse.ArgumentParser()
    add_flags(parser, Example)
    given = flag_values(Example, parser.parse_args(["--name", "n", "--max-items", "4", "--colour", "blue",
                                                    "--tags", "x,y", "-P", "b", "--pair", "a", "--live",
                                                    "--no-report"]))
    assert given == {"name": "n", "max_items": 4, "colour": "blue", "tags": ("x", "y"), "pairs": ["a", "b"],
                     "live": True, "report": False}
    defaults = Example(**flag_values(Example, parser.parse_args(["--name", "n"])))
    assert defaults == Example(name="n")  # nothing given: every field's own default, ``parse`` never called
    assert flag_values(Example, parser.parse_args(["--name", "n", "--no-live"]))["live"] is False
    for bad in (["--max-items", "4"], ["--name", "n", "--max-items", "four"], ["--name", "n", "--colour", "green"],
                ["--name", "n", "--hidden", "1"]):
        with pytest.raises(SystemExit):  # argparse's usage error (exit 2)
            parser.parse_args(bad)
    assert "10 % of them" in parser.format_help()  # help is given as written ("%" escaped for argparse)
