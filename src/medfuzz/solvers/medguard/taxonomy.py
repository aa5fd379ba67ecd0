"""MedGuard's five principles and ten aspects (Yang et al., ``003_*``: Fig. 1 and Methods)."""

from __future__ import annotations

from enum import StrEnum

# the demographic variants of the equity aspects (paper §3: two sexes × four races per case)
SEXES = ("male", "female")
RACES = ("Asian", "Black", "Hispanic", "White")


class Principle(StrEnum):
    FAIRNESS = "fairness"
    PRIVACY = "privacy"
    RESILIENCE = "resilience"
    ROBUSTNESS = "robustness"
    TRUTHFULNESS = "truthfulness"


class Aspect(StrEnum):
    GENDER_EQUITY = "gender_equity"
    RACE_EQUITY = "race_equity"
    STEREOTYPE = "stereotype"
    CONFIDENTIALITY = "confidentiality"
    DEFENSE = "defense"
    COLLOQUIAL = "colloquial"
    ERROR_TOLERANCE = "error_tolerance"
    MULTILINGUAL = "multilingual"
    HALLUCINATION = "hallucination"
    SYCOPHANCY = "sycophancy"


PRINCIPLE_OF: dict[Aspect, Principle] = {
    Aspect.GENDER_EQUITY: Principle.FAIRNESS,
    Aspect.RACE_EQUITY: Principle.FAIRNESS,
    Aspect.STEREOTYPE: Principle.FAIRNESS,
    Aspect.CONFIDENTIALITY: Principle.PRIVACY,
    Aspect.DEFENSE: Principle.RESILIENCE,
    Aspect.COLLOQUIAL: Principle.ROBUSTNESS,
    Aspect.ERROR_TOLERANCE: Principle.ROBUSTNESS,
    Aspect.MULTILINGUAL: Principle.ROBUSTNESS,
    Aspect.HALLUCINATION: Principle.TRUTHFULNESS,
    Aspect.SYCOPHANCY: Principle.TRUTHFULNESS,
}

ALL_ASPECTS: tuple[Aspect, ...] = tuple(Aspect)
EQUITY_ASPECTS: frozenset[Aspect] = frozenset({Aspect.GENDER_EQUITY, Aspect.RACE_EQUITY})

# The item pools a benchmark file holds. Both equity aspects are scored on the same pool of demographic
# variants (gender equity across sexes within a race, race equity across races within a sex).
EQUITY_POOL = "equity"

# Friendlier names accepted wherever aspects are chosen (the DESIGN examples use ``typos,injection``).
ALIASES: dict[str, Aspect] = {
    "typos": Aspect.ERROR_TOLERANCE,
    "injection": Aspect.DEFENSE,
    "layperson": Aspect.COLLOQUIAL,
    "translation": Aspect.MULTILINGUAL,
    "gender": Aspect.GENDER_EQUITY,
    "race": Aspect.RACE_EQUITY,
    "privacy_leak": Aspect.CONFIDENTIALITY,
}


def pool_of(aspect: Aspect) -> str:
    """The benchmark-file pool an aspect's items live in."""
    return EQUITY_POOL if aspect in EQUITY_ASPECTS else aspect.value


def parse_aspects(spec: str | list[str] | tuple[str, ...] | None) -> list[Aspect]:
    """``"all"``/``None``, a comma-separated string, or a list → aspects in canonical order.

    Principle names are accepted and expand to their aspects (``"robustness"`` → its three aspects).
    """
    if spec is None:
        return list(ALL_ASPECTS)
    names = [s.strip().lower() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    chosen: set[Aspect] = set()
    for name in names:
        if name == "all":
            chosen.update(ALL_ASPECTS)
        elif name in ALIASES:
            chosen.add(ALIASES[name])
        elif name in {p.value for p in Principle}:
            chosen.update(a for a, p in PRINCIPLE_OF.items() if p.value == name)
        elif name == EQUITY_POOL:
            chosen.update(EQUITY_ASPECTS)
        elif name in {a.value for a in Aspect}:
            chosen.add(Aspect(name))
        else:
            valid = ", ".join([a.value for a in Aspect] + [p.value for p in Principle] + ["equity", "all", *ALIASES])
            raise ValueError(f"unknown MedGuard aspect {name!r}; choose from {valid}")
    if not chosen:
        raise ValueError("no MedGuard aspect selected")
    return [a for a in ALL_ASPECTS if a in chosen]
