"""MedGuard (Yang et al., ``003_*``): the ten medical-safety aspects and the builders that make their items
from sources users can get (``builders``, ``sources``, ``transforms``, ``statements``, ``generator``,
``prompts``, ``taxonomy``). Harness-free. Scoring (accuracy, equity consistency, bootstrap SEs, McNemar +
Holm) is in ``medfuzz.scorers.medguard``; both harnesses' tasks are under ``medfuzz.tasks``.
"""

from medfuzz.solvers.medguard.builders import BuildConfig, build, read, write
from medfuzz.solvers.medguard.taxonomy import ALL_ASPECTS, PRINCIPLE_OF, RACES, SEXES, Aspect, Principle, parse_aspects

__all__ = [
    "ALL_ASPECTS",
    "PRINCIPLE_OF",
    "RACES",
    "SEXES",
    "Aspect",
    "BuildConfig",
    "Principle",
    "build",
    "parse_aspects",
    "read",
    "write",
]
