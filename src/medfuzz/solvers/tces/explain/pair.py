"""Explain a clean/attacked pair of multiple-choice prompts: Shapley profiles of the answer-letter scores before
and after the substitution, and what changed (``medfuzz.solvers.tces.explain.summary``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from medfuzz.benchmarks.items import MCQItem
from medfuzz.benchmarks.prompts import format_question
from medfuzz.solvers.tces.explain.shapley import DEFAULT_MAX_EVALS, TokenAttribution, shapley_values
from medfuzz.solvers.tces.explain.summary import (
    QuestionLayout,
    changed_option,
    pair_summary,
    profile_summary,
    shared_token_correlation,
)


class Explainable(Protocol):
    """What a model must offer to be explained (``explain.model.LetterLogprobModel`` does)."""

    name: str
    output: str

    def game(self, item: MCQItem, letters: Sequence[str]) -> tuple[Any, Any, Callable[[np.ndarray], np.ndarray]]:
        """(prompt layout with ``exact_tokenization``, shap masker over ``format_question(item)``, scores)."""
        ...

    def letter_probabilities(self, item: MCQItem) -> dict[str, float]: ...


@dataclass(frozen=True)
class ExplainPair:
    """A clean item and the same item after one option was changed (a TCES substitution); ``logged`` holds what
    the attack log says (the target's answers, the replacement, the outcome), shown beside the explanation."""

    item_id: str
    clean: MCQItem
    attacked: MCQItem
    logged: dict[str, Any] = field(default_factory=dict)


@dataclass
class PairExplanation:
    pair: ExplainPair
    model: str
    output: str
    victim: str
    clean_span: tuple[int, int]
    attacked_span: tuple[int, int]
    letters: list[str]
    clean: TokenAttribution
    attacked: TokenAttribution
    clean_layout: QuestionLayout
    attacked_layout: QuestionLayout
    probabilities: dict[str, dict[str, float]]
    predicted: dict[str, str]
    profiles: dict[str, dict[str, dict[str, Any]]]  # letter -> clean/attacked -> profile_summary
    summary: dict[str, dict[str, Any]]  # letter -> pair_summary
    exact_tokenization: bool

    @property
    def key(self) -> str:
        return self.pair.clean.answer

    def to_dict(self) -> dict[str, Any]:
        clean_option = self.pair.clean.clean_options()[self.victim]
        attacked_option = self.pair.attacked.clean_options()[self.victim]
        return {
            "item_id": self.pair.item_id,
            "model": self.model,
            "output": self.output,
            "key": self.key,
            "substituted_option": self.victim,
            "entity": {"clean": clean_option[slice(*self.clean_span)],
                       "attacked": attacked_option[slice(*self.attacked_span)]},
            "explained_letters": self.letters,
            "model_probabilities": self.probabilities,
            "model_prediction": self.predicted,
            "logged": self.pair.logged,
            "exact_tokenization": self.exact_tokenization,
            "summary": self.summary,
            "profiles": self.profiles,
            "clean": {"question": format_question(self.pair.clean), **self.clean.to_dict()},
            "attacked": {"question": format_question(self.pair.attacked), **self.attacked.to_dict()},
        }


def explained_letters(key: str, letters: Sequence[str], *answers: str | None) -> list[str]:
    """The key first, then every other answer seen (the model's own and the logged ones), in option order."""
    others = [letter for letter in letters if letter != key and letter in answers]
    return [key, *others]


def explain_pair(pair: ExplainPair, model: Explainable, max_evals: int = DEFAULT_MAX_EVALS, seed: int = 0,
                 batch_size: int = 16) -> PairExplanation:
    """Shapley profiles of the key's letter score (and of every other letter the model or the log answered) for
    the clean and the attacked prompt, with the summary numbers of ``medfuzz.solvers.tces.explain.summary``."""
    victim, clean_span, attacked_span = changed_option(pair.clean, pair.attacked)
    probabilities = {"clean": model.letter_probabilities(pair.clean),
                     "attacked": model.letter_probabilities(pair.attacked)}
    predicted = {side: max(p, key=p.__getitem__) for side, p in probabilities.items()}
    logged = pair.logged.get("answers") or {}
    letters = explained_letters(pair.clean.answer, pair.clean.letters, *predicted.values(), *logged.values())
    attributions: dict[str, TokenAttribution] = {}
    exact = True
    for side, item in (("clean", pair.clean), ("attacked", pair.attacked)):
        layout, masker, scores = model.game(item, letters)
        exact = exact and bool(getattr(layout, "exact_tokenization", True))
        attributions[side] = shapley_values(format_question(item), scores, masker, letters, max_evals=max_evals,
                                            batch_size=batch_size, seed=seed)
    layouts = {"clean": QuestionLayout.of(pair.clean, victim, clean_span),
               "attacked": QuestionLayout.of(pair.attacked, victim, attacked_span)}
    profiles: dict[str, dict[str, dict[str, Any]]] = {}
    summary: dict[str, dict[str, Any]] = {}
    for letter in letters:
        profiles[letter] = {
            side: profile_summary(attributions[side], layouts[side], letter, pair.clean.answer, victim,
                                  predicted[side])
            for side in ("clean", "attacked")
        }
        correlation = shared_token_correlation(attributions["clean"], attributions["attacked"], letter)
        summary[letter] = pair_summary(profiles[letter]["clean"], profiles[letter]["attacked"], correlation, victim)
    return PairExplanation(pair=pair, model=model.name, output=model.output, victim=victim, clean_span=clean_span,
                           attacked_span=attacked_span, letters=letters, clean=attributions["clean"],
                           attacked=attributions["attacked"], clean_layout=layouts["clean"],
                           attacked_layout=layouts["attacked"], probabilities=probabilities, predicted=predicted,
                           profiles=profiles, summary=summary, exact_tokenization=exact)
