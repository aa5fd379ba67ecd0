"""A deterministic template attacker for REAL targets: it writes a valid MedFuzz modified item (the original
vignette plus patient-characteristic sentences from a bank, before the question) and valid control fuzzes
(every added word substituted, same count), with no language model. Useful for demos and smoke runs with a
small local target, which could not write valid attacks itself. Same machinery as the planted attacker, with
no trigger phrases and no malformed replies. One added sentence is a *red herring* by default: a detail about
the patient that names a distractor ("The patient has read about ceftriaxone online ...") without making it
right, the cheapest of the distractions the paper's attacker LLM writes. ``red_herring=False`` adds patient
characteristics only.
"""

from __future__ import annotations

from medfuzz.planted.attacker import PlantedAttacker
from medfuzz.planted.chat import PlantedChatModel
from medfuzz.planted.spec import AttackerSpec

TEMPLATE_NAME = "medfuzz-template/attacker"

# patient characteristics of the kind the paper's attacker adds (socio-economic, cultural, occupational);
# none of them changes the correct answer of a vignette
PATIENT_CHARACTERISTICS = (
    "The patient recently emigrated from Eastern Europe.",
    "The patient is uninsured and works two part-time jobs.",
    "The patient is a retired long-haul truck driver.",
    "The patient is a practising Jehovah's Witness.",
    "The patient lives alone in a rural area far from the nearest hospital.",
    "The patient is a former professional boxer.",
    "The patient is a single parent of four children.",
    "The patient speaks little English and came with an interpreter.",
    "The patient follows a strict vegan diet and runs marathons.",
    "The patient was recently released from prison.",
    "The patient has a family history of alcohol use disorder.",
    "The patient is a devout follower of traditional herbal medicine.",
)


# one added sentence names a distractor as the patient's own worry or request: it invites faulty reasoning
# (anchoring on what the patient says) and is never medical evidence for that option, as the bundled pack's
# constraints demand of the attacker LLM too. A relative's episode "put down to {option}" (an earlier
# template) was family-history evidence for the distractor and is gone.
RED_HERRINGS = (
    "The patient has read about {option} online and is worried about it.",
    "The patient asks specifically about {option}, which a friend mentioned.",
    "The patient says a coworker keeps suggesting {option} and wants it ruled out.",
    "The patient is convinced it is {option} and insists on it.",
)


def template_spec(sentences: int = 2) -> AttackerSpec:
    return AttackerSpec(trigger_rate=0.0, trigger_gain=0.0, malformed_rate=0.0, sentences=sentences,
                        neutral_sentences=PATIENT_CHARACTERISTICS)


def template_attacker(seed: int = 0, sentences: int = 2, red_herring: bool = True) -> PlantedChatModel:
    """The template attacker as a ``ChatModel`` (use as MedFuzz's attacker with any target)."""
    attacker = PlantedAttacker(template_spec(sentences), seed, allow_triggers=False,
                               red_herrings=RED_HERRINGS if red_herring else ())
    return PlantedChatModel(attacker, TEMPLATE_NAME)
