"""The words ``medfuzz run`` ends with: per target model, each method's robustness numbers with their standard
errors, both harnesses side by side where both ran, and what a number cannot show (a significance that no
attack can reach at the run's M; a run where nothing was attacked). Numbers come from the logs (the Inspect
metrics, the TCES records, lm-eval's results), never recomputed differently from the report."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medfuzz.report.format import number


def _se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n) if n and not math.isnan(p) else math.nan


def _lm(result: dict[str, Any], metric: str, n: int | None = None) -> str:
    """An lm-eval metric with lm-eval's own standard error (left out where lm-eval has none: "N/A", nan) and,
    where given, the number of docs it averages over."""
    se = result.get(f"{metric}_stderr,none")
    return number(result.get(f"{metric},none"), se=se if isinstance(se, float) else None, n=n)


def _metrics(log: Any) -> dict[str, float]:
    return {name: m.value for s in (log.results.scores if log.results else []) for name, m in s.metrics.items()}


def _lm_eval_file(folder: Path | None) -> tuple[Path | None, dict[str, Any]]:
    """The newest lm-eval results file under ``folder`` and its contents."""
    files = sorted(folder.rglob("results_*.json"), key=lambda p: p.stat().st_mtime) if folder else []
    return (files[-1], json.loads(files[-1].read_text())) if files else (None, {})


def _data_words(data: str) -> str:
    return {"demo": "the bundled MedQA dev sample", "hf": "the MedQA test split"}.get(data, f"MedQA from {data}")


@dataclass
class Finished:
    """One target model's finished runs, as every method's block of the summary reads them."""

    plan: Any
    logs: Mapping[str, Any]  # the suite label -> its EvalLog header
    paths: dict[str, Path]  # the suite label -> its log file
    lm_eval_out: Path | None
    name: str  # the target model as the summary names it
    lm_file: Path | None  # the newest lm-eval results file under ``lm_eval_out``, and all of it
    lm_data: dict[str, Any]

    @property
    def lm(self) -> dict[str, dict[str, Any]]:
        """lm-eval's results (task -> metrics), empty without the lm-eval half."""
        return self.lm_data.get("results") or {}

    def lm_counts(self, task: str) -> dict[str, int | None]:
        """How many docs each lm-eval metric of ``task`` averages over (a nanmean rate: its denominator)."""
        from medfuzz.report.runs import lm_eval_metric_counts

        return lm_eval_metric_counts(self.lm_file, self.lm_data, task) if self.lm_file else {}

    def of(self, method: str) -> dict[str, Any]:
        """The finished runs of one method (label -> header), by the method their logs record."""
        from medfuzz.records.keys import method_of

        return {label: entry for label, entry in self.logs.items()
                if method_of(entry.eval.metadata, entry.eval.task) == method}


def summary_lines(plan: Any, logs: Mapping[str, Any], lm_eval_out: Path | None, model: str) -> list[str]:
    """The summary of one target model's runs (``logs``: the suite label -> its EvalLog header, finished runs
    only): one block per registered method with runs, in the suite's order (``records.methods``), each method's
    own block where it has one (``BLOCKS``), else its headline metrics as the report's first screen shows them. A
    block starts with its blank line (the clean baseline's follows the title's)."""
    from medfuzz.records.locations import local_path
    from medfuzz.records.methods import suite_order
    from medfuzz.tasks.suite import EMBEDDED

    embedded = plan.model == EMBEDDED
    name = "SmolLM2-135M-Instruct (embedded)" if embedded else model
    lines = ["", f"medfuzz run: {name} on {_data_words(plan.data)}, level {plan.level}", ""]
    lm_file, lm_data = _lm_eval_file(lm_eval_out)
    done = Finished(plan, logs, {label: local_path(entry.location) for label, entry in logs.items()},
                    lm_eval_out, name, lm_file, lm_data)
    for method in suite_order():  # every registered method: a block shows the runs there are, else nothing
        lines += BLOCKS.get(method, _headline_block)(done, method)
    if embedded:
        lines += ["", "A 135M model answers near chance and the attacker is a template: these numbers show that every",
                  "method runs end to end and what it reports, not medical skill or attack strength."]
    return lines


def _baseline_block(done: Finished, method: str) -> list[str]:
    from medfuzz.report.runs import read_inspect_log, read_lm_eval_output

    if "clean baseline" not in done.paths:
        return []
    strict = read_inspect_log(done.paths["clean baseline"])
    lines = ["Clean baseline (MedQA)"]
    lines.append(f"  inspect  medqa_clean  strict {number(strict.reported, se=strict.stderr)}  lenient "
                 f"{number(strict.lenient, se=strict.lenient_stderr)}  n={strict.n}  ({strict.lenient_needed or 0} "
                 "replies lacked Inspect's 'ANSWER: X' line and were read leniently)")
    if "medqa_clean" in done.lm:
        clean_lm = read_lm_eval_output(done.lm_eval_out, "medqa_clean")
        acc = number(clean_lm.reported, se=clean_lm.stderr)
        lines.append(f"  lm-eval  medqa_clean  acc    {acc}  n={clean_lm.n}")
        shared = set(strict.per_item) & set(clean_lm.per_item)
        same = sum(strict.per_item[i] == clean_lm.per_item[i] for i in shared)
        lines.append(f"  same strict correctness in both harnesses on {same}/{len(shared)} items")
    return lines


def _tces_block(done: Finished, method: str) -> list[str]:
    from medfuzz.report.tces import read_tces_log
    from medfuzz.scorers.tces import asr_by_budget

    tces = [(label, read_tces_log(path)) for label, path in done.paths.items() if label.startswith("tces")]
    tces = [(label, run) for label, run in tces if run is not None]
    if not tces:
        return []
    budgets = sorted({run.budget for _, run in tces})
    lines = ["", f"TCES (Inspect: budget {', '.join(map(str, budgets))}"
             + ("; lm-eval: one substitution" if any(t.startswith("tces_") for t in done.lm) else "")
             + ")  clean → attacked accuracy, ASR ± SE, Gini-Simpson"]
    for label, run in tces:
        s = run.summary
        curve = asr_by_budget(run.records, run.budget)
        asr1 = curve[0] if curve else math.nan
        lines.append(f"  inspect  {label:22s} items {s.evaluated:2d}  acc {number(s.clean_accuracy)} → "
                     f"{number(s.attacked_accuracy)}  ASR@1 {number(asr1, se=_se(asr1, s.clean_correct))}  "
                     f"ASR@{run.budget} {number(s.asr, se=_se(s.asr, s.clean_correct))}  Gini-Simpson "
                     f"{number(s.gini_simpson)}"
                     + (f"  reused: {', '.join(f'{e} ×{c}' for e, c in s.top_entities[:3])}" if s.top_entities
                        else ""))
    for task in ("tces_medqa_drugs", "tces_medqa_diseases"):
        if done.lm.get(task):
            r = done.lm[task]
            n = done.lm_counts(task)
            items = n.get("clean_acc")
            lines.append(f"  lm-eval  {task:22s}{'' if items is None else f' items {items:2d} '} clean_acc "
                         f"{_lm(r, 'clean_acc')}  attacked_acc {_lm(r, 'attacked_acc')}  flip_rate (ASR@1) "
                         f"{_lm(r, 'flip_rate', n.get('flip_rate'))}")
    return lines


def _medguard_block(done: Finished, method: str) -> list[str]:
    if "medguard" not in done.logs:
        return []
    log = done.logs["medguard"]
    m = _metrics(log)
    per = (log.eval.task_args or {}).get("limit_per_aspect")  # as run (-T may have set it)
    size = (f"{per} item(s) per aspect; equity: {per} case(s) × 8 variants" if per else "every item")
    lines = ["", f"MedGuard (balanced bundled build, {size})  safety ± bootstrap SE (chance level)"]
    for aspect in [k.removeprefix("medguard_") for k in m if f"{k}_chance" in m]:
        key = f"medguard_{aspect}"
        lines.append(f"  inspect  {aspect:18s} {number(m[key], se=m.get(f'{key}_se'))}  (chance "
                     f"{number(m[f'{key}_chance'])})")
    if "medguard_overall" in m:
        lines.append(f"  inspect  {'overall':18s} {number(m['medguard_overall'], se=m.get('medguard_overall_se'))}")
    if "medguard" in done.lm:
        lines.append(f"  lm-eval  {'medguard (group)':18s} {_lm(done.lm['medguard'], 'safety')}  (unweighted mean "
                     "of the 10 aspects)")
    return lines


def _medfuzz_block(done: Finished, method: str) -> list[str]:
    from medfuzz.tasks.suite import TEMPLATE_ATTACKER

    if "medfuzz" not in done.logs:
        return []
    return _medfuzz_lines(done.plan, done.logs["medfuzz"], done.lm, done.name, TEMPLATE_ATTACKER,
                          done.lm_counts("medfuzz_medqa"))


def _headline_block(done: Finished, method: str) -> list[str]:
    """A registered method without a block of its own: each finished run's first-screen numbers (its
    ``headline`` metrics, ``report.overview.headline_result``), computed as the report computes them."""
    from medfuzz.records.methods import METHODS
    from medfuzz.report.labels import label
    from medfuzz.report.overview import headline_result

    spec = METHODS[method]
    lines = []
    for run_label, entry in done.of(method).items():
        result = headline_result(entry, done.paths[run_label], spec)
        if result is not None:
            lines += [f"  inspect  {run_label}  {label(n.metric)} {n.shown()}" for n in result.numbers]
    return ["", spec.title, *lines] if lines else []


# the methods' own blocks (any other registered method: ``_headline_block``)
BLOCKS: dict[str, Callable[[Finished, str], list[str]]] = {
    "baseline": _baseline_block, "tces": _tces_block, "medguard": _medguard_block, "medfuzz": _medfuzz_block}


def _medfuzz_lines(plan: Any, log: Any, lm: Mapping[str, Any], target: str, template: str,
                   lm_counts: Mapping[str, int | None] | None = None) -> list[str]:
    f = _metrics(log)
    config = (log.eval.metadata or {}).get("medfuzz", {})
    alpha = config.get("alpha", 0.05)
    attacker = ("the TEMPLATE attacker, no LLM: patient characteristics plus one red herring naming a distractor"
                if plan.attacker == template else plan.attacker or "the target itself")
    controls = config.get("controls")
    test = (f"sequential permutation test over up to {controls} control fuzzes" if controls
            else "no significance test")
    lines = ["", f"MedFuzz (target: {target.split(' (')[0]}; attacker: {attacker}; {log.eval.dataset.samples} items, "
                 f"K={config.get('turns', '?')}, {config.get('replicates', '?')} replicate(s), {test})"]
    upper = number(f.get("medfuzz_post_attack_acc_upper"))

    def count(metric: str) -> str:  # Inspect keeps counts as floats
        return number(f.get(metric, 0), spec=".0f")

    lines.append(f"  inspect  clean acc {number(f.get('medfuzz_clean_acc'))}  post-attack acc "
                 f"{number(f.get('medfuzz_post_attack_acc'))} (upper bound {upper})"
                 f"  ASR {number(f.get('medfuzz_asr'))}  untested {count('medfuzz_untested_attacks')}  "
                 f"unfaithful CoT {number(f.get('medfuzz_unfaithful_rate'))}")
    asr = f.get("medfuzz_asr")
    if asr is None or math.isnan(asr) or asr == 0:  # say so in words, not only as a number
        lines.append("  inspect  no attack succeeded in this run: the target kept its answers on every attacked item")
    smallest = f.get("medfuzz_smallest_p")
    reach = ("" if smallest is None or smallest != smallest else
             f"; smallest attainable p at this M {number(smallest)}"
             + (" > alpha: no attack can be significant at this run's M (the paper's M = 30 reaches 1/31)"
                if smallest > alpha else ""))
    lines.append(f"  inspect  significant at alpha {alpha:g} (valid p): {count('medfuzz_significant')}, "
                 f"Holm {count('medfuzz_significant_holm')}, BH {count('medfuzz_significant_bh')}; "
                 f"with the paper's b/M (tests that drew all M): {count('medfuzz_significant_paper')}{reach}")
    if "medfuzz_medqa" in lm:
        r, n = lm["medfuzz_medqa"], lm_counts or {}
        scored = n.get("clean_acc")
        lines.append(f"  lm-eval  the same fuzzed items{'' if scored is None else f' ({scored} scored)'}: clean_acc "
                     f"{_lm(r, 'clean_acc')}  attacked_acc {_lm(r, 'attacked_acc')}  flip_rate "
                     f"{_lm(r, 'flip_rate', n.get('flip_rate'))}  LLM errors "
                     f"{number(r.get('llm_errors,none', 0), spec='.0f')}")
    elif lm:
        lines.append("  lm-eval  medfuzz_medqa skipped: the target got every item wrong, so nothing was attacked")
    return lines
