"""``medfuzz run``'s levels: the methods' settings, named (``LEVELS``: paper, direct, lean, demo, quick), with
the upper bound of model calls each implies (see ``plan``'s docstring)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from medfuzz.records.methods import METHODS as REGISTRY


@dataclass(frozen=True)
class Level:
    """Named settings for every method: task options per method, and a sentence on what they change."""

    name: str
    summary: str
    # per method (a ``records.methods`` key): its task options, one run per mapping (a tuple: several runs); a
    # method the level does not name runs as its spec's ``level_runs`` say (TCES: drugs and diseases)
    methods: Mapping[str, Mapping[str, Any] | tuple[Mapping[str, Any], ...]] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)  # per method, when --limit is not given
    generate: Mapping[str, Any] = field(default_factory=dict)  # Inspect generate config for every run
    data: str = "hf"  # the benchmark's source when --data is not given
    # per method, the lm-eval half's item count where it is not the Inspect run's (``limits``): passed as the
    # method's own lm-eval option (``Method.lm_eval_limit_option``)
    lm_eval_limits: Mapping[str, int] = field(default_factory=dict)

    def settings_for(self, method: str) -> tuple[Mapping[str, Any], ...]:
        """The task options this level gives one method: one run per mapping (TCES: one per entity and
        sampler); a method the level does not name runs as its spec says (``Method.level_runs``: once, at its
        task's defaults, unless the spec names several runs)."""
        chosen = self.methods.get(method)
        if chosen is None:
            return REGISTRY[method].level_runs if method in REGISTRY else ({},)
        return tuple(chosen) if isinstance(chosen, tuple) else (chosen,)

    def options_of(self, method: str) -> Mapping[str, Any]:
        """The one run's task options of a method this level runs once (MedFuzz, MedGuard)."""
        [options] = self.settings_for(method)
        return options


LEVELS: dict[str, Level] = {
    "paper": Level(
        "paper", "every method at its paper's settings: MedFuzz K = 5 turns, 5 replicates, M = 30 control fuzzes "
                 "(sequential test), p̂ from the full dialog over 5 option orders (at most 3,270 calls per MedFuzz "
                 "item, 2,340 of them p̂ calls); TCES PDWS n = -20, budget 8, drugs and diseases; MedGuard "
                 "every aspect"),
    # The cheaper MedFuzz levels change only Algorithm 2's p̂ and the number of trajectories: K, M, the
    # sequential test, alpha and the seeds stay the paper's, so a replicate both levels run makes the same attack
    # and draws the same control fuzzes (the seeds derive from the item and the replicate, the option orders
    # are a prefix of the paper's), and only the p-value's precision differs (bench/medfuzz_cost_levels.py).
    "direct": Level(
        "direct", "the paper's settings with MedFuzz's p̂ read from the answer letter alone (1 call per option "
                  "order instead of the 3-call dialog): at most 1,710 calls per MedFuzz item (780 "
                  "p̂ calls); the same attacks and controls; needs letter log-probabilities from the target, "
                  "else each draw is one sampled letter (p̂ in steps of 1/5: little power); TCES and MedGuard at "
                  "the paper's",
        methods={"medfuzz": {"pvalue_prompt": "direct"}}),
    "lean": Level(
        "lean", "direct p̂ over 3 option orders and 3 replicates instead of 5: at most 840 calls per MedFuzz item "
                "(282 p̂ calls); 3 of the paper's 5 attack trajectories per item (fewer attacks found, "
                "wider ASR intervals), a noisier p̂ (less power on small effects; the test stays valid); needs "
                "letter log-probabilities like direct; TCES and MedGuard at the paper's",
        methods={"medfuzz": {"pvalue_prompt": "direct", "option_orders": 3, "replicates": 3}}),
    "demo": Level(
        "demo", "the demo's short run (medfuzz demo): MedFuzz on 10 items, K = 3, 1 replicate, M = 10 controls "
                "(too few for any attack to be significant at alpha 0.05), direct p̂, 1 option order (at most 82 "
                "calls per MedFuzz item); TCES RandS and PDWS on 12 items, budget 8; MedGuard 2 items per aspect",
        methods={"medfuzz": {"turns": 3, "replicates": 1, "exemplars": 0, "controls": 10, "min_controls": 8,
                             "option_orders": 1, "pvalue_prompt": "direct", "max_tokens_scale": 0.25,
                             "require_confidences": False, "max_retries": 1},
                 "tces": tuple({"entity": entity, "sampler": sampler, "n": n, "budget": 8, "max_retries": 1}
                               for entity in ("drugs", "diseases") for sampler, n in (("rands", 0), ("pdws", -20)))},
        limits={"baseline": 10, "tces": 12, "medfuzz": 10, "medguard": 2},
        # short greedy answers: SmolLM2 answers with a letter; MedFuzz's target keeps the paper's temperature 1.0
        # (its own config), so its sampled answers can move
        generate={"max_tokens": 32, "seed": 0, "temperature": 0.0}, data="demo",
        # lm-eval's single-substitution TCES tasks take the first 5 attackable items
        lm_eval_limits={"tces": 5}),
}
LEVELS["quick"] = Level(
    "quick", "the smallest run that touches every method (the end-to-end tests): the demo's settings on 2 "
             "MedFuzz items (at most 82 calls per MedFuzz item), TCES drugs with RandS on 10 items, MedGuard 1 "
             "item per aspect",
    methods={"medfuzz": LEVELS["demo"].options_of("medfuzz"), "tces": LEVELS["demo"].settings_for("tces")[:1]},
    limits={"baseline": 10, "tces": 10, "medfuzz": 2, "medguard": 1}, generate=LEVELS["demo"].generate,
    data="demo", lm_eval_limits=LEVELS["demo"].lm_eval_limits)


