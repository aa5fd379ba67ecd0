"""Every parameter of a MedFuzz run, in one place: the Inspect task, the lm-eval hook and Python callers all
build a ``MedFuzzConfig`` (``MedFuzzConfig.from_options(**raw)`` converts and checks raw values), so the
harnesses cannot drift apart in defaults. Defaults follow the paper where it says (K = 5 turns, 5
replicates, M = 30 controls, target temperature 1.0); ``controls_policy`` defaults to the sequential test
(Besag-Clifford), which stops null attacks after a few controls; both policies decide with a valid p-value
(docs/medfuzz.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from medfuzz.options import MethodConfig, check
from medfuzz.stats import DEFAULT_ALPHA, ControlSchedule, controls_for_holm, stop_exceedances

PVALUE_PROMPTS = ("dialog", "direct")
FAITHFULNESS = ("lexical", "judge")
CONTROLS_POLICIES = ("sequential", "fixed")
MIN_CONTROLS_SHARE = 0.8  # the default min_controls is this share of M, rounded up


@dataclass(frozen=True)
class MedFuzzConfig(MethodConfig):
    """Every knob of a MedFuzz run (recorded with each result)."""

    LABEL: ClassVar[str] = "MedFuzz"
    DOCS: ClassVar[dict[str, str]] = {
        "turns": "K attack attempts per replicate (paper: 5)",
        "replicates": "attack trajectories per item (paper: 5)",
        "exemplars": "in-context exemplars drawn at random per replicate for the target",
        "exemplar_data": "where exemplars come from: demo | hf | a file",
        "controls": "M control fuzzes per successful attack (paper: 30); 0 = no significance test",
        "controls_policy": "sequential: stop at the h-th exceedance with Besag-Clifford's p = h/l "
                           "(h: where the fixed test could no longer reject) | fixed: always M, p = (b+1)/(M+1)",
        "control_batch": "controls generated and scored per step of the sequential test; none (default): "
                         "batches that grow with the evidence, each the larger of what the decision still "
                         "certainly needs and the controls drawn so far (1, 1, 2, 4, 8, 14 at M = 30), so a null "
                         "attack pays for few controls past its stop; N: N at a time. Decisions and p-values "
                         "are the same for every value",
        "min_controls": "usable controls needed for a p-value (default: ceil(0.8 M)); fewer: the attack is "
                        "untested, never significant",
        "option_orders": "draws (random option order + exemplars; made per item, shared by its replicates) "
                         "averaged in each p-hat",
        "pvalue_prompt": "dialog: the full target dialog per draw | direct: the letter only (cheaper)",
        "pack": "assumption pack: a bundled name or a YAML path",
        "faithfulness": "lexical | judge (the judge model role)",
        "alpha": "significance level: an attack is significant when its valid p-value is <= alpha (also the "
                 "level of the Holm/BH counts)",
        "holm_family": "size M so that Holm over this many tested attacks can reject: up to "
                       "max(M, ceil(m / alpha) - 1) controls per attack (e.g. items x replicates); the sequential "
                       "test keeps the paper M's h, so null attacks still stop at their first exceedances; 0 = off",
        "max_retries": "extra tries per step before the turn is an LLM error",
        "min_kept": "share of the original question's words a modified question must keep",
        "require_options": "reject modified items that leave the options out (else re-attach them)",
        "require_confidences": "unparseable 1-5 confidences are an LLM error (paper); false keeps the raw text",
        "word_tolerance": "a control's added-word count may differ by max(1, tolerance × the attack's count)",
        "control_tries": "samples per control fuzz before it is given up",
        "target_temperature": "target sampling temperature (paper: 1.0)",
        "attacker_temperature": "attacker sampling temperature",
        "seed": "seed of every random choice and model call",
        "max_tokens_scale": "scales the reasoning, plan and item token budgets (e.g. 0.25 for small models)",
        "cot_tokens": "target reasoning budget", "confidence_tokens": "target confidence budget",
        "answer_tokens": "target answer budget", "plan_tokens": "attacker plan budget",
        "item_tokens": "attacker modified-item budget",
    }

    turns: int = 5
    replicates: int = 5
    exemplars: int = 2
    exemplar_data: str = "demo"
    controls: int = 30
    controls_policy: str = "sequential"
    control_batch: int | None = None
    min_controls: int | None = None
    option_orders: int = 5
    pvalue_prompt: str = "dialog"
    pack: str = "patient_characteristics"
    faithfulness: str = "lexical"
    alpha: float = DEFAULT_ALPHA
    holm_family: int = 0
    max_retries: int = 2
    min_kept: float = 0.5
    require_options: bool = False
    require_confidences: bool = True
    word_tolerance: float = 0.1
    control_tries: int = 3
    target_temperature: float | None = 1.0
    attacker_temperature: float | None = 1.0
    seed: int = 0
    max_tokens_scale: float = 1.0
    cot_tokens: int = 400
    confidence_tokens: int = 80
    answer_tokens: int = 8
    plan_tokens: int = 400
    item_tokens: int = 1200

    def __post_init__(self) -> None:
        check(self.turns >= 1, f"turns must be at least 1, got {self.turns}")
        check(self.replicates >= 1, f"replicates must be at least 1, got {self.replicates}")
        check(self.exemplars >= 0, f"exemplars must be 0 or more, got {self.exemplars}")
        check(self.controls >= 0, f"controls must be 0 or more, got {self.controls}")
        check(self.controls_policy in CONTROLS_POLICIES,
              f"controls_policy must be one of {list(CONTROLS_POLICIES)}, got {self.controls_policy!r}")
        check(self.control_batch is None or self.control_batch >= 1,
              f"control_batch must be at least 1 (or none: growing batches), got {self.control_batch}")
        check(self.min_controls is None or self.min_controls >= 1,
              f"min_controls must be at least 1, got {self.min_controls}")
        check(self.min_controls is None or self.controls == 0 or self.min_controls <= self.controls,
              f"min_controls ({self.min_controls}) must not exceed controls ({self.controls})")
        check(self.option_orders >= 1, f"option_orders must be at least 1, got {self.option_orders}")
        check(self.pvalue_prompt in PVALUE_PROMPTS,
              f"pvalue_prompt must be one of {list(PVALUE_PROMPTS)}, got {self.pvalue_prompt!r}")
        check(self.faithfulness in FAITHFULNESS,
              f"faithfulness must be one of {list(FAITHFULNESS)}, got {self.faithfulness!r}")
        check(0.0 < self.alpha < 1.0, f"alpha must be between 0 and 1, got {self.alpha}")
        check(self.holm_family >= 0, f"holm_family must be 0 or more, got {self.holm_family}")
        check(self.holm_family == 0 or self.controls > 0, "holm_family sizes the controls: it needs controls > 0")
        check(self.max_retries >= 0, f"max_retries must be 0 or more, got {self.max_retries}")
        check(0.0 <= self.min_kept <= 1.0, f"min_kept must be between 0 and 1, got {self.min_kept}")
        check(self.word_tolerance >= 0.0, f"word_tolerance must be 0 or more, got {self.word_tolerance}")
        check(self.control_tries >= 1, f"control_tries must be at least 1, got {self.control_tries}")
        for name in ("target_temperature", "attacker_temperature"):
            value = getattr(self, name)
            check(value is None or value >= 0.0, f"{name} must be 0 or more, got {value}")
        check(self.max_tokens_scale > 0.0, f"max_tokens_scale must be positive, got {self.max_tokens_scale}")
        for name in ("cot_tokens", "confidence_tokens", "answer_tokens", "plan_tokens", "item_tokens"):
            check(getattr(self, name) >= 1, f"{name} must be at least 1, got {getattr(self, name)}")


    @classmethod
    def recorded_max_controls(cls, recorded: dict[str, Any]) -> int:
        """The largest M of a run from the config it recorded (a log, a score); for a record this version cannot
        rebuild (older or foreign fields), its ``controls``."""
        try:
            return cls.from_options(ignore_unknown=True, **recorded).max_controls
        except ValueError:
            return int(recorded.get("controls", 0))

    @property
    def max_controls(self) -> int:
        """The largest number of controls an attack may draw: M, or the M that makes Holm over
        ``holm_family`` tests attainable (1 / (M + 1) <= alpha / m) when that is larger."""
        if self.holm_family and self.controls:
            return max(self.controls, controls_for_holm(self.holm_family, self.alpha))
        return self.controls

    @property
    def stop_exceedances(self) -> int:
        """h of the sequential test, from the paper's M (``controls``) whatever ``holm_family`` adds."""
        return stop_exceedances(self.alpha, self.controls) if self.controls else 0

    @property
    def min_usable_controls(self) -> int:
        """``min_controls``, or its default ``ceil(0.8 M)`` (at least 1) of the largest M."""
        if self.min_controls is not None:
            return self.min_controls
        return max(1, math.ceil(MIN_CONTROLS_SHARE * self.max_controls - 1e-9))

    def control_schedule(self) -> ControlSchedule:
        """A fresh schedule of one attack's control loop (Algorithm 2) under these settings: the one the engine
        runs (``controls.test_attack``) and the one the suite's cost estimate replays (``cli.suite.cost``)."""
        return ControlSchedule(limit=self.max_controls, stop_at=self.stop_exceedances,
                               min_controls=self.min_usable_controls, batch=self.control_batch,
                               sequential=self.controls_policy == "sequential")

    def max_calls(self, items: int) -> dict[str, int]:
        """Upper bound on model calls per role (the ``UsageLedger`` role names) for ``items`` items, the worst
        case of the algorithm as ``engine``/``controls``/``scorers.faithfulness`` run it: every step of every
        replicate retried to the limit, every replicate attacked for all K turns and then succeeding (so every
        one is tested with all M controls, each resampled ``control_tries`` times; the sequential policy stops
        earlier, never later).

        Per replicate: the target answers the original and one item per turn, each a three-step dialog
        (reasoning, confidences, letter) of up to ``max_retries + 1`` calls per step; the attacker plans and
        writes an item on turn 1 and adds a post-mortem on later turns (3K − 1 steps); Algorithm 2 asks for p̂
        of the attack and M controls over ``option_orders`` draws, each draw a full dialog without retries
        (``dialog``: 3 calls) or one letter (``direct``: 1); p̂ of the original item is estimated once per item
        and shared by its replicates; a ``judge`` reads each success.
        """
        tries = self.max_retries + 1
        per_replicate = {
            "target": 3 * tries * (1 + self.turns),
            "attacker": tries * (3 * self.turns - 1),
        }
        if self.controls > 0:
            per_draw = 3 if self.pvalue_prompt == "dialog" else 1
            per_replicate["attacker_controls"] = self.max_controls * self.control_tries
            per_replicate["target_significance"] = (1 + self.max_controls) * self.option_orders * per_draw
        if self.faithfulness == "judge":
            per_replicate["judge"] = 1
        bound = {role: calls * self.replicates * items for role, calls in per_replicate.items()}
        if self.controls > 0:  # the shared p̂ of the original item
            bound["target_significance"] += items * self.option_orders * per_draw
        return bound

    # generation budgets after ``max_tokens_scale`` (reasoning, plan and item scale; letters do not)
    @property
    def cot_budget(self) -> int:
        return max(16, int(self.cot_tokens * self.max_tokens_scale))

    @property
    def plan_budget(self) -> int:
        return max(16, int(self.plan_tokens * self.max_tokens_scale))

    @property
    def item_budget(self) -> int:
        return max(64, int(self.item_tokens * self.max_tokens_scale))
