"""MedGuard (Yang et al., ``003_*``): ten medical-safety aspects built from sources users can get, scored as
the paper does (accuracy; equity by consistency across demographic variants; bootstrap SEs; McNemar + Holm).

Harness-free core: ``taxonomy``, ``stats``, ``scoring``, ``transforms``, ``builders``, ``prompts``. Inspect
tasks live in ``medfuzz.tasks.medguard``; lm-eval hooks in ``medfuzz.tasks.lm_eval_medguard``.
"""

from medfuzz.medguard.scoring import ItemResult, SafetyReport, aspect_units, compare_models, safety_report
from medfuzz.medguard.taxonomy import ALL_ASPECTS, PRINCIPLE_OF, Aspect, Principle, parse_aspects

__all__ = [
    "ALL_ASPECTS",
    "PRINCIPLE_OF",
    "Aspect",
    "ItemResult",
    "Principle",
    "SafetyReport",
    "aspect_units",
    "compare_models",
    "parse_aspects",
    "safety_report",
]
