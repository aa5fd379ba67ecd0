"""The words ``medfuzz run`` ends with: per target model, each method's robustness numbers, both harnesses side by
side where both ran, and what a number cannot show (a run where nothing was attacked; a significance no attack can
reach at the run's M).

Every number here is a number of the report's first screen: the results ``report.overview.build`` reads from the
same logs and lm-eval results (one card per model), each written by ``Number.shown`` (the value, its 95 % Wilson
interval and k/n, or ± its standard error and n), so the terminal, the page, ``summary.json`` and the model card
read the same value, interval and n (``tests/e2e/test_report_surfaces_agree.py``). What is added here is words:
the run's settings, and the one comparison only the terminal makes (the clean baseline's per-item agreement of
the two harnesses)."""

from __future__ import annotations

import json
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medfuzz.records.keys import recorded_config
from medfuzz.records.methods import METHODS
from medfuzz.report.terminal import first_screen_results, result_lines


def _lm_eval_file(folder: Path | None) -> tuple[Path | None, dict[str, Any]]:
    """The newest lm-eval results file under ``folder`` and its contents."""
    files = sorted(folder.rglob("results_*.json"), key=lambda p: p.stat().st_mtime) if folder else []
    return (files[-1], json.loads(files[-1].read_text())) if files else (None, {})


def _data(plan: Any) -> Any:
    """What the run's questions are (``report.overview.DataSource``, the page's and the card's words)."""
    from medfuzz.report.overview import DataSource

    return DataSource.of(plan.benchmark, plan.data, None, None, data_name=plan.data_name)


def _data_words(plan: Any) -> str:
    return str(_data(plan).name)


@dataclass
class Finished:
    """One target model's finished runs, and the first-screen results read from them."""

    plan: Any
    logs: Mapping[str, Any]  # the suite label -> its EvalLog header
    paths: dict[str, Path]  # the suite label -> its log file
    lm_eval_out: Path | None
    name: str  # the target model as the summary names it
    lm_file: Path | None  # the newest lm-eval results file under ``lm_eval_out``, and all of it
    lm_data: dict[str, Any]
    results: list[Any]  # ``report.overview.MethodResult`` of these runs, in the first screen's order

    @property
    def lm(self) -> dict[str, dict[str, Any]]:
        """lm-eval's results (task -> metrics), empty without the lm-eval half."""
        return self.lm_data.get("results") or {}

    def of(self, method: str) -> list[Any]:
        return [r for r in self.results if r.method == method]


def summary_lines(plan: Any, logs: Mapping[str, Any], lm_eval_out: Path | None, model: str) -> list[str]:
    """The summary of one target model's runs (``logs``: the suite label -> its EvalLog header, finished runs
    only): one block per registered method with results, in the suite's order (``records.methods``): a title
    (the method's own, its spec's ``terminal_title``, else its title), then each result's numbers as the report's
    first screen shows them (``result_lines``) and what a method adds in words (its spec's ``terminal_words``).
    A block starts with its blank line."""
    from medfuzz.cli.suite.plan import EMBEDDED
    from medfuzz.records.locations import local_path
    from medfuzz.records.methods import suite_order

    embedded = plan.model == EMBEDDED
    name = "SmolLM2-135M-Instruct (embedded)" if embedded else model
    lines = ["", f"medfuzz run: {name} on {_data_words(plan)}, level {plan.level}"]
    lm_file, lm_data = _lm_eval_file(lm_eval_out)
    paths = {label: local_path(entry.location) for label, entry in logs.items()}
    results = first_screen_results([*paths.values(), *([lm_file] if lm_file else [])])
    done = Finished(plan, logs, paths, lm_eval_out, name, lm_file, lm_data, results)
    for method in suite_order():  # every registered method: a block shows the results there are, else nothing
        found = done.of(method)
        spec = METHODS[method]
        words = pkgutil.resolve_name(spec.terminal_words) if spec.terminal_words else lambda done, harness: []
        if not found and not words(done, "lm-eval"):
            continue
        lines += ["", pkgutil.resolve_name(spec.terminal_title)(done) if spec.terminal_title else spec.title]
        for harness in ("Inspect", "lm-eval"):
            for result in (r for r in found if r.harness == harness):
                lines += result_lines(result)
            lines += words(done, harness)
    if embedded:
        lines += ["", "A 135M model answers near chance and the attacker is a template: these numbers show that every",
                  "method runs end to end and what it reports, not medical skill or attack strength."]
    return lines


# ------------------------------------------------------------------------------ each method's own words
# (named by the builtin methods' specs: ``records.methods.Method.terminal_title`` / ``terminal_words``)


def baseline_title(done: Finished) -> str:
    return f"Clean baseline ({_data(done.plan).label})"


def baseline_words(done: Finished, harness: str) -> list[str]:
    """After the lm-eval result: on how many items both harnesses had the same strict correctness."""
    from medfuzz.report.runs import read_inspect_log, read_lm_eval_output

    task = f"{done.plan.benchmark}_clean"  # the benchmark's lm-eval task (``tasks.lm_eval.task_yaml``)
    if harness != "lm-eval" or "clean baseline" not in done.paths or task not in done.lm:
        return []
    strict = read_inspect_log(done.paths["clean baseline"])
    clean_lm = read_lm_eval_output(done.lm_eval_out, task)
    shared = set(strict.per_item) & set(clean_lm.per_item)
    same = sum(strict.per_item[i] == clean_lm.per_item[i] for i in shared)
    return [f"  same strict correctness in both harnesses on {same}/{len(shared)} items"]


def medguard_title(done: Finished) -> str:
    log = done.logs.get("medguard")
    if log is None:
        return "MedGuard"
    per = (log.eval.task_args or {}).get(METHODS["medguard"].limit_option)  # as run (-T may have set it)
    size = f"{per} item(s) per aspect; equity: {per} case(s) × 8 variants" if per else "every item"
    return f"MedGuard (balanced bundled build, {size})  safety index ± bootstrap SE, chance level beside it"


def medfuzz_title(done: Finished) -> str:
    from medfuzz.cli.suite.plan import TEMPLATE_ATTACKER

    log = done.logs.get("medfuzz")
    if log is None:
        return "MedFuzz"
    config = recorded_config(log.eval.metadata)
    plan = done.plan
    attacker = ("the TEMPLATE attacker, no LLM: patient characteristics plus one red herring naming a distractor"
                if plan.attacker == TEMPLATE_ATTACKER else plan.attacker or "the target itself")
    controls = config.get("controls")
    test = (f"sequential permutation test over up to {controls} control fuzzes" if controls
            else "no significance test")
    return (f"MedFuzz (target: {done.name.split(' (')[0]}; attacker: {attacker}; {log.eval.dataset.samples} items, "
            f"K={config.get('turns', '?')}, {config.get('replicates', '?')} replicate(s), {test})")


def medfuzz_words(done: Finished, harness: str) -> list[str]:
    """What the numbers cannot say alone: that nothing succeeded (Inspect), or why lm-eval scored nothing."""
    if harness == "Inspect":
        asr = next((n for r in done.of("medfuzz") if r.harness == "Inspect" for n in r.numbers
                    if n.metric == "medfuzz_asr"), None)
        if asr is not None and (asr.value != asr.value or asr.value == 0):  # NaN (nothing attacked) or 0
            return ["  no attack succeeded in this run: the target kept its answers on every attacked item"]
        return []
    if done.lm and "medfuzz" in done.logs and not any(r.harness == "lm-eval" for r in done.of("medfuzz")):
        return [f"  lm-eval  medfuzz_{done.plan.benchmark} skipped: the target got every item wrong, so nothing "
                "was attacked"]
    return []
