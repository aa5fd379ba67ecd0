"""Clean multiple-choice baselines: ``medfuzz/medqa_clean`` and ``medfuzz/medmcqa_clean`` (Inspect's own
``multiple_choice`` solver and strict ``choice()`` scorer; the lm-eval twins are ``medqa_clean`` and
``medmcqa_clean``). Backend failures follow the shared failure policy (``_failures``): retried, then an LLM
error of the sample, never a failed run; metrics ``baseline_acc`` (over answered samples), ``baseline_stderr``,
``baseline_llm_errors``, ``baseline_llm_error_rate``."""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.solver import multiple_choice

from medfuzz.adapters.inspect_model import default_generate_config
from medfuzz.benchmarks import PromptStyle
from medfuzz.tasks.inspect._dataset import mcq_dataset
from medfuzz.tasks.inspect._failures import answer_or_llm_error, baseline_choice


def _baseline(benchmark: str, data: str, split: str | None, limit: int | None, shuffle_choices: bool,
              seed: int, prompt_style: str) -> Task:
    style = PromptStyle(prompt_style)
    return Task(
        dataset=mcq_dataset(benchmark, data, split, limit, shuffle_choices, seed),
        solver=answer_or_llm_error(multiple_choice(cot=style is PromptStyle.COT)),
        scorer=baseline_choice(),
        config=default_generate_config(),
        metadata={"benchmark": benchmark, "data": data, "split": split, "prompt_style": style.value,
                  "shuffle_choices": shuffle_choices, "seed": seed},
    )


@task
def medqa_clean(
    data: str = "hf",
    split: str = "test",
    limit: int | None = None,
    shuffle_choices: bool = False,
    seed: int = 0,
    prompt_style: str = "basic",
) -> Task:
    """MedQA-USMLE 4-option, clean. ``data``: ``hf`` (GBaker/MedQA-USMLE-4-options), ``demo`` (50 bundled
    dev items) or a path to a jsonl in the original release layout. ``prompt_style``: basic | cot."""
    return _baseline("medqa", data, split, limit, shuffle_choices, seed, prompt_style)


@task
def medmcqa_clean(
    data: str = "hf",
    split: str = "validation",
    limit: int | None = None,
    shuffle_choices: bool = False,
    seed: int = 0,
    prompt_style: str = "basic",
) -> Task:
    """MedMCQA, clean. ``data``: ``hf`` (openlifescienceai/medmcqa, 0-based cop), ``demo`` (50 bundled dev
    items) or a path to the original release file (1-based cop). ``prompt_style``: basic | cot."""
    return _baseline("medmcqa", data, split, limit, shuffle_choices, seed, prompt_style)
