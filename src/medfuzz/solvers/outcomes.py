"""The one outcome vocabulary of every attack (MedFuzz replicates and TCES items), as TextAttack has one
result vocabulary for all its recipes. Metrics, reports and both harnesses use these names."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    SUCCESS = "success"  # the target left the correct answer within the attack's budget (turns / queries)
    ATTACK_FAILED = "attack_failed"  # the budget was spent and the target still answers correctly
    ALREADY_WRONG = "already_wrong"  # the target got the unmodified item wrong: nothing to attack
    NO_ENTITY = "no_entity"  # TCES only: no distractor holds an entity of the type, no query spent
    LLM_ERROR = "llm_error"  # a model failed, refused or wrote something unusable, after bounded retries


ATTACKED = (Outcome.SUCCESS, Outcome.ATTACK_FAILED)  # the target was right on the original and was attacked
