"""Shared by the explanation tests: a finished TCES Inspect log (scripted target, offline) whose two items both
flip at the first substitution, and a toy model with a known preference."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from medfuzz.benchmarks.items import MCQItem
from medfuzz.benchmarks.prompts import format_question

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tces"
ITEMS = FIXTURES / "medqa_drug_items_key_a.jsonl"  # two MedQA items, key A, drug distractors
VOCABULARY = FIXTURES / "drugs_drugcentral.csv"


def tces_log(folder: Path, script: Sequence[str] = ("A", "B", "A", "C")) -> Path:
    """Run ``medfuzz/tces_medqa`` in-process against the scripted provider; by default item 1 flips to B and item
    2 to C at query 1. Returns the log file."""
    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect.tces import tces_medqa
    from tests.scripted_inspect import SCRIPT

    SCRIPT.clear()
    SCRIPT.extend(script)
    task = tces_medqa(data=str(ITEMS), sampler="pdws", n=-20, budget=1, seed=0, vocabulary=str(VOCABULARY))
    [log] = inspect_eval(task, model="medfuzz-scripted/target", log_dir=str(folder), max_samples=1, display="none")
    assert log.status == "success", log.error
    return Path(log.location)


@dataclass
class Layout:
    exact_tokenization: bool = True


class ToyModel:
    """Scores letter L by how many words of option L's line are unmasked, plus 3 when that line holds
    ``trigger``: a model that is drawn to the substituted option once the trigger entity is in it."""

    name = "toy"
    output = "logprob"

    def __init__(self, trigger: str) -> None:
        self.trigger = trigger.lower()

    def _scores(self, item: MCQItem, text: str, letters: Sequence[str]) -> list[float]:
        present = set(text.replace(".", " ").replace(",", " ").lower().split())
        out = []
        for letter in letters:
            words = item.clean_options()[letter].lower().split()
            value = 0.1 * sum(w in present for w in words)
            value += 3.0 * (self.trigger in present and self.trigger in words)
            value += 0.5 * (letter == item.answer and "cell" in present)  # a stem cue for the key
            out.append(value)
        return out

    def game(self, item: MCQItem, letters: Sequence[str]):
        import shap

        def scores(strings: np.ndarray) -> np.ndarray:
            return np.array([self._scores(item, str(s), letters) for s in strings])

        return Layout(), shap.maskers.Text(r"\s+"), scores

    def letter_probabilities(self, item: MCQItem) -> dict[str, float]:
        values = np.array(self._scores(item, format_question(item), item.letters))
        p = np.exp(values - values.max())
        return dict(zip(item.letters, (p / p.sum()).tolist(), strict=True))
