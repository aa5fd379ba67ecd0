"""One owner of MedGuard's build parameters: ``BuildSources`` declares ``n``, ``seed`` and the sources once;
``MedGuardConfig`` (Inspect, lm-eval) and ``BuildConfig`` derive from it, and ``medfuzz medguard build``'s
options are made from ``BuildConfig``'s fields (defaults and help included)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from medfuzz.cli.medguard import BUILD_OPTIONS, build_parser, main
from medfuzz.options import ConfigError
from medfuzz.solvers.medguard.builders import BuildConfig, BuildSources
from medfuzz.solvers.medguard.config import MedGuardConfig


def _names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def test_both_configs_derive_the_build_parameters_from_one_dataclass() -> None:
    sources = _names(BuildSources)
    assert sources == ["n", "seed", "medqa", "pubmedqa", "stereotype", "confidentiality", "equity", "translations"]
    assert _names(MedGuardConfig)[:len(sources)] == sources and _names(BuildConfig)[:len(sources)] == sources
    for name in sources:
        assert MedGuardConfig.DOCS[name] == BuildConfig.DOCS[name] == BuildSources.DOCS[name]
    config = MedGuardConfig(n=7, seed=3, medqa="hf")
    assert config.build_config(defer_generation=True) == BuildConfig(n=7, seed=3, medqa="hf", defer_generation=True)
    with pytest.raises(ConfigError, match="n must be at least 1"):
        BuildConfig(n=0)


def test_the_build_command_is_made_from_the_dataclass_fields() -> None:
    build = build_parser()._subparsers._group_actions[0].choices["build"]  # type: ignore[union-attr]
    by_dest = {a.dest: a for a in build._actions}
    for f in BUILD_OPTIONS:
        action = by_dest[f.name]
        assert action.option_strings == [f"--{f.name.replace('_', '-')}"]
        default = ",".join(f.default) if isinstance(f.default, tuple) else f.default
        assert action.default == default and BuildConfig.DOCS[f.name] in action.help
    assert "defer_generation" not in by_dest
    args = build_parser().parse_args(["build", "--out", "x", "--n", "4", "--languages", "es", "--generate-sycophancy"])
    config = BuildConfig.from_options(**{f.name: getattr(args, f.name) for f in BUILD_OPTIONS})
    assert config == BuildConfig(n=4, languages=("es",), generate_sycophancy=True)


def test_build_writes_what_the_options_say_and_refuses_a_bad_value(tmp_path, capsys) -> None:
    out = tmp_path / "mg.jsonl"
    assert main(["build", "--out", str(out), "--aspects", "defense", "--n", "2", "--seed", "5",
                 "--languages", "zh"]) == 0
    header = json.loads(out.read_text().splitlines()[0])["medguard_benchmark"]
    assert header["config"] == {**dataclasses.asdict(BuildConfig(n=2, seed=5)), "languages": ["zh"]}
    with pytest.raises(SystemExit) as stopped:
        main(["build", "--out", str(out), "--n", "0"])
    assert stopped.value.code == 2 and "n must be at least 1" in capsys.readouterr().err
