"""What a MedFuzz run records: per replicate, the outcome class and the whole story behind it.

Plain dataclasses with ``to_dict``/``from_dict`` so results travel through Inspect score metadata, JSONL
files (the "fuzzed file" lm-eval reads) and reports without losing anything.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from medfuzz.benchmarks.items import MCQItem
from medfuzz.solvers.outcomes import Outcome


@dataclass
class TargetReply:
    """One pass of the target dialog (reasoning -> confidences -> letter) over one version of an item."""

    cot: str = ""
    confidences: dict[str, int] | None = None
    confidences_raw: str = ""
    answer: str | None = None
    answer_raw: str = ""
    letter_logprobs: dict[str, float] | None = None
    error: str | None = None
    retries: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class Rejected:
    """An attacker reply that could not be used (kept as evidence; it never reaches the target)."""

    text: str
    kind: str
    problem: str


@dataclass
class Turn:
    """One attack attempt (1-based): post-mortem (turns > 1), plan, modified question, target's reply."""

    index: int
    plan: str = ""
    postmortem: str | None = None
    question: str | None = None
    added_spans: list[str] = field(default_factory=list)
    added_words: int = 0
    target: TargetReply | None = None
    rejected: list[Rejected] = field(default_factory=list)
    error: str | None = None


@dataclass
class ControlFuzz:
    """One control fuzz of Algorithm 2 and the target's estimated probability of the correct answer on it."""

    question: str
    added_words: int
    p_hat: float | None = None
    draws_used: int = 0
    index: int = 0  # position in the control stream (the p-value takes controls in this order)


@dataclass
class Significance:
    """Algorithm 2's raw material: p-hat of the original, the attack and each control (p-value: scorers).

    ``policy`` ``sequential`` draws controls in batches and stops at the h-th exceedance or when the attack
    can no longer be tested (``stopped`` says which: h_exceedances | untested, where a test drawing one
    control at a time stops before the last control, the same for every batch size; empty otherwise);
    ``controls_attempted`` counts the controls drawn (paid), up to the end of the batch that held the stop;
    ``stop_at`` is h (recorded under both policies: an attack is tested when it reached h exceedances or
    ``min_controls`` usable controls). ``controls_requested`` is the largest M of the run.
    ``min_controls``: usable controls a p-value needs. ``p0_shared``: p-hat of the
    original came from another replicate of the item (same draws), so its calls are counted there."""

    p0: float | None = None
    pa: float | None = None
    controls: list[ControlFuzz] = field(default_factory=list)
    controls_requested: int = 0
    controls_attempted: int = 0
    policy: str = "fixed"
    stop_at: int | None = None
    min_controls: int = 1
    stopped: str = ""
    p0_shared: bool = False
    controls_rejected: list[Rejected] = field(default_factory=list)
    draws: int = 0
    method: str = ""  # logprobs | sampling | mixed
    logprob_draws: int = 0
    sampled_draws: int = 0
    failed_draws: int = 0
    target_calls: int = 0
    attacker_calls: int = 0
    error: str | None = None


@dataclass
class ReplicateResult:
    item_id: str
    replicate: int
    seed: int
    outcome: Outcome
    exemplar_ids: list[str] = field(default_factory=list)
    original: TargetReply | None = None
    turns: list[Turn] = field(default_factory=list)
    success_turn: int | None = None
    error: str | None = None
    error_step: str | None = None
    significance: Significance | None = None
    usage: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def turns_used(self) -> int:
        return len(self.turns)

    @property
    def final_turn(self) -> Turn | None:
        complete = [t for t in self.turns if t.question is not None]
        return complete[-1] if complete else None

    @property
    def fuzzed_question(self) -> str | None:
        """The successful modified question, or the last one tried when the attack failed."""
        turn = self.final_turn
        return turn.question if turn else None

    def correct_after(self, k: int) -> bool | None:
        """Whether the replicate still counts as answered correctly after k attempts (None: LLM error)."""
        if self.outcome is Outcome.LLM_ERROR:
            return None
        if self.outcome is Outcome.ALREADY_WRONG:
            return False
        if self.outcome is Outcome.SUCCESS:
            assert self.success_turn is not None
            return k < self.success_turn
        return True

    def confidence_drop(self, answer: str) -> int | None:
        """Target's 1-5 confidence in the correct answer: original minus on the final modified item."""
        turn = self.final_turn
        before = (self.original.confidences or {}).get(answer) if self.original else None
        after = (turn.target.confidences or {}).get(answer) if turn and turn.target else None
        if before is None or after is None:
            return None
        return before - after

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplicateResult:
        def target(value: dict | None) -> TargetReply | None:
            return TargetReply(**value) if value else None

        def turn(value: dict) -> Turn:
            return Turn(**{**value, "target": target(value.get("target")),
                           "rejected": [Rejected(**r) for r in value.get("rejected", [])]})

        sig = data.get("significance")
        significance = None
        if sig:
            controls = [ControlFuzz(**c) for c in sig.get("controls", [])]
            rejected = [Rejected(**r) for r in sig.get("controls_rejected", [])]
            significance = Significance(**{**sig, "controls": controls, "controls_rejected": rejected})
        known = {f.name for f in fields(cls)}
        return cls(**{
            **{k: v for k, v in data.items() if k in known},
            "outcome": Outcome(data["outcome"]),
            "original": target(data.get("original")),
            "turns": [turn(t) for t in data.get("turns", [])],
            "significance": significance,
        })


@dataclass
class ItemResult:
    """All replicates of one benchmark item. ``cache_hits``: requests per role answered from the run's request
    cache instead of the model (not in the replicates' usage, which counts paid calls)."""

    item: MCQItem
    replicates: list[ReplicateResult]
    config: dict[str, Any] = field(default_factory=dict)
    cache_hits: dict[str, int] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        counts = {outcome.value: 0 for outcome in Outcome}
        for replicate in self.replicates:
            counts[replicate.outcome.value] += 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {"item": self.item.to_record(), "replicates": [r.to_dict() for r in self.replicates],
                "config": self.config, "cache_hits": self.cache_hits}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ItemResult:
        return cls(item=MCQItem.from_record(data["item"]),
                   replicates=[ReplicateResult.from_dict(r) for r in data["replicates"]],
                   config=dict(data.get("config") or {}), cache_hits=dict(data.get("cache_hits") or {}))
