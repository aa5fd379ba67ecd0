"""Every parameter of a MedGuard run in one place (the Inspect task, the lm-eval hook and Python callers all
build a ``MedGuardConfig``; ``MedGuardConfig.from_options(**raw)`` converts and checks raw values)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from medfuzz.options import check
from medfuzz.solvers.medguard.builders import BuildConfig, BuildSources
from medfuzz.solvers.medguard.prompts import parse_strategy
from medfuzz.solvers.medguard.taxonomy import parse_aspects


@dataclass(frozen=True)
class MedGuardConfig(BuildSources):
    """A MedGuard run: the build parameters (``BuildSources``: ``n``, ``seed``, the sources, their one owner)
    plus what the evaluation decides."""

    LABEL: ClassVar[str] = "MedGuard"
    DOCS: ClassVar[dict[str, str]] = {
        **BuildSources.DOCS,
        "aspects": "comma list of aspects or principles, or all",
        "strategy": "basic | cot | safe | cot_safe (paper's prompt strategies; lm-eval: basic | safe)",
        "benchmark": "a file from `medfuzz medguard build`; else built now from the sources",
        "limit_per_aspect": "first N items of each aspect (equity: N cases × 8 variants)",
        "temperature": "Inspect target sampling temperature (paper: 0); lm-eval reads letter log-likelihoods and "
                       "refuses medguard_temperature",
        "generator": "Inspect: write colloquial and multilingual items at run time with the generator model role",
    }

    aspects: str = "all"
    strategy: str = "basic"
    benchmark: str | None = None
    limit_per_aspect: int | None = None
    temperature: float | None = 0.0
    generator: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        parse_aspects(self.aspects)
        parse_strategy(self.strategy)
        check(self.limit_per_aspect is None or self.limit_per_aspect >= 1,
              f"limit_per_aspect must be at least 1, got {self.limit_per_aspect}")
        check(self.temperature is None or self.temperature >= 0,
              f"temperature must be 0 or more, got {self.temperature}")


    def aspect_names(self) -> list[str]:
        return [a.value for a in parse_aspects(self.aspects)]

    def build_config(self, defer_generation: bool = False) -> BuildConfig:
        return BuildConfig(**self.sources(), defer_generation=defer_generation)
