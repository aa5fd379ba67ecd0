"""Known-truth (planted) models: a target whose answer probabilities are a seeded function of the prompt and
an attacker that writes valid rewrites, so that every statistic medfuzz prints can be checked against a
value computed from the planted rule (``medfuzz validate``, docs/validation.md).

One behaviour, three faces: ``PlantedChatModel`` (in-process ``ChatModel``), ``serve`` (an
OpenAI-compatible HTTP server on 127.0.0.1) and the lm-eval ``LM`` in ``medfuzz.adapters.planted_lm``.
"""

from __future__ import annotations

from collections.abc import Sequence

from medfuzz.benchmarks.items import MCQItem
from medfuzz.planted.attacker import PlantedAttacker
from medfuzz.planted.chat import PlantedChatModel
from medfuzz.planted.spec import DEFAULT_SPEC, AttackerSpec, PlantedSpec, TargetSpec
from medfuzz.planted.target import PlantedTarget, Reply

ATTACKER_SUFFIX = "-attacker"


def planted_pair(spec: PlantedSpec | None = None, items: Sequence[MCQItem] | None = None
                 ) -> tuple[PlantedChatModel, PlantedChatModel]:
    """(target, attacker) ChatModels for ``spec`` (default: the bundled one)."""
    spec = spec or PlantedSpec.load()
    target = PlantedChatModel(PlantedTarget(spec, items), spec.name)
    attacker = PlantedChatModel(PlantedAttacker(spec.attacker, spec.seed), spec.name + ATTACKER_SUFFIX)
    return target, attacker


__all__ = ["ATTACKER_SUFFIX", "DEFAULT_SPEC", "AttackerSpec", "PlantedAttacker", "PlantedChatModel", "PlantedSpec",
           "PlantedTarget", "Reply", "TargetSpec", "planted_pair"]
