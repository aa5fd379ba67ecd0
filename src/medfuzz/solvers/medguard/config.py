"""Every parameter of a MedGuard run in one place (the Inspect task, the lm-eval hook and Python callers all
build a ``MedGuardConfig``; ``MedGuardConfig.from_options(**raw)`` converts and checks raw values)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from medfuzz.options import MethodConfig, check
from medfuzz.solvers.medguard.builders import BuildConfig
from medfuzz.solvers.medguard.prompts import parse_strategy
from medfuzz.solvers.medguard.taxonomy import parse_aspects

SOURCES = ("medqa", "pubmedqa", "stereotype", "confidentiality", "equity", "translations")


@dataclass(frozen=True)
class MedGuardConfig(MethodConfig):
    LABEL: ClassVar[str] = "MedGuard"
    DOCS: ClassVar[dict[str, str]] = {
        "aspects": "comma list of aspects or principles, or all",
        "strategy": "basic | cot | safe | cot_safe (paper's prompt strategies; lm-eval: basic | safe)",
        "benchmark": "a file from `medfuzz medguard build`; else built now from the sources",
        "n": "items per aspect when building (equity: cases, each asked in 8 variants)",
        "seed": "seed of the builders (item choice, balanced key positions, option order, variants)",
        "limit_per_aspect": "first N items of each aspect (equity: N cases × 8 variants)",
        "temperature": "Inspect target sampling temperature (paper: 0); lm-eval reads letter log-likelihoods and "
                       "refuses medguard_temperature",
        "medqa": "MedQA source: demo | hf | a file", "pubmedqa": "PubMedQA PQA-L source: demo | a file",
        "stereotype": "stereotype cases: demo | a file", "confidentiality": "patient-record extract: demo | a file",
        "equity": "equity cases with demographic placeholders: demo | a file",
        "translations": "translated items for multilingual: demo | a file",
        "generator": "Inspect: write colloquial and multilingual items at run time with the generator model role",
    }

    aspects: str = "all"
    strategy: str = "basic"
    benchmark: str | None = None
    n: int = 100
    seed: int = 0
    limit_per_aspect: int | None = None
    temperature: float | None = 0.0
    medqa: str = "demo"
    pubmedqa: str = "demo"
    stereotype: str = "demo"
    confidentiality: str = "demo"
    equity: str = "demo"
    translations: str = "demo"
    generator: bool = False

    def __post_init__(self) -> None:
        parse_aspects(self.aspects)
        parse_strategy(self.strategy)
        check(self.n >= 1, f"n must be at least 1, got {self.n}")
        check(self.limit_per_aspect is None or self.limit_per_aspect >= 1,
              f"limit_per_aspect must be at least 1, got {self.limit_per_aspect}")
        check(self.temperature is None or self.temperature >= 0,
              f"temperature must be 0 or more, got {self.temperature}")


    def aspect_names(self) -> list[str]:
        return [a.value for a in parse_aspects(self.aspects)]

    def build_config(self, defer_generation: bool = False) -> BuildConfig:
        return BuildConfig(n=self.n, seed=self.seed, defer_generation=defer_generation,
                           **{s: getattr(self, s) for s in SOURCES})
