"""Inspect tasks ``medfuzz/medfuzz_medqa`` and ``medfuzz/medfuzz_medmcqa``.

    inspect eval medfuzz/medfuzz_medqa --model openai/gpt-4o-mini --model-role attacker=openai/gpt-4o \\
        -T data=demo -T turns=5 -T replicates=5 -T controls=30

Without ``--model-role attacker=...`` the target model attacks itself (separate dialogs), as in the paper.
"""

from __future__ import annotations

from inspect_ai import Task, task

from medfuzz.benchmarks import load_items
from medfuzz.scorers.medfuzz import medfuzz_scorer
from medfuzz.solvers.medfuzz import medfuzz_attack
from medfuzz.solvers.medfuzz_engine import MedFuzzConfig
from medfuzz.solvers.medfuzz_prompts import load_pack
from medfuzz.tasks._inspect_data import mcq_dataset


def _medfuzz(benchmark: str, data: str, split: str | None, limit: int | None, exemplar_data: str,
             pack: str, faithfulness: str, alpha: float, shuffle_choices: bool, config: MedFuzzConfig) -> Task:
    resolved = load_pack(pack)
    exemplars = load_items(benchmark, exemplar_data) if config.exemplars > 0 else []
    return Task(
        dataset=mcq_dataset(benchmark, data, split, limit, shuffle_choices, config.seed),
        solver=medfuzz_attack(config, resolved, exemplars),
        scorer=medfuzz_scorer(resolved, faithfulness, alpha),
        metadata={"benchmark": benchmark, "data": data, "split": split, "pack": resolved.name,
                  "pack_source": resolved.source, "exemplar_data": exemplar_data, "faithfulness": faithfulness,
                  "medfuzz": config.to_dict()},
    )


def _config(turns: int, replicates: int, exemplars: int, controls: int, option_orders: int, pvalue_prompt: str,
            max_retries: int, min_kept: float, require_options: bool, require_confidences: bool,
            target_temperature: float | None, attacker_temperature: float | None, seed: int,
            max_tokens_scale: float) -> MedFuzzConfig:
    if pvalue_prompt not in ("dialog", "direct"):
        raise ValueError(f"pvalue_prompt must be 'dialog' or 'direct', not {pvalue_prompt!r}")
    return MedFuzzConfig(turns=turns, replicates=replicates, exemplars=exemplars, controls=controls,
                         option_orders=option_orders, pvalue_prompt=pvalue_prompt, max_retries=max_retries,
                         min_kept=min_kept, require_options=require_options, require_confidences=require_confidences,
                         target_temperature=target_temperature, attacker_temperature=attacker_temperature,
                         seed=seed).scaled_tokens(max_tokens_scale)


@task
def medfuzz_medqa(
    data: str = "hf", split: str = "test", limit: int | None = None, turns: int = 5, replicates: int = 5,
    exemplars: int = 2, exemplar_data: str = "demo", controls: int = 30, option_orders: int = 5,
    pvalue_prompt: str = "dialog", pack: str = "patient_characteristics", faithfulness: str = "lexical",
    alpha: float = 0.05, max_retries: int = 2, min_kept: float = 0.5, require_options: bool = False,
    require_confidences: bool = True, target_temperature: float | None = 1.0,
    attacker_temperature: float | None = 1.0, shuffle_choices: bool = False, seed: int = 0,
    max_tokens_scale: float = 1.0,
) -> Task:
    """MedFuzz on MedQA-USMLE (4 options). ``turns``: K attack attempts; ``replicates`` per item;
    ``controls``: M control fuzzes per successful attack (0: no significance test); ``option_orders``:
    draws averaged per p-hat; ``pack``: bundled assumption pack name or a YAML path; ``faithfulness``:
    lexical | judge (``--model-role judge=...``); ``require_confidences=false`` keeps going when the
    target cannot write 1-5 scores (small models); ``max_tokens_scale`` scales the generation budgets."""
    config = _config(turns, replicates, exemplars, controls, option_orders, pvalue_prompt, max_retries, min_kept,
                     require_options, require_confidences, target_temperature, attacker_temperature, seed,
                     max_tokens_scale)
    return _medfuzz("medqa", data, split, limit, exemplar_data, pack, faithfulness, alpha, shuffle_choices, config)


@task
def medfuzz_medmcqa(
    data: str = "hf", split: str = "validation", limit: int | None = None, turns: int = 5, replicates: int = 5,
    exemplars: int = 2, exemplar_data: str = "demo", controls: int = 30, option_orders: int = 5,
    pvalue_prompt: str = "dialog", pack: str = "patient_characteristics", faithfulness: str = "lexical",
    alpha: float = 0.05, max_retries: int = 2, min_kept: float = 0.5, require_options: bool = False,
    require_confidences: bool = True, target_temperature: float | None = 1.0,
    attacker_temperature: float | None = 1.0, shuffle_choices: bool = False, seed: int = 0,
    max_tokens_scale: float = 1.0,
) -> Task:
    """MedFuzz on MedMCQA (same parameters as ``medfuzz_medqa``)."""
    config = _config(turns, replicates, exemplars, controls, option_orders, pvalue_prompt, max_retries, min_kept,
                     require_options, require_confidences, target_temperature, attacker_temperature, seed,
                     max_tokens_scale)
    return _medfuzz("medmcqa", data, split, limit, exemplar_data, pack, faithfulness, alpha, shuffle_choices,
                    config)
