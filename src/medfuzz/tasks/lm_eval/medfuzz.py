"""Hooks of the lm-eval tasks ``medfuzz_<benchmark>`` (``medfuzz_medqa``, ``medfuzz_medmcqa``, ``medfuzz_mcq`` for
your own data: every benchmark of ``benchmarks.registry``): any lm-eval model on a MedFuzzed benchmark (metrics
``clean_acc``, ``attacked_acc``, ``flip_rate``, each with lm-eval's standard error, and ``llm_errors`` /
``llm_error_rate``).

The fuzzed items come from either

- ``fuzzed``: a fuzzed file written by an earlier attack run (``medfuzz.solvers.medfuzz.store``) or an Inspect
  ``medfuzz_medqa`` log (``.eval``); or
- an attack run here first, against OpenAI-compatible endpoints: ``target_base_url`` + ``target_model``
  (and ``attacker_base_url`` / ``attacker_model``, default the target itself, which is not what the paper
  did and logs a warning), ``api_key_env`` (the *name* of the
  environment variable holding the key, default ``OPENAI_API_KEY``; a raw ``api_key`` is refused, because
  lm-eval writes its metadata into the results file); items from ``data`` / ``split`` / ``columns`` /
  ``attack_limit``; every
  ``MedFuzzConfig`` parameter (``turns``, ``replicates``, ``exemplars``, ``controls``, ``seed``, ``pack``, ...)
  with the Inspect task's names and defaults.
  Finished items are cached under ``cache_dir`` (default ``$MEDFUZZ_CACHE/attacks``) keyed by every setting,
  one JSON line per item, so a rerun (or a resumed one) attacks only the items not finished yet. An item with
  an LLM error is not stored (an outage or a wrong key is not a fact about the item): the next run attacks it
  again, and every model call it had completed comes from the call cache (``medfuzz.models.call_cache``), so
  no completed call is paid twice (those in flight when it stopped are). Every item, replicate and control is
  in flight at once; ``attack_concurrency``
  (default 16) caps the model calls in flight per endpoint; ``call_timeout`` (seconds per attempt, default 20)
  and ``call_retries`` (default 2) set the client's deadline and retries of timed-out, dropped, 429 and 5xx
  calls. A torn last line (the process was killed while writing it) is dropped and logged.

Options arrive as keyword arguments (``--metadata`` JSON merged with ``--model_args``), each also as
``medfuzz_<name>`` or ``<benchmark>_<name>`` (the family prefix wins); an unknown name stops the run
(``medfuzz.tasks.lm_eval.hook_options``). The benchmark comes from the task's ``dataset_kwargs``.

Every replicate the source holds is one doc (the attack path and an Inspect log hold every replicate; a fuzzed
file holds those with a tried question). ``outcomes`` (default ``success,attack_failed``) picks the replicates
that are scored; the others (``already_wrong``, ``llm_error``, ...) are counted-only docs with one short
request, so a replicate that ended as an LLM error is counted (``llm_errors``, ``llm_error_rate``: over every
replicate, as Inspect's ``medfuzz_llm_error_rate``) and logged, never silently left out.

Each doc is scored on the clean and the fuzzed version in one pass: the choices are the full prompt of each
version followed by each answer letter, after a fixed context. A choice's log-likelihood is then
log p(prompt) + log p(letter | prompt); the first term is shared by the letters of one version, so the argmax
per version is exactly the letter-loglikelihood answer of the ``medqa_clean`` task.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medfuzz.benchmarks import MCQItem
from medfuzz.benchmarks.prompts import completion_prompt
from medfuzz.benchmarks.selection import DataSelection
from medfuzz.errors import DataError
from medfuzz.models.openai_compat import DEFAULT_MAX_CONNECTIONS, DEFAULT_RETRIES, DEFAULT_TIMEOUT
from medfuzz.options import ConfigError, as_bool, check
from medfuzz.records.keys import TRANSCRIPT_FIELDS
from medfuzz.records.lm_eval_docs import versions_correct
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.solvers.medfuzz.results import ItemResult
from medfuzz.solvers.medfuzz.store import ATTACKED, fuzzed_pairs, read_jsonl
from medfuzz.tasks.lm_eval.hook_options import read_options
from medfuzz.tasks.lm_eval.item_docs import dataset, selection

log = logging.getLogger(__name__)

CONTEXT = "The following are multiple choice questions (with answers) about medicine.\n\n"


UNSCORED_CHOICE = " -"  # the one (cheap) request of a doc that only counts (an LLM error, an outcome not asked for)
LLM_ERROR = "llm_error"


def _outcomes(kwargs: dict[str, Any]) -> tuple[str, ...]:
    value = kwargs.get("outcomes", ",".join(ATTACKED))
    return tuple(v.strip() for v in (value.split(",") if isinstance(value, str) else value) if v.strip())


def pair_to_doc(record_id: str, original: MCQItem, fuzzed: MCQItem, outcome: str = "success") -> dict[str, Any]:
    """A scored doc: the clean and the fuzzed version of one replicate, each followed by every letter."""
    letters = original.letters
    return {
        "id": record_id,
        "item_id": original.id,
        "outcome": outcome,
        "scored": True,
        "context": CONTEXT,
        "choices": [f"{completion_prompt(version)} {letter}" for version in (original, fuzzed) for letter in letters],
        "n_options": len(letters),
        "answer_index": original.answer_index,
        "original_question": original.clean_question(),
        "fuzzed_question": fuzzed.clean_question(),
    }


def unscored_doc(record_id: str, original: MCQItem, outcome: str, fuzzed_question: str | None) -> dict[str, Any]:
    """A doc that is counted, not scored: a replicate that ended as an LLM error (or with an outcome not in
    ``outcomes``). lm-eval asks one short request for it; it returns no accuracy (outside their denominators)."""
    return {"id": record_id, "item_id": original.id, "outcome": outcome, "scored": False, "context": CONTEXT,
            "choices": [UNSCORED_CHOICE], "n_options": 0, "answer_index": 0,
            "original_question": original.clean_question(), "fuzzed_question": fuzzed_question or ""}


def process_results(doc: dict[str, Any], results: Sequence[tuple[float, bool]]) -> dict[str, float]:
    """Per-doc values that lm-eval's own ``mean`` aggregates, each returned only by the docs in its denominator
    (lm-eval 0.4.13 aggregates a metric over the docs that return it, so it reports each one's closed-form
    standard error, sd / sqrt(n) over those docs): ``clean_acc`` c and ``attacked_acc`` c and a on the scored
    docs, ``flip_rate`` not a on the scored docs answered correctly clean. Their means equal
    ``medfuzz.stats.clean_accuracy`` / ``attacked_accuracy`` / ``flip_rate`` over the scored pairs.
    ``llm_error_rate`` / ``llm_errors``: 1 for a replicate that ended as an LLM error, on every doc."""
    error = float(doc["outcome"] == LLM_ERROR)
    values = {"llm_error_rate": error, "llm_errors": error}
    if not doc["scored"]:
        return values
    clean, fuzzed = versions_correct(doc, results)
    values.update(clean_acc=float(clean), attacked_acc=float(clean and fuzzed))
    if clean:
        values["flip_rate"] = float(not fuzzed)
    return values


def count(values: list[float]) -> float:
    """How many docs have the property (an exact count of this run, so lm-eval reports no standard error for
    it; the rate beside it has one)."""
    return float(sum(values))


def _replicate_docs(results: Sequence[ItemResult], wanted: tuple[str, ...]) -> list[dict[str, Any]]:
    """One doc per replicate of every item: scored when its outcome is wanted and it has a fuzzed question."""
    docs = []
    for result in results:
        for replicate in result.replicates:
            record_id = f"{result.item.id}#r{replicate.replicate}"
            outcome, question = replicate.outcome.value, replicate.fuzzed_question
            if outcome in wanted and question is not None:
                docs.append(pair_to_doc(record_id, result.item, result.item.with_question(question), outcome))
            else:
                docs.append(unscored_doc(record_id, result.item, outcome, question))
    return docs


def _file_docs(path: Path, wanted: tuple[str, ...]) -> list[dict[str, Any]]:
    """One doc per record of a fuzzed file (which holds only replicates with a tried question)."""
    if not path.is_file():
        raise DataError(path, None, None, "fuzzed file not found")
    records = read_jsonl(path)
    pairs = iter(fuzzed_pairs(records, path, wanted))  # validated (same options and key), in file order
    docs = []
    for row, record in enumerate(records, start=1):
        if record.get("outcome") in wanted:
            docs.append(pair_to_doc(*next(pairs), outcome=str(record["outcome"])))
            continue
        try:
            original = MCQItem.from_record(record["original"])
        except (KeyError, ValueError, TypeError) as err:
            raise DataError(path, row, "original", f"not an item record ({err})") from None
        fuzzed = (record.get("fuzzed") or {}).get("question")
        docs.append(unscored_doc(str(record.get("id", original.id)), original, str(record.get("outcome")), fuzzed))
    return docs


def _log_results(path: Path, benchmark: str) -> list[ItemResult]:
    """Every item result of an Inspect ``medfuzz_*`` log (the scorer's metadata holds every replicate, those
    without a fuzzed question too). A log of another benchmark's run is refused: the ``medfuzz`` tag runs
    ``medfuzz_medqa`` and ``medfuzz_medmcqa`` with one ``--metadata``, and a MedQA log scored as MedMCQA would be
    a number under the wrong name (aim each log with ``medqa_fuzzed`` / ``medmcqa_fuzzed``)."""
    from inspect_ai.log import read_eval_log

    recorded = (read_eval_log(str(path), header_only=True).eval.metadata or {}).get("benchmark")
    if recorded is not None and recorded != benchmark:
        raise ConfigError(f"medfuzz_{benchmark}: fuzzed={path} is a run on {recorded}, not {benchmark}; give each "
                          f"task its own log: --metadata '{{\"{recorded}_fuzzed\": \"{path}\", "
                          f"\"{benchmark}_fuzzed\": \"...\"}}' (or run medfuzz_{recorded} only)")
    results = []
    # the records are in the score metadata: the transcripts (most of a sample at scale) are not read
    for sample in read_eval_log(str(path), exclude_fields=set(TRANSCRIPT_FIELDS)).samples or []:
        score = (sample.scores or {}).get("medfuzz_scorer")
        if score is not None and score.metadata:
            results.append(ItemResult.from_dict({"item": score.metadata["item"],
                                                 "replicates": score.metadata["replicates"],
                                                 "config": score.metadata.get("config", {})}))
    return results


def medfuzz_docs(task_benchmark: str, **kwargs: Any):
    """One doc per replicate the source holds (see the module docstring for the sources): scored pairs for the
    wanted outcomes, counted-only docs for the rest (LLM errors among them)."""
    benchmark = task_benchmark
    kwargs = read_options(kwargs, "medfuzz", task=f"medfuzz_{benchmark}", benchmark=benchmark)
    wanted = _outcomes(kwargs)
    if kwargs.get("fuzzed"):
        path = Path(kwargs["fuzzed"])
        if path.suffix in (".eval", ".json") and path.is_file():
            docs = _replicate_docs(_log_results(path, benchmark), wanted)
        else:
            docs = _file_docs(path, wanted)
    elif kwargs.get("target_base_url"):
        docs = _replicate_docs(attack_with_cache(benchmark, **kwargs), wanted)
    else:
        raise ValueError(f"medfuzz_{benchmark} needs --metadata with either 'fuzzed' (a fuzzed file or Inspect log) "
                         "or 'target_base_url' and 'target_model' (attack an OpenAI-compatible endpoint first)")
    outcomes = Counter(doc["outcome"] for doc in docs)
    scored = sum(doc["scored"] for doc in docs)
    summary = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
    if not scored:
        raise ValueError(f"medfuzz_{benchmark}: no fuzzed items to evaluate ({len(docs)} replicates: "
                         f"{summary or 'none'}; none matched outcomes={wanted} with a fuzzed question)")
    if outcomes[LLM_ERROR]:
        log.warning("medfuzz_%s: %d of %d replicates ended as LLM errors after the retries: counted in "
                    "llm_errors / llm_error_rate, outside clean_acc, attacked_acc and flip_rate", benchmark,
                    outcomes[LLM_ERROR], len(docs))
    log.info("medfuzz_%s: %d replicates (%s), %d scored (outcomes=%s)", benchmark, len(docs), summary, scored,
             ",".join(wanted))
    return dataset(docs)


# ------------------------------------------------------------------------------------- attack first


# the names this hook reads beside MedFuzz's parameters are listed once, in the method registry
# (``records.methods``: MedFuzz's ``lm_eval_options``), which ``read_options`` checks them against;
# tests/core/test_lm_eval_option_lists.py ties that list to the names read here
DEFAULT_KEY_ENV = "OPENAI_API_KEY"


def api_key(kwargs: dict[str, Any]) -> str | None:
    """The endpoint's API key, from the environment variable named by ``api_key_env`` (never from metadata:
    lm-eval writes ``--metadata`` and ``--model_args`` verbatim into its results file, so ``read_options``
    refuses ``api_key`` and every other secret name there)."""
    name = str(kwargs.get("api_key_env") or DEFAULT_KEY_ENV)
    value = os.environ.get(name)
    if kwargs.get("api_key_env") and not value:
        raise ConfigError(f"medfuzz: api_key_env={name!r} names an environment variable that is not set")
    return value


def read_attack_cache(path: Path) -> list[dict[str, Any]]:
    """The cached item results. A last line cut short by a kill is dropped (and cut off the file, so the next
    append starts a fresh line), with a warning; a bad line elsewhere is a ``DataError`` naming it."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    records: list[dict[str, Any]] = []
    for row, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as err:
            if row == len(lines):  # the unterminated last line: a torn write
                log.warning("%s, row %d: dropped a torn last record (%s); its item will be attacked again",
                            path, row, err.msg)
                with path.open("r+", encoding="utf-8") as handle:
                    handle.truncate(len(text.encode("utf-8")) - len(line.encode("utf-8")))
                break
            raise DataError(path, row, None, f"is not valid JSON ({err.msg})") from None
    return records


def attack_settings(benchmark: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Everything that determines the attack results (the cache key): items, endpoints, MedFuzz config."""
    target_url = str(kwargs["target_base_url"])
    config = MedFuzzConfig.from_options(ignore_unknown=True, **kwargs)
    # the items: ``DataSelection`` (``attack_limit`` is its ``limit`` here: ``limit`` would read as lm-eval's own)
    chosen = selection({**{k: kwargs[k] for k in ("data", "split", "columns", "data_name") if k in kwargs},
                        "limit": kwargs.get("attack_limit")})
    return {
        "benchmark": benchmark,
        "data": chosen.data,
        "split": chosen.split,
        **({"columns": chosen.columns} if chosen.columns else {}),  # absent when none: earlier caches stay valid
        "attack_limit": chosen.limit,
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
    kwargs = read_options(kwargs, "medfuzz", task=f"medfuzz_{benchmark}", benchmark=benchmark)
    key = api_key(kwargs)
    settings = attack_settings(benchmark, kwargs)
    path = cache_path(settings, kwargs.get("cache_dir"))
    chosen = DataSelection(settings["data"], settings["split"], settings["attack_limit"],
                           columns=settings.get("columns"), data_name=kwargs.get("data_name"))
    items = chosen.items(benchmark, 0)
    done = {r["item"]["id"]: ItemResult.from_dict(r) for r in read_attack_cache(path)} if path.is_file() else {}
    if as_bool(kwargs.get("retry_errors", False), "retry_errors"):  # e.g. after an outage: attack LLM-error items again
        done = {k: v for k, v in done.items() if not v.counts()["llm_error"]}
    missing = [item for item in items if item.id not in done]
    if missing:
        config = MedFuzzConfig(**settings["config"])
        pool = chosen.pool(benchmark, config.exemplar_data) if config.exemplars else []
        for result in asyncio.run(_attack(settings, missing, path, transport_options(kwargs), key, pool)):
            done[result.item.id] = result
    return [done[item.id] for item in items if item.id in done]


def transport_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """How the attack path's client talks to the endpoints (not part of the cache key: it changes whether a call
    fails, never what a completed call returned): ``attack_concurrency`` calls in flight per endpoint,
    ``call_timeout`` seconds per attempt and ``call_retries`` retries of a timed-out, dropped, 429 or 5xx call
    (defaults: ``medfuzz.models.openai_compat``'s ``DEFAULT_MAX_CONNECTIONS``, ``DEFAULT_TIMEOUT``,
    ``DEFAULT_RETRIES``)."""
    concurrency = _number(kwargs, "attack_concurrency", int, DEFAULT_MAX_CONNECTIONS)
    check(concurrency >= 1, f"attack_concurrency must be at least 1, got {concurrency}")
    timeout = _number(kwargs, "call_timeout", float, DEFAULT_TIMEOUT)
    check(timeout > 0, f"call_timeout must be positive (seconds per attempt), got {timeout}")
    retries = _number(kwargs, "call_retries", int, DEFAULT_RETRIES)
    check(retries >= 0, f"call_retries must be 0 or more, got {retries}")
    return {"max_connections": concurrency, "timeout": timeout, "max_retries": retries}


def _number(kwargs: dict[str, Any], name: str, kind: type, default: Any) -> Any:
    value = kwargs.get(name)
    if value in (None, ""):
        return default
    try:
        number = float(value)
        if kind is int and not number.is_integer():
            raise ValueError
        return kind(number)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={value!r} is not {'an integer' if kind is int else 'a number'}") from None


async def _attack(settings: dict[str, Any], items: list[MCQItem], path: Path, transport: dict[str, Any],
                  key: str | None, exemplar_pool: list[MCQItem]) -> list[ItemResult]:
    from medfuzz.models.call_cache import cached
    from medfuzz.models.openai_compat import OpenAIChatModel
    from medfuzz.solvers.medfuzz.engine import MedFuzzEngine

    # every call behind the call cache: a resumed run re-pays none of the calls that had completed; at most
    # ``concurrency`` calls in flight per endpoint (the adapter's semaphore, shared when both are one server)
    target = cached(OpenAIChatModel(settings["target_model"], settings["target_base_url"], key, **transport))
    attacker = cached(OpenAIChatModel(settings["attacker_model"], settings["attacker_base_url"], key, **transport))
    config = MedFuzzConfig(**settings["config"])
    pool = exemplar_pool if config.exemplars else []
    # same endpoint and model: the target attacks itself (not as in the paper; the engine logs a warning)
    same = (settings["attacker_base_url"], settings["attacker_model"]) == (settings["target_base_url"],
                                                                           settings["target_model"])
    engine = MedFuzzEngine(target, attacker, config, config.pack, pool, attacker_is_target=same)
    results: list[ItemResult] = []

    async def one(item: MCQItem) -> None:
        # every item in flight at once: the only limit is the endpoint's, on model calls (no per-item barrier)
        result = await engine.run_item(item)
        results.append(result)
        if result.counts()["llm_error"]:  # not a fact about the item: attacked again next time (calls cached)
            return
        with path.open("a", encoding="utf-8") as handle:  # one line per finished item: resumable
            handle.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")

    await asyncio.gather(*(one(item) for item in items))
    return results
