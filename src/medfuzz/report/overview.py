"""The report's first screen, "Robustness at a glance": one card per target model with the headline numbers of
every method run on it, each with its interval or SE, plus the same numbers as ``summary.json`` and as Hugging
Face ``model-index`` blocks (one model per file), and the results ``medfuzz run``'s summary prints
(``cli.summary``): every surface renders these ``Number``s, computed once here.

Every number comes from the code that computes it elsewhere: MedFuzz's counts from ``scorers.medfuzz.counts``
(the pooled ratios of ``totals``) and its significance counts from ``scorers.medfuzz.significance_family`` (via
``report.medfuzz_logs.summary_of``, the same function the Inspect metrics call) at the run's own α
(``recorded_alpha``); TCES from ``scorers.tces.summarise`` / ``successes_by_budget``; MedGuard's indices, bootstrap
SEs and chance levels from ``scorers.medguard`` (``safety_report`` / ``position_report``, for both harnesses'
MedGuard runs); Wilson intervals from ``medfuzz.stats.proportion`` (the one Wilson helper). lm-eval numbers are
the ones lm-eval reported, with its own standard errors. Each result carries the data it was computed on
(``DataSource``: a Hub id only for items read from that Hub dataset). The methods, their titles, order and
notes come from the method registry (``records.methods``), and so does each method's reader (its spec's
``glance`` or ``glance_runs``: the builtins' are below); a method that names none shows the headline metrics its
task logged (``headline_result``).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import pkgutil
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medfuzz import stats
from medfuzz.errors import MedfuzzError
from medfuzz.records.keys import DATA_SOURCE, METHOD_KEY, method_of
from medfuzz.records.methods import METHODS, Method, by_lm_eval_task
from medfuzz.report.format import number as number_text
from medfuzz.report.labels import label


@dataclass
class Number:
    """One headline number: value with either a Wilson interval (``ci``, from ``k`` of ``n``) or an SE."""

    metric: str  # the metric id (``labels.label`` gives the words)
    value: float
    se: float | None = None
    ci: tuple[float, float] | None = None
    k: int | None = None
    n: int | None = None
    chance: float | None = None
    text: str | None = None  # a count shown as words instead of a proportion (significance)
    headline: bool = False  # drawn in the comparison figure

    def shown(self) -> str:
        if self.text is not None:
            return self.text
        return number_text(self.value, se=self.se, interval=self.ci, k=self.k, n=self.n)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"label": label(self.metric), "value": _plain(self.value)}
        for name in ("se", "k", "n", "chance", "text"):
            if getattr(self, name) is not None:
                out[name] = _plain(getattr(self, name))
        if self.ci is not None:
            out["ci95"] = [_plain(c) for c in self.ci]
        return out


def _plain(value: Any) -> Any:
    """JSON has no NaN: a missing number is ``null``."""
    return None if isinstance(value, float) and math.isnan(value) else value


def share(metric: str, k: int, n: int, headline: bool = False) -> Number:
    """``k`` of ``n`` with its Wilson interval (``stats.proportion``, the one Wilson helper)."""
    found = stats.proportion(k, n)
    return Number(metric, found.value, ci=(found.low, found.high), k=k, n=n, headline=headline)


def count_number(metric: str, value: int | float, text: str | None = None) -> Number:
    """A count shown as words (no interval): ``text`` or the count itself."""
    return Number(metric, float(value), text=text if text is not None else f"{int(value)}")


# MedGuard is not a registered multiple-choice benchmark (``benchmarks.registry``): its build is bundled
MEDGUARD_TITLE = "MedGuard (medfuzz's balanced bundled build of github.com/ncbi-nlp/MedGuard)"
# a ``dataset.type`` that names no Hub dataset starts with this: a colon is never part of a Hub repository id, so
# no reader (or the Hub's own page) takes the bundled demo rows or a user's file for a Hub dataset
NOT_ON_HUB = "medfuzz:"


@dataclass(frozen=True)
class DataSource:
    """The data a result was computed on, as the run recorded it (``benchmarks.registry.DataRecord``, the task
    metadata's ``data_source``): the benchmark, where its items came from (``hf``: the benchmark's Hub dataset;
    ``hub``: another Hub dataset; ``demo``: the rows bundled with medfuzz; ``file``: a user's file, by its name
    only; ``bundled``: MedGuard's bundled build), the split, how many items (Inspect samples) or docs (lm-eval),
    and what the data is called (the benchmark's title for its own release, else the data's name)."""

    benchmark: str  # a registry key | medguard | what the log says
    source: str  # hf | hub | demo | file | bundled | unrecorded
    split: str | None = None
    count: int | None = None
    unit: str = "items"  # items (Inspect samples) | docs (lm-eval)
    file: str | None = None  # a user's file: its name, never its path
    hub_id: str | None = None  # only for items read from the Hugging Face Hub
    title: str | None = None  # what the data is called (``DataRecord.display``)

    @classmethod
    def from_record(cls, record: Mapping[str, Any], count: int | None, unit: str = "items") -> DataSource:
        """From a run's recorded ``DataRecord`` (``record()``: a dict in the task metadata)."""
        return cls(str(record.get("benchmark") or "?"), str(record.get("kind") or "unrecorded"),
                   record.get("split"), count, unit, record.get("file"), record.get("hub_id"),
                   record.get("display") or record.get("name"))

    @classmethod
    def of(cls, benchmark: str, data: Any, split: Any, count: int | None, unit: str = "items",
           data_name: str | None = None) -> DataSource:
        """From a run's ``data`` / ``split`` / ``data_name`` options where its log has no recorded source: the
        record its task would have written (``benchmarks.loaders.describe``, the loaders' own reading of them)."""
        from medfuzz.benchmarks import registry
        from medfuzz.benchmarks.loaders import describe

        if benchmark not in registry.BENCHMARKS:
            return cls(benchmark, "unrecorded", str(split) if split else None, count, unit)
        try:
            record = describe(benchmark, str(data or "hf"), str(split) if split else None, data_name)
        except MedfuzzError:  # options the task itself would have refused (mcq without data): say nothing more
            return cls(benchmark, "unrecorded", str(split) if split else None, count, unit)
        return cls.from_record(record.record(), count, unit)

    @property
    def label(self) -> str:
        """What the data is called: its recorded title, else the registered benchmark's, else its key."""
        if self.title:
            return self.title
        if self.benchmark == "medguard":
            return MEDGUARD_TITLE
        from medfuzz.benchmarks import registry

        known = registry.BENCHMARKS.get(self.benchmark)
        return known.title if known is not None else self.benchmark

    @property
    def name(self) -> str:
        """Words for the model card and the page: the data, where its items came from, split and size."""
        where = {"hf": f"Hugging Face {self.hub_id or 'dataset'}", "hub": f"Hugging Face {self.hub_id or 'dataset'}",
                 "demo": "medfuzz's bundled demo rows", "file": f"user file {self.file}"}.get(self.source, "")
        parts = [where, f"{self.split} split" if self.split else "",
                 "" if self.count is None else f"{self.count} {self.unit}"]
        return " · ".join([self.label, ", ".join(p for p in parts if p)]).rstrip(" ·")

    @property
    def type(self) -> str:
        """``dataset.type`` of the model card: the Hub id where there is one, else a ``NOT_ON_HUB`` name."""
        if self.hub_id:
            return self.hub_id
        return f"{NOT_ON_HUB}{self.benchmark}-{self.source}" + (f":{self.file}" if self.file else "")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"benchmark": self.benchmark, "name": self.label, "source": self.source,
                               "hub_id": self.hub_id, "split": self.split, self.unit: self.count}
        if self.file:
            out["file"] = self.file
        return out

    def model_index(self) -> dict[str, Any]:
        """The model card's ``dataset``: type, name, split (where there is one) and the number of items."""
        out: dict[str, Any] = {"type": self.type, "name": self.name}
        if self.split:
            out["split"] = self.split
        if self.count is not None:
            out["args"] = {self.unit: self.count}
        return out


def inspect_data(log: Any, benchmark: str | None = None) -> DataSource:
    """The data of an Inspect run (``recorded_data``) and its samples."""
    count = len(log.samples) if log.samples else getattr(log.results, "total_samples", None)
    return recorded_data(log.eval.metadata or {}, count, benchmark)


def recorded_data(metadata: Mapping[str, Any], count: int | None, benchmark: str | None = None) -> DataSource:
    """The data an Inspect task's ``metadata`` says it ran on: the ``data_source`` it recorded
    (``tasks.inspect.samples``), else its ``data`` / ``split`` / ``data_name`` (logs written before the record)."""
    if isinstance(metadata.get(DATA_SOURCE), Mapping):
        return DataSource.from_record(metadata[DATA_SOURCE], count)
    from medfuzz.benchmarks.registry import DEFAULT_BENCHMARK

    return DataSource.of(str(benchmark or metadata.get("benchmark") or DEFAULT_BENCHMARK), metadata.get("data"),
                         metadata.get("split"), count, data_name=metadata.get("data_name"))


@dataclass
class MethodResult:
    """One run (or one merged MedGuard model) of one method, as the glance card shows it."""

    method: str  # a ``records.methods`` key
    harness: str  # Inspect | lm-eval
    title: str
    task: str
    dataset: str
    numbers: list[Number]
    sources: list[str]
    alpha: float | None = None
    note: str = ""
    data: DataSource | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "harness": self.harness, "title": self.title, "task": self.task,
                "dataset": self.dataset, "data": self.data.to_dict() if self.data else None, "alpha": self.alpha,
                "note": self.note or None, "sources": self.sources,
                "numbers": {n.metric: n.to_dict() for n in self.numbers}}


@dataclass
class ModelCard:
    model: str
    results: list[MethodResult] = field(default_factory=list)

    def of(self, method: str) -> list[MethodResult]:
        return [r for r in self.results if r.method == method]


# ------------------------------------------------------------------------------------------- reading


BASELINE_SCORER = "baseline_choice"  # medfuzz.tasks.inspect.baselines: the clean baselines' strict scorer


def is_baseline(log: Any) -> bool:
    return log.results is not None and any(s.name == BASELINE_SCORER for s in log.results.scores)


def baseline_result(log: Any, path: Path) -> MethodResult | None:
    """The clean baseline's strict accuracy over answered samples with its Wilson interval (the counts
    ``report.runs.read_inspect_log`` recomputes from the samples), and the lenient accuracy ± its SE."""
    from medfuzz.report.runs import read_inspect_log

    run = read_inspect_log(path)
    if not run.n:
        return None
    numbers = [share("baseline_acc", sum(run.per_item.values()), run.n, headline=True)]
    if run.lenient is not None:
        numbers.append(Number("lenient_accuracy", run.lenient, se=run.lenient_stderr, n=run.n))
    if run.lenient_needed is not None:
        numbers.append(count_number("lenient_needed", run.lenient_needed, f"{run.lenient_needed} of {run.n}"))
    data = inspect_data(log)
    return MethodResult("baseline", "Inspect", f"Clean baseline · {_run_task(log)}", log.eval.task,
                        data.label, numbers, [str(path)], note="strict: the reply's 'ANSWER: X' line; lenient: any "
                                                                "clear naming of one option; LLM errors left out",
                        data=data)


def _run_task(log: Any) -> str:
    """A run's task as its title names it (the data is named beside it: ``DataSource.name``), as lm-eval's are."""
    return str(log.eval.task).split("/")[-1]


def medfuzz_result(log: Any, path: Path) -> MethodResult | None:
    """Clean, post-attack accuracy and ASR with Wilson intervals, and the significant attacks at the run's α."""
    from medfuzz.report.medfuzz_logs import attacks_of, max_turns, score_values
    from medfuzz.scorers.medfuzz import counts

    _, _, _, summary = attacks_of(log, path)
    if summary is None:
        return None
    values = score_values(log)
    found = counts(values, max_turns(values))
    alpha = float(summary["alpha"])
    tested = int(summary.get("tested") or 0)
    untested = int(summary.get("untested") or 0)
    significance = (f"{summary['significant']} of {tested} tested (Holm {summary['significant_holm']}, "
                    f"BH {summary['significant_bh']})" if tested else "none tested (no successful attack had "
                    "enough usable controls)" if untested else "no successful attack to test")
    numbers = [share("medfuzz_clean_acc", *found["clean_accuracy"]),
               share("medfuzz_post_attack_acc", *found["post_attack_accuracy"], headline=True),
               share("medfuzz_post_attack_acc_upper", *found["post_attack_accuracy_upper"]),
               share("medfuzz_asr", *found["attack_success_rate"], headline=True),
               count_number("medfuzz_significant", summary["significant"], significance)]
    if tested:
        numbers.append(count_number("medfuzz_significant_paper", summary["significant_paper"]))
    numbers += [count_number("medfuzz_untested_attacks", untested),
                share("medfuzz_unfaithful_rate", *found["unfaithful_rate"]),
                # replicates that ended as LLM errors are outside every accuracy: a run where most did must say so
                share("medfuzz_llm_error_rate", *found["llm_error_rate"])]
    smallest = summary.get("smallest_p")
    unreachable = isinstance(smallest, float) and smallest == smallest and smallest > alpha
    if isinstance(smallest, float) and smallest == smallest:
        numbers.append(Number("medfuzz_smallest_p", smallest))
    data = inspect_data(log)
    return MethodResult("medfuzz", "Inspect", f"MedFuzz · {_run_task(log)}",
                        log.eval.task, data.label, numbers, [str(path)], alpha=alpha,
                        note="post-attack accuracy over usable replicates (several per item are not independent: "
                             "read the interval as a lower bound on the uncertainty)"
                             + ("; the smallest attainable p-value at this run's M is above α: no attack can be "
                                "significant (the paper's M = 30 reaches 1/31)" if unreachable else ""),
                        data=data)


def tces_result(log: Any, path: Path) -> MethodResult | None:
    from medfuzz.report.tces import read_tces_log
    from medfuzz.scorers.tces import successes_by_budget

    run = read_tces_log(path)
    if run is None:
        return None
    s = run.summary
    hits, attacked = successes_by_budget(run.records, run.budget)
    numbers = [share("tces_clean_acc", s.clean_correct, s.evaluated),
               share("tces_attacked_acc", s.clean_correct - s.successes, s.evaluated),
               share("tces_asr", s.successes, attacked, headline=True)]
    if run.budget > 1 and hits:
        numbers.append(share("tces_asr_at_1", hits[0], attacked))
    numbers.append(Number("tces_gini_simpson", s.gini_simpson, n=s.successes))
    reused = ", ".join(f"{entity} ×{times}" for entity, times in s.top_entities[:3])
    data = recorded_data(run.metadata, run.items)
    return MethodResult("tces", "Inspect", f"TCES · {run.entity} · {run.label} · B={run.budget}",
                        run.task, data.label, numbers, [str(path)],
                        note=f"ASR@{run.budget} among the {attacked} items answered correctly clean; Gini-Simpson "
                             f"over the {s.successes} successful replacements"
                             + (f" (most reused: {reused})" if reused else ""),
                        data=data)


def medguard_results(paths: list[Path]) -> list[tuple[str, MethodResult]]:
    """Per MedGuard model (runs of one model and strategy merged, as ``medfuzz compare`` does): the overall and
    per-principle safety index ± bootstrap SE with the chance level (the mean of its aspects' chance levels,
    as the index is the mean of its aspects)."""
    from medfuzz.report.medguard import load_runs
    from medfuzz.scorers.medguard import aspect_units, position_report, safety_report
    from medfuzz.solvers.medguard.taxonomy import PRINCIPLE_OF

    out = []
    for run in load_runs(paths):
        report = safety_report(aspect_units(run.results.values()))
        chances = {a: p.chance for a, p in position_report(run.results.values()).items() if a in report.aspects}
        numbers = [Number("medguard_overall", report.overall.value, se=report.overall.se, n=report.overall.n,
                          chance=_mean_of(chances, report.aspects), headline=True)]
        for principle, index in report.principles.items():
            members = [a for a in report.aspects if PRINCIPLE_OF[a] is principle]
            numbers.append(Number(f"medguard_{principle.value}", index.value, se=index.se, n=index.n,
                                  chance=_mean_of(chances, members)))
        harness = "lm-eval" if run.harness == "lm-eval" else "Inspect"
        data = (DataSource("medguard", "file", None, len(run.results), file=Path(run.benchmark).name)
                if run.benchmark else DataSource("medguard", "bundled", None, len(run.results)))
        out.append((run.model, MethodResult(
            "medguard", harness, f"MedGuard · {run.strategy} prompts{run.settings_text()}", "medguard",
            "MedGuard (bundled build)", numbers, [str(p) for p in run.sources],
            note=f"{len(report.aspects)} aspects; ± bootstrap SE; n = scoring units", data=data)))
    return out


def _mean_of(chances: dict[Any, float], aspects: Iterable[Any]) -> float:
    """An index's chance level: the unweighted mean of its aspects' chance levels, as the index is of theirs."""
    found = [chances[a] for a in aspects if a in chances]
    return sum(found) / len(found) if found else math.nan


LM_EVAL_TABLE_NOTE = "as lm-eval reported it, ± lm-eval's stderr"  # a result read from lm-eval's table


def lm_eval_results(path: Path, data: dict[str, Any]) -> list[tuple[str, MethodResult]]:
    """The numbers lm-eval reported for each registered method's tasks (``Method.lm_eval_metrics``); a subtask
    whose group reports as the same method and is among the results is left to the group (MedGuard's ten
    aspects, shown by their group)."""
    from medfuzz.report.runs import lm_eval_metric_counts, lm_eval_model_name

    results = data.get("results") or {}
    grouped = {t for group, members in (data.get("group_subtasks") or {}).items() if group in results
               for t in members if by_lm_eval_task(t) is not None and by_lm_eval_task(t) == by_lm_eval_task(group)}
    out = []
    for task, values in sorted(results.items()):
        method = by_lm_eval_task(task)
        if method is None or task in grouped:
            continue
        numbers = []
        counts = lm_eval_metric_counts(path, data, task)  # a nanmean rate's n is its denominator, not every doc
        for metric in method.lm_eval_metrics:
            value = values.get(f"{metric},none")
            if not isinstance(value, int | float):
                continue
            stderr = values.get(f"{metric}_stderr,none")
            numbers.append(Number(metric, float(value), se=float(stderr) if isinstance(stderr, int | float) else None,
                                  n=counts.get(metric), headline=metric in method.lm_eval_headline))
        if numbers:
            out.append((lm_eval_model_name(data), MethodResult(method.key, "lm-eval", f"{method.title} · {task}",
                                                           task, task, numbers, [str(path)],
                                                           note=LM_EVAL_TABLE_NOTE,
                                                           data=lm_eval_data(data, task, method))))
    return out


def lm_eval_data(data: dict[str, Any], task: str, method: Method) -> DataSource:
    """The data of an lm-eval task from the ``--metadata`` its config kept (``data``, ``split``, each also as
    ``<benchmark>_<name>`` and ``<family>_<name>``, which win in that order as the hooks read them:
    ``tasks.lm_eval.hook_options``) and its docs (``n-samples``; a group: its subtasks' docs summed)."""
    members = (data.get("group_subtasks") or {}).get(task) or [task]
    configs = data.get("configs") or {}
    metadata = next((m for t in members for m in [((configs.get(t) or {}).get("metadata"))] if isinstance(m, dict)),
                    {})
    samples = data.get("n-samples") or {}
    docs = [((samples.get(t) or {}).get("effective")) for t in members]
    count = sum(docs) if docs and all(isinstance(d, int) for d in docs) else None
    kwargs = next((k for t in members for k in [((configs.get(t) or {}).get("dataset_kwargs"))]
                   if isinstance(k, dict) and k.get("task_benchmark")), {})
    # the benchmark the task file names (``tasks.lm_eval.task_yaml``); files written before it said so: the name
    from medfuzz.benchmarks.registry import DEFAULT_BENCHMARK, named_in

    benchmark = ("medguard" if method.key == "medguard" else
                 str(kwargs.get("task_benchmark") or named_in(task) or DEFAULT_BENCHMARK))

    def option(name: str) -> Any:
        found = None
        for key in (name, f"{benchmark}_{name}", f"{method.lm_eval_family}_{name}"):
            found = metadata.get(key, found)
        return found

    if benchmark == "medguard":
        file = option("benchmark")
        return DataSource("medguard", "file" if file else "bundled", None, count, "docs",
                          file=Path(str(file)).name if file else None)
    return DataSource.of(benchmark, option("data"), option("split"), count, "docs", data_name=option("data_name"))


def headline_result(log: Any, path: Path, method: Method) -> MethodResult | None:
    """A registered method's first-screen result from its Inspect log alone: each of its ``headline`` metrics as
    the task's scorer reported it, ± the ``<metric>_se`` or ``<metric>_stderr`` metric beside it when there is
    one (what a new method shows before it has a reader of its own)."""
    values = {name: m.value for s in (log.results.scores if log.results else []) for name, m in s.metrics.items()}
    numbers = [Number(metric, float(values[metric]), se=_se_beside(values, metric), headline=True)
               for metric in method.headline if isinstance(values.get(metric), int | float)]
    if not numbers:
        return None
    metadata = log.eval.metadata or {}
    dataset = str(metadata.get("benchmark") or log.eval.dataset.name or "?")
    return MethodResult(method.key, "Inspect", f"{method.title} · {log.eval.task}", log.eval.task, dataset, numbers,
                        [str(path)], note="as the task's scorer reported it", data=inspect_data(log, dataset))


def _se_beside(values: dict[str, Any], metric: str) -> float | None:
    found = next((values[f"{metric}{end}"] for end in ("_se", "_stderr") if f"{metric}{end}" in values), None)
    return float(found) if isinstance(found, int | float) else None


def glance_method(log: Any) -> str:
    """Which reader a finished Inspect log goes to: the clean baseline by its scorer (its tasks record no
    method), else ``method_of``; a task named like a baseline without the baseline's scorer is "other"."""
    if (log.eval.metadata or {}).get(METHOD_KEY) is None and is_baseline(log):
        return "baseline"
    method = method_of(log.eval.metadata, log.eval.task)
    return "other" if method == "baseline" else method


def build(paths: list[Path]) -> list[ModelCard]:
    """One card per target model over every run in ``paths`` (models in order of first appearance)."""
    from medfuzz.report.log_reader import read_log

    cards: dict[str, ModelCard] = {}

    def add(model: str, result: MethodResult | None) -> None:
        if result is not None:
            cards.setdefault(model, ModelCard(model)).results.append(result)

    for path in map(Path, paths):
        if path.name.startswith("results_") and path.suffix == ".json":
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                continue
            for model, result in lm_eval_results(path, data if isinstance(data, dict) else {}):
                add(model, result)
            continue
        try:
            log = read_log(path)
        except Exception:  # not an Inspect log: the index lists it as unreadable
            continue
        if log.status != "success":
            continue  # a failed run has no numbers; its card carries the banner
        spec = METHODS.get(glance_method(log))
        if spec is None or spec.glance_runs is not None:  # not a registered method's, or read with its others
            continue
        if spec.glance is not None:
            add(str(log.eval.model), pkgutil.resolve_name(spec.glance)(log, path))
        else:  # a method with no reader of its own: its headline metrics as the task logs them
            add(str(log.eval.model), headline_result(log, path, spec))
    read_together: dict[str, set[str]] = defaultdict(set)  # method -> the lm-eval files its ``glance_runs`` read
    for spec in (s for s in METHODS.values() if s.glance_runs is not None):
        for model, result in pkgutil.resolve_name(spec.glance_runs)(list(paths)):
            add(model, result)
            if result.harness == "lm-eval":
                read_together[spec.key].update(result.sources)
    for card in cards.values():  # lm-eval's own table row for the same docs would be the same estimate twice
        card.results = [r for r in card.results if not (r.harness == "lm-eval" and r.note == LM_EVAL_TABLE_NOTE
                                                        and set(r.sources) <= read_together[r.method])]
    merged = one_card_per_model(list(cards.values()))
    for card in merged:  # one order whatever the logs' file names (their start times differ from run to run)
        card.results.sort(key=result_order)
    return merged


def result_order(result: MethodResult) -> tuple[int, bool, str, str]:
    """A card's results: by method (the registry's order), Inspect before lm-eval, then title and task."""
    rank = list(METHODS).index(result.method) if result.method in METHODS else len(METHODS)
    return rank, result.harness != "Inspect", result.title, result.task


def one_card_per_model(cards: list[ModelCard]) -> list[ModelCard]:
    """A card that holds lm-eval numbers only, named by the served model (``report.runs.lm_eval_model_name``:
    lm-eval run by hand, without ``medfuzz_model``), joins the one Inspect card whose model it is: the same name,
    or the Inspect name ending in ``/`` + it (``openai-api/vllm/org/m`` serves ``org/m``). Anything else stays
    its own card: two models are never merged on a guess."""
    inspect_names = [c.model for c in cards if any(r.harness == "Inspect" for r in c.results)]
    out: list[ModelCard] = []
    for card in cards:
        if any(r.harness == "Inspect" for r in card.results):
            out.append(card)
            continue
        owners = [n for n in inspect_names if n != card.model and n.endswith(f"/{card.model}")]
        if len(owners) == 1:
            next(c for c in cards if c.model == owners[0]).results.extend(card.results)
        else:
            out.append(card)
    return out


def harness_notes(cards: list[ModelCard]) -> list[str]:
    """The one-line reason for each method the page shows from both harnesses."""
    harnesses: dict[str, set[str]] = defaultdict(set)
    for card in cards:
        for result in card.results:
            harnesses[result.method].add(result.harness)
    return [f"{method.title}: {method.harness_note}" for key, method in METHODS.items() if len(harnesses[key]) > 1]


# ------------------------------------------------------------------------------------------- writing


def _result_html(result: MethodResult) -> str:
    with_chance = any(n.chance is not None for n in result.numbers)  # a chance column only where there is one
    rows = []
    for number in result.numbers:
        chance = number_text(number.chance)
        rows.append(f"<tr><th>{html.escape(label(number.metric))}</th><td class=num>{html.escape(number.shown())}"
                    "</td>" + (f"<td class=num>{chance}</td>" if with_chance else "") + "</tr>")
    alpha = f" · α = {result.alpha:g} (the run's own)" if result.alpha is not None else ""
    chance_head = "<th>chance level</th>" if with_chance else ""
    sources = ", ".join(Path(s).name for s in result.sources)
    return (f"<div class=method><h4>{html.escape(result.title)} <span class=tag>{result.harness}</span></h4>"
            f"<div class=scroll><table><tr><th>number</th><th>value [95 % Wilson] or ± SE (k/n)</th>{chance_head}"
            f"</tr>{''.join(rows)}</table></div>"
            f"<p class=note>{html.escape(result.note)}{html.escape(alpha)} · "
            f"<span title=\"{html.escape('; '.join(result.sources))}\">log: {html.escape(sources)}</span></p></div>")


def card_html(card: ModelCard) -> str:
    body = []
    for method, title in ((key, spec.title) for key, spec in METHODS.items()):  # every registered method
        found = card.of(method)
        if found:
            body += [_result_html(r) for r in found]
        else:
            body.append(f"<div class=method><h4>{title}</h4><p class=note>no {title} run for this model</p></div>")
    return (f"<div class=glance><h3>{html.escape(card.model)}</h3><div class=methods>{''.join(body)}</div></div>")


def figure_png(cards: list[ModelCard]) -> bytes | None:
    """One horizontal bar per model and headline number, grouped by number, coloured by model, with its Wilson
    interval (or ± SE) as the error bar; ``None`` with fewer than two models."""
    if len(cards) < 2:
        return None
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows: list[tuple[str, str, Number]] = []  # (what, model, number), grouped by what
    for card in cards:
        for result in card.results:
            rows += [(f"{result.title} ({result.harness}): {label(n.metric)}", card.model, n)
                     for n in result.numbers if n.headline and not math.isnan(n.value)]
    if not rows:
        return None
    order = list(dict.fromkeys(what for what, _, _ in rows))
    rows.sort(key=lambda r: (order.index(r[0]), [c.model for c in cards].index(r[1])))
    colours = {c.model: f"C{i % 10}" for i, c in enumerate(cards)}
    fig, ax = plt.subplots(figsize=(9, 1.0 + 0.62 * len(rows)))
    for y, (_, model, number) in enumerate(rows):
        low, high = number.ci if number.ci else (number.value - (number.se or 0), number.value + (number.se or 0))
        ax.barh(y, number.value, height=0.7, color=colours[model],
                xerr=[[max(0.0, number.value - low)], [max(0.0, high - number.value)]], capsize=3)
        inside = number.value > 0.08  # else the label goes past the bar and its error bar, not over the axis
        ax.text(0.01 if inside else min(0.93, max(number.value, high) + 0.015), y, f"{number.value:.2f}",
                va="center", ha="left", fontsize=8, color="white" if inside else "black")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([textwrap.fill(f"{what} · {model}", 60) for what, model, _ in rows], fontsize=7.5)
    for y in range(1, len(rows)):  # a rule between groups of the same number
        if rows[y][0] != rows[y - 1][0]:
            ax.axhline(y - 0.5, color="grey", linewidth=0.6)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.02)
    ax.set_xlabel("value (error bars: 95 % Wilson interval; ± SE for MedGuard and lm-eval)", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def section_html(cards: list[ModelCard], problems: list[str]) -> str:
    """The first section: banners for runs that need attention, the cards, the figure, the harness notes."""
    parts = [f"<p class=banner>{html.escape(p)}</p>" for p in problems]
    if not cards:
        parts.append("<p class=note>No MedFuzz, TCES or MedGuard run with numbers among these logs.</p>")
    parts += [card_html(c) for c in cards]
    png = figure_png(cards)
    if png is not None:
        data = base64.b64encode(png).decode("ascii")
        parts.append(f"<figure><img src=\"data:image/png;base64,{data}\" alt=\"models compared\">"
                     "<figcaption>Headline numbers per model, one bar each, grouped by number (read each bar by "
                     "its label: a longer bar is a higher accuracy, attack success rate or safety index)</figcaption>"
                     "</figure>")
    parts += [f"<p class=note><b>Why the harnesses differ</b> · {html.escape(n)}</p>" for n in harness_notes(cards)]
    return "".join(parts)


# ------------------------------------------------------------------------------ summary.json, model-index


SUMMARY = "summary.json"
MODEL_INDEX = "model-index.yaml"
# ``summary.json``'s layout: raise it when a field is renamed, removed or changes meaning (docs/usage.md says what
# each version holds); a reader checks it before reading the rest
SCHEMA_VERSION = 2


def _task_name(method: str) -> str:
    """The task's name in ``model-index.yaml`` (``Method.model_index_task``, else the method's title)."""
    return (METHODS[method].model_index_task or METHODS[method].title) if method in METHODS else method


def summary(cards: list[ModelCard]) -> dict[str, Any]:
    """``summary.json``: every first-screen number of every card as ``Number.to_dict`` writes it (value, ci95,
    k, n, se), each result's data (``DataSource``) and its logs (as the caller names them: ``write_index`` gives
    them relative to the report folder)."""
    return {"schema_version": SCHEMA_VERSION, "format": "medfuzz report summary",
            "models": {c.model: {"results": [r.to_dict() for r in c.results],
                                 "missing": [m.title for key, m in METHODS.items() if not c.of(key)]}
                       for c in cards},
            "harness_notes": harness_notes(cards)}


def task_type(result: MethodResult) -> str:
    """The method and harness (``medfuzz-inspect``, ``medfuzz-lm-eval``): the Hub's reader files results under
    (task type, dataset), so one type for both harnesses would put lm-eval's numbers under Inspect's heading."""
    return f"{result.method}-{result.harness.lower()}"


def _metric_entry(result: MethodResult, number: Number) -> dict[str, Any]:
    """One model-index metric: ``{type, value, name}`` and, in ``args``, what the value is read with (its 95 %
    Wilson interval and k of n, or its standard error and n), as ``summary.json`` holds them."""
    entry: dict[str, Any] = {"type": number.metric, "value": round(number.value, 4),
                             "name": f"{result.title} ({result.harness}): {label(number.metric)}"}
    args: dict[str, Any] = {}
    if number.ci is not None and not any(math.isnan(c) for c in number.ci):
        args["ci95"] = [round(c, 4) for c in number.ci]
    if number.se is not None and not math.isnan(number.se):
        args["stderr"] = round(number.se, 4)
    args.update({name: getattr(number, name) for name in ("k", "n") if getattr(number, name) is not None})
    if args:
        entry["args"] = args
    return entry


def model_index(cards: list[ModelCard]) -> list[dict[str, Any]]:
    """Hugging Face model-card ``model-index`` entries: one per model, one result per run (task: ``task_type``;
    dataset: ``DataSource.model_index``, true to the data the run used), its metrics as ``_metric_entry`` writes
    them (name: the run, its harness and the label, so that two runs of one method, or one method's numbers from
    both harnesses, stay apart in the Hub's flat list; NaN
    values and counts shown as words left out)."""
    entries = []
    for card in cards:
        results = []
        for r in card.results:
            metrics = [_metric_entry(r, n) for n in r.numbers if n.text is None and not math.isnan(n.value)]
            if metrics:
                dataset = (r.data or DataSource(r.dataset or "?", "unrecorded")).model_index()
                results.append({"task": {"type": task_type(r), "name": f"{_task_name(r.method)} ({r.harness})"},
                                "dataset": dataset, "metrics": metrics})
        if results:
            entries.append({"name": card.model, "results": results})
    return entries


def model_index_slug(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_") or "model"


def model_index_files(cards: list[ModelCard]) -> dict[str, list[dict[str, Any]]]:
    """File name -> its ``model-index``: one model per file, as a Hub model card holds one model (its parser
    names every result after the last entry, so several models in one block read as one): ``model-index.yaml``
    for a report of one model, else ``model-index.<model>.yaml`` each."""
    entries = model_index(cards)
    if len(entries) == 1:
        return {MODEL_INDEX: entries}
    return {f"model-index.{model_index_slug(entry['name'])}.yaml": [entry] for entry in entries}


def write_files(cards: list[ModelCard], out_dir: Path) -> list[Path]:
    """``summary.json`` and the model-index file(s); ``cards`` as the page shows them (``write_index`` passes its
    sources relative to ``out_dir``, never absolute)."""
    import yaml

    data = out_dir / SUMMARY
    data.write_text(json.dumps(summary(cards), indent=1, allow_nan=False), encoding="utf-8")
    written = [data]
    for name, entries in model_index_files(cards).items():
        path = out_dir / name
        path.write_text("# paste under the YAML front matter of a Hugging Face model card (README.md) of this model\n"
                        + yaml.safe_dump({"model-index": entries}, sort_keys=False, allow_unicode=True),
                        encoding="utf-8")
        written.append(path)
    return written


def problem_counts(reasons: list[str]) -> str:
    """The most common of the reasons samples failed, with its count."""
    reason, count = Counter(reasons).most_common(1)[0]
    return f"{reason} ({count} of {len(reasons)})"
