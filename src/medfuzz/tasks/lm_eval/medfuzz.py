"""Hooks of the lm-eval tasks ``medfuzz_medqa`` / ``medfuzz_medmcqa``: any lm-eval model on a MedFuzzed
benchmark (metrics ``clean_acc``, ``attacked_acc``, ``flip_rate``).

The fuzzed items come from either

- ``fuzzed``: a fuzzed file written by an earlier attack run (``medfuzz.solvers.medfuzz.store``) or an Inspect
  ``medfuzz_medqa`` log (``.eval``); or
- an attack run here first, against OpenAI-compatible endpoints: ``target_base_url`` + ``target_model``
  (and ``attacker_base_url`` / ``attacker_model``, default the target itself, which is not what the paper
  did and logs a warning), ``api_key``; items from ``data`` /
  ``split`` / ``attack_limit``; every ``MedFuzzConfig`` parameter (``turns``, ``replicates``, ``exemplars``,
  ``controls``, ``seed``, ``pack``, ...) with the Inspect task's names and defaults.
  Results are cached under ``cache_dir`` (default ``~/.cache/medfuzz/attacks``) keyed by every setting, item
  by item, so a rerun (or a resumed one) pays only for items not attacked yet (``retry_errors``: also for
  items that ended in an LLM error, e.g. after an outage).

Options arrive as keyword arguments (``--metadata`` JSON merged with ``--model_args``), each also as
``medfuzz_<name>`` (which wins). ``outcomes`` (default ``success,attack_failed``) picks which attacked
replicates become docs. The benchmark comes from the task's ``dataset_kwargs``.

Each doc is scored on the clean and the fuzzed version in one pass: the choices are the full prompt of each
version followed by each answer letter, after a fixed context. A choice's log-likelihood is then
log p(prompt) + log p(letter | prompt); the first term is shared by the letters of one version, so the argmax
per version is exactly the letter-loglikelihood answer of the ``medqa_clean`` task.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medfuzz.benchmarks import MCQItem, load_items
from medfuzz.benchmarks.prompts import completion_prompt
from medfuzz.options import as_bool
from medfuzz.scorers import stats
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.solvers.medfuzz.results import ItemResult
from medfuzz.solvers.medfuzz.store import ATTACKED, fuzzed_pairs, fuzzed_records, read_fuzzed, read_jsonl
from medfuzz.tasks.lm_eval._docs import dataset, scoped

CONTEXT = "The following are multiple choice questions (with answers) about medicine.\n\n"


def _outcomes(kwargs: dict[str, Any]) -> tuple[str, ...]:
    value = kwargs.get("outcomes", ",".join(ATTACKED))
    return tuple(v.strip() for v in (value.split(",") if isinstance(value, str) else value) if v.strip())


def pair_to_doc(record_id: str, original: MCQItem, fuzzed: MCQItem) -> dict[str, Any]:
    letters = original.letters
    return {
        "id": record_id,
        "item_id": original.id,
        "context": CONTEXT,
        "choices": [f"{completion_prompt(version)} {letter}" for version in (original, fuzzed) for letter in letters],
        "n_options": len(letters),
        "answer_index": original.answer_index,
        "original_question": original.clean_question(),
        "fuzzed_question": fuzzed.clean_question(),
    }


def process_results(doc: dict[str, Any], results: Sequence[tuple[float, bool]]) -> dict[str, Any]:
    """(correct on the clean version, correct on the fuzzed version) for every metric; the aggregations are
    the shared paired statistics of ``medfuzz.scorers.stats``."""
    n = int(doc["n_options"])
    scores = [float(r[0]) for r in results]
    clean = max(range(n), key=lambda i: scores[i])
    fuzzed = max(range(n), key=lambda i: scores[n + i])
    gold = int(doc["answer_index"])
    pair = (clean == gold, fuzzed == gold)
    return {"clean_acc": pair, "attacked_acc": pair, "flip_rate": pair}


def clean_acc(pairs: list[tuple[bool, bool]]) -> float:
    return stats.clean_accuracy(pairs)


def attacked_acc(pairs: list[tuple[bool, bool]]) -> float:
    """Correct on the clean version and still correct once fuzzed."""
    return stats.attacked_accuracy(pairs)


def flip_rate(pairs: list[tuple[bool, bool]]) -> float:
    """Among docs answered correctly clean, the share answered wrongly once fuzzed."""
    return stats.flip_rate(pairs)


def _read_fuzzed(path: Path, outcomes: tuple[str, ...]) -> list[tuple[str, MCQItem, MCQItem]]:
    """A fuzzed JSONL file, or an Inspect ``medfuzz_*`` log (``.eval``/``.json``)."""
    if path.suffix in (".eval", ".json") and path.is_file():
        from medfuzz.tasks.inspect.medfuzz import fuzzed_from_log

        return fuzzed_pairs(fuzzed_from_log(path), path, outcomes)
    return read_fuzzed(path, outcomes)


def medfuzz_docs(task_benchmark: str, **kwargs: Any):
    """Docs pairing each attacked item with its fuzzed version (see the module docstring for the sources)."""
    benchmark = task_benchmark
    kwargs = scoped(kwargs, "medfuzz")
    if kwargs.get("fuzzed"):
        pairs = _read_fuzzed(Path(kwargs["fuzzed"]), _outcomes(kwargs))
    elif kwargs.get("target_base_url"):
        records = fuzzed_records(attack_with_cache(benchmark, **kwargs))
        wanted = _outcomes(kwargs)
        pairs = [(r["id"], MCQItem.from_record(r["original"]), MCQItem.from_record(r["fuzzed"]))
                 for r in records if r["outcome"] in wanted]
    else:
        raise ValueError("medfuzz_medqa needs --metadata with either 'fuzzed' (a fuzzed file or Inspect log) "
                         "or 'target_base_url' and 'target_model' (attack an OpenAI-compatible endpoint first)")
    if not pairs:
        raise ValueError("medfuzz_medqa: no fuzzed items to evaluate (every attack ended as already_wrong or "
                         f"llm_error, or none matched outcomes={_outcomes(kwargs)})")
    return dataset([pair_to_doc(*pair) for pair in pairs])


# ------------------------------------------------------------------------------------- attack first


# options of the attack path that are not MedFuzz parameters (those go to MedFuzzConfig, same names and
# defaults as the Inspect task)
ATTACK_PATH_OPTIONS = ("data", "split", "attack_limit", "target_base_url", "target_model", "attacker_base_url",
                       "attacker_model")


def attack_settings(benchmark: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Everything that determines the attack results (the cache key): items, endpoints, MedFuzz config."""
    target_url = str(kwargs["target_base_url"])
    config = MedFuzzConfig.from_options(ignore_unknown=True, **kwargs)
    return {
        "benchmark": benchmark,
        "data": str(kwargs.get("data", "hf")),
        "split": kwargs.get("split"),
        "attack_limit": int(kwargs["attack_limit"]) if kwargs.get("attack_limit") not in (None, "") else None,
        "target_base_url": target_url,
        "target_model": str(kwargs.get("target_model", "default")),
        "attacker_base_url": str(kwargs.get("attacker_base_url", target_url)),
        "attacker_model": str(kwargs.get("attacker_model", kwargs.get("target_model", "default"))),
        "config": config.to_dict(),
    }


def cache_path(settings: dict[str, Any], cache_dir: str | Path | None = None) -> Path:
    from medfuzz.paths import cache_dir as default_cache

    # the item selection (attack_limit) is not part of the key: results are stored per item, so asking for
    # more items reuses the ones already attacked with the same settings
    keyed = {k: v for k, v in settings.items() if k != "attack_limit"}
    key = hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:16]
    folder = Path(cache_dir) if cache_dir else default_cache() / "attacks"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{settings['benchmark']}-{key}.jsonl"


def attack_with_cache(benchmark: str, **kwargs: Any) -> list[ItemResult]:
    """Attack (or reuse cached attacks on) the selected items; returns results in item order."""
    settings = attack_settings(benchmark, kwargs)
    path = cache_path(settings, kwargs.get("cache_dir"))
    items = load_items(benchmark, settings["data"], settings["split"], settings["attack_limit"])
    done = {r["item"]["id"]: ItemResult.from_dict(r) for r in read_jsonl(path)} if path.is_file() else {}
    if as_bool(kwargs.get("retry_errors", False), "retry_errors"):  # e.g. after an outage: attack LLM-error items again
        done = {k: v for k, v in done.items() if not v.counts()["llm_error"]}
    missing = [item for item in items if item.id not in done]
    if missing:
        for result in asyncio.run(_attack(settings, missing, path, int(kwargs.get("attack_concurrency", 4)),
                                          kwargs.get("api_key"))):
            done[result.item.id] = result
    return [done[item.id] for item in items if item.id in done]


async def _attack(settings: dict[str, Any], items: list[MCQItem], path: Path, concurrency: int,
                  api_key: str | None) -> list[ItemResult]:
    from medfuzz.models.openai_compat import OpenAIChatModel
    from medfuzz.solvers.medfuzz.engine import MedFuzzEngine

    target = OpenAIChatModel(settings["target_model"], settings["target_base_url"], api_key)
    attacker = OpenAIChatModel(settings["attacker_model"], settings["attacker_base_url"], api_key)
    config = MedFuzzConfig(**settings["config"])
    pool = load_items(settings["benchmark"], config.exemplar_data) if config.exemplars else []
    # same endpoint and model: the target attacks itself (not as in the paper; the engine logs a warning)
    same = (settings["attacker_base_url"], settings["attacker_model"]) == (settings["target_base_url"],
                                                                           settings["target_model"])
    engine = MedFuzzEngine(target, attacker, config, config.pack, pool, attacker_is_target=same)
    gate = asyncio.Semaphore(max(1, concurrency))
    results: list[ItemResult] = []

    async def one(item: MCQItem) -> None:
        async with gate:
            result = await engine.run_item(item)
        results.append(result)
        with path.open("a", encoding="utf-8") as handle:  # one line per finished item: resumable
            handle.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")

    await asyncio.gather(*(one(item) for item in items))
    return results
