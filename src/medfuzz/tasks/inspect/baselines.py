"""Clean multiple-choice baselines: ``medfuzz/<benchmark>_clean`` for every benchmark of the registry
(``medfuzz/medqa_clean``, ``medfuzz/medmcqa_clean``, ``medfuzz/mcq_clean`` for your own data; Inspect's own
``multiple_choice`` solver and strict ``choice()`` scorer; the lm-eval twins are ``medqa_clean``, ...). Backend
failures follow the shared failure policy (``failure_policy``): retried, then an LLM error of the sample, never a
failed run.

Two scorers run on every sample. ``baseline_choice`` is Inspect's own strict ``choice()`` (the reply must
carry its ``ANSWER: X`` line) on the answered samples and stays the headline metric (``baseline_acc``,
``baseline_stderr``, ``baseline_llm_errors``, ``baseline_llm_error_rate``). ``lenient_choice`` keeps the
strict verdict whenever ``choice`` found an answer and otherwise reads the reply with the one shared parser
(``medfuzz.benchmarks.answers.answer_letter``: "A)", "(B)", "Answer: C", ...), so a chatty or weak model is
not scored 0 without explanation: ``lenient_accuracy`` is the accuracy under that reading and
``lenient_needed`` counts the replies that only the lenient reading could use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import inspect_ai.scorer as inspect_scorer  # module, not its stderr: names here are the metrics we define
from inspect_ai import Task
from inspect_ai.scorer import (
    CORRECT,
    INCORRECT,
    NOANSWER,
    Metric,
    SampleScore,
    Score,
    Scorer,
    Target,
    choice,
    metric,
    scorer,
)
from inspect_ai.solver import TaskState, multiple_choice

from medfuzz.adapters.inspect_model import default_generate_config
from medfuzz.benchmarks import PromptStyle
from medfuzz.benchmarks.answers import answer_letter
from medfuzz.benchmarks.registry import Benchmark
from medfuzz.benchmarks.selection import DataSelection
from medfuzz.models.failures import reply_excerpt
from medfuzz.options import MethodConfig, one_of
from medfuzz.tasks.inspect.failure_policy import LLM_ERROR, answer_or_llm_error, baseline_choice
from medfuzz.tasks.inspect.rescoring import marks_from_reply, rescorable
from medfuzz.tasks.inspect.run_checks import RunChecks, first_reason
from medfuzz.tasks.inspect.samples import selected_dataset
from medfuzz.tasks.inspect.task_options import task_options
from medfuzz.tasks.inspect.variants import benchmark_task, per_benchmark, selection_parameters

# Inspect records this in each log (eval.task_version) and eval-set resumes only logs of the same version:
# bump it when the task's scoring, metrics or data change (CHANGELOG.md, "Task versions")
TASK_VERSION = 1
LENIENT_SCORER = "lenient_choice"


@metric
def lenient_accuracy() -> Metric:
    """Accuracy when a reply may name its option the lenient way (strict verdict kept where it exists)."""

    def compute(scores: list[SampleScore]) -> float:
        answered = [s for s in scores if not (s.score.metadata or {}).get(LLM_ERROR)]
        return sum(s.score.as_float() for s in answered) / len(answered) if answered else float("nan")

    return compute


@metric
def lenient_needed() -> Metric:
    """How many replies Inspect's strict ``choice()`` could not read but the lenient parser could."""

    def compute(scores: list[SampleScore]) -> int:
        return sum(bool((s.score.metadata or {}).get("lenient_needed")) for s in scores)

    return compute


def _target_letters(target: Target, count: int) -> set[str]:
    letters = {token for value in target for token in value.replace(",", " ").split()}
    return {chr(ord("A") + int(t) - 1) if t.isnumeric() else t.upper() for t in letters if t} & {
        chr(ord("A") + i) for i in range(count)}


@rescorable
@scorer(metrics=[lenient_accuracy(), inspect_scorer.stderr(), lenient_needed()])
def lenient_choice() -> Scorer:
    """Inspect's ``choice()`` verdict where it read an answer, else the letter ``answer_letter`` reads in the
    reply (``metadata["lenient_needed"]`` marks those replies)."""
    strict_scorer = choice()

    async def score(state: TaskState, target: Target) -> Score:
        reason = state.metadata.get(LLM_ERROR)
        if reason:  # the failure policy's LLM error: no reply to read, left out like baseline_acc does
            return Score(value=NOANSWER, answer=None, explanation=f"LLM error: {reason}",
                         metadata={"lenient_needed": False, LLM_ERROR: reason})
        marks_from_reply(state)  # a state rebuilt from a log by `inspect score`
        strict = await strict_scorer(state, target)
        if strict is not None and strict.answer:
            return Score(value=strict.value, answer=strict.answer, explanation="strict ANSWER line",
                         metadata={"lenient_needed": False})
        # what the model saw: choices in their displayed order, lettered A, B, ...
        shown = list(state.choices)
        letters = [chr(ord("A") + i) for i in range(len(shown))]
        options = {letter: c.value for letter, c in zip(letters, shown, strict=True)}
        completion = state.output.completion or ""
        letter = answer_letter(completion, letters, options)
        if letter is None:
            return Score(value=INCORRECT, answer="", explanation=f"no option letter in {reply_excerpt(completion)}",
                         metadata={"lenient_needed": False})
        original = shown[letters.index(letter)].original_position  # the target letters name original positions
        correct = chr(ord("A") + original) in _target_letters(target, len(shown))
        return Score(value=CORRECT if correct else INCORRECT, answer=letter,
                     explanation=f"lenient reading of {reply_excerpt(completion)}", metadata={"lenient_needed": True})

    return score


@dataclass(frozen=True)
class BaselineConfig(MethodConfig):
    """The clean baselines' own parameters (the items come from ``DataSelection``)."""

    LABEL: ClassVar[str] = "clean baseline"
    DOCS: ClassVar[dict[str, str]] = {
        "seed": "seed of the option shuffle (with shuffle_choices)",
        "prompt_style": "basic | cot: Inspect's multiple_choice template without or with step-by-step reasoning",
    }

    seed: int = 0
    prompt_style: str = PromptStyle.BASIC.value

    def __post_init__(self) -> None:
        one_of("prompt_style", self.prompt_style, [style.value for style in PromptStyle])


def baseline_task(benchmark: str, raw: dict[str, Any]) -> Task:
    """The clean-baseline task of ``benchmark`` from one task's raw options, each name checked by its owner
    (``task_options``, then ``DataSelection`` and ``BaselineConfig``)."""
    own = BaselineConfig.names()
    raw = task_options(f"medfuzz/{benchmark}_clean", raw, (*DataSelection.names(), *own))
    selection = DataSelection.from_options(**{k: v for k, v in raw.items() if k not in own})
    config = BaselineConfig.from_options(**{k: v for k, v in raw.items() if k in own})
    return _baseline(benchmark, selection, config.seed, config.prompt_style)


def _baseline(benchmark: str, selection: DataSelection, seed: int, prompt_style: str) -> Task:
    style = PromptStyle(prompt_style)
    dataset, data = selected_dataset(benchmark, selection, seed)
    return Task(
        version=TASK_VERSION,
        dataset=dataset,
        solver=answer_or_llm_error(multiple_choice(cot=style is PromptStyle.COT)),
        scorer=[baseline_choice(), lenient_choice()],
        config=default_generate_config(),
        # a run nothing answered ends as an error, with the cause (not success with NaN accuracy)
        early_stopping=RunChecks(lambda scores: first_reason(scores, LLM_ERROR)),
        metadata={**data, "prompt_style": style.value, "seed": seed},
    )


def _clean_task(benchmark: Benchmark):
    """``medfuzz/<key>_clean``: data-selection parameters with their owner's defaults (``DataSelection``; the split
    the benchmark's own, named so that the log records it), then the baseline's."""
    data = (f"``hf`` ({benchmark.hub_id}), " if benchmark.hub_id else "") + \
        ("``demo`` (bundled dev items), " if benchmark.demo else "")
    doc = (f"{benchmark.title}, clean. ``data``: {data}a file in any layout medfuzz reads or a Hugging Face dataset "
           "id (``columns`` maps another layout, ``data_name`` names it). ``prompt_style``: basic | cot. Every name "
           "is checked (``task_options``): another medfuzz task's is ignored with a warning, any other is an error.")
    params = selection_parameters(benchmark.default_split, seed=BaselineConfig.seed,
                                  prompt_style=BaselineConfig.prompt_style)
    return benchmark_task(f"{benchmark.key}_clean", benchmark, params,
                          lambda b, raw: baseline_task(b.key, raw), doc, __name__)


per_benchmark(globals(), "{key}_clean", _clean_task)  # medqa_clean, medmcqa_clean, mcq_clean, ...
