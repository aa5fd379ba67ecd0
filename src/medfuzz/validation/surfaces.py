"""``validate`` where users read the numbers: the planted target through the real harness tasks and the real
report, compared with an independent recount of the harnesses' raw replies and with the planted truth.

The other sections drive the engines and the scorer functions in-process. This one runs what a user runs: the
planted target behind its OpenAI-compatible server, asked by Inspect's ``medfuzz/medqa_clean`` task
(Inspect's ``eval``) and by lm-eval's ``medqa_clean`` task (``simple_evaluate`` with lm-eval's own results and
samples writer; both run by the shell, ``planted_runs`` in each harness's task folder, so that this module
imports no harness), then ``medfuzz.report.render_all`` over both, as ``medfuzz report`` does. Each printed number
of the clean baseline is then read back where a user reads it — the Inspect metric in the log, ``summary.json``,
the model card (``model-index.<model>.yaml``, rounded to 4 places there), the terminal summary's lines, and the
first screen's rows (``index.html``, equal to the terminal's: ``read_back.first_screen_check``, in every part) — and
compared with

- an independent recount from the raw replies (the ``ANSWER: X`` line of each Inspect reply, the argmax of
  lm-eval's per-choice log-likelihoods), the Wilson interval from ``statsmodels`` and lm-eval's standard error
  from ``numpy`` (exact: tolerance 1e-12, 5e-5 where the card rounds);
- the planted truth: the target's answer distribution is known per item (``PlantedTarget.base``, jittered by
  ``noise``), so the expected accuracy of a sampled answer is the mean of E[clip(b + σU, 0, 1)], U ~ U(-1, 1);
  the measured accuracy must fall in the exact binomial interval around it (power against a uniform guess).

The same run as ``SHARDS`` shards (``medfuzz run --shard K/N``'s slices), merged by the report, must print the whole
run's ``summary.json`` result field for field. MedGuard's indices, principles and chance levels are read back the
same way (``validation.surfaces_medguard``), and so is the ranking of three planted models with every pair's
McNemar test, raw and Holm-adjusted (``validation.surfaces_ranking``); TCES's rates, queries per success,
diversity and most reused replacements on a user's own file (``validation.surfaces_tces``); MedFuzz's rates,
significance counts over the family and faithfulness rates with the planted attacker
(``validation.surfaces_medfuzz``); and lm-eval's TCES rates with their standard errors over their own docs
(``validation.surfaces_lm_eval``)."""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from medfuzz.benchmarks import load_items
from medfuzz.planted import PlantedSpec, PlantedTarget
from medfuzz.validation.checks import Check, Size, binomial_power, exact_check, proportion_check, with_power
from medfuzz.validation.read_back import first_screen_check, first_screen_numbers, terminal_numbers

METHOD = "surfaces"
SIZES: dict[str, int] = {"ci": 50, "full": 50}  # the bundled demo rows: every one at both sizes
ANSWER_LINE = re.compile(r"ANSWER\s*:\s*\(?([A-Z])\)?", re.IGNORECASE)


@dataclass
class Recount:
    """Correct answers among the answered items, recounted from the raw replies."""

    correct: dict[str, bool]

    @property
    def k(self) -> int:
        return sum(self.correct.values())

    @property
    def n(self) -> int:
        return len(self.correct)


SHARDS = 3  # the shard set the whole run is compared with (``medfuzz run --shard K/3``'s slices)


def recount_inspect(log_path: Path) -> Recount:
    """Correct among the answered samples, from each reply's last ``ANSWER: X`` line (a sample with an error or
    no such line is not answered, as the task's strict scorer leaves LLM errors out)."""
    from medfuzz.tasks.inspect.planted_runs import replies

    correct = {}
    for reply in replies(log_path):
        found = ANSWER_LINE.findall(reply.completion)
        if reply.errored or not found:
            continue
        correct[reply.sample_id] = found[-1].upper() == reply.target.strip().upper()
    return Recount(correct)


def recount_lm_eval(results_file: Path, task: str = "medqa_clean") -> Recount:
    """Correct docs from lm-eval's samples file: the choice with the largest log-likelihood against the gold."""
    stamp = results_file.name.removeprefix("results_").removesuffix(".json")
    lines = (results_file.parent / f"samples_{task}_{stamp}.jsonl").read_text(encoding="utf-8").splitlines()
    correct = {}
    for line in filter(str.strip, lines):
        record = json.loads(line)
        logliks = [float(r[0][0]) for r in record["resps"]]
        correct[str(record["doc"]["id"])] = int(np.argmax(logliks)) == int(record["target"])
    return Recount(correct)


def planted_accuracy(spec: PlantedSpec, ids: list[str]) -> float:
    """The expected accuracy of one sampled answer per item: E[clip(b + σU, 0, 1)], U ~ U(-1, 1), averaged
    (exact for the uniform: the clipped parts integrate in closed form)."""
    target = PlantedTarget(spec, load_items(spec.target.benchmark, spec.target.data))
    sigma = spec.target.noise

    def expected(b: float) -> float:
        if sigma == 0:
            return min(1.0, max(0.0, b))
        lo, hi = b - sigma, b + sigma  # q uniform on [lo, hi], clipped to [0, 1]
        mass = 0.0
        if hi > 1:
            mass += (hi - max(lo, 1.0)) * 1.0
        a, c = max(lo, 0.0), min(hi, 1.0)
        if c > a:
            mass += (c * c - a * a) / 2
        return mass / (2 * sigma)

    return float(np.mean([expected(target.base[i]) for i in ids]))


def planted_argmax_accuracy(spec: PlantedSpec, ids: list[str], options: int = 4) -> float:
    """The expected accuracy of the argmax answer (lm-eval's log-likelihood choice): the key wins when its
    probability q = b + σU beats each distractor's (1 - q)/(options - 1), i.e. q > 1/options; averaged."""
    target = PlantedTarget(spec, load_items(spec.target.benchmark, spec.target.data))
    sigma, cut = spec.target.noise, 1.0 / options

    def wins(b: float) -> float:
        if sigma == 0:
            return float(b > cut)
        return min(1.0, max(0.0, (b + sigma - cut) / (2 * sigma)))

    return float(np.mean([wins(target.base[i]) for i in ids]))


def _wilson(k: int, n: int) -> tuple[float, float]:
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
    return float(low), float(high)


def _rounded(method: str, statistic: str, truth: float, card: Any, n: int) -> Check:
    """The model card rounds to 4 places: equal to the truth within half a unit of the 4th."""
    measured = float(card) if isinstance(card, int | float) else math.nan
    return Check(method, statistic, truth, measured, truth - 5e-5 - 1e-12, truth + 5e-5 + 1e-12, n)


def _result(summary: dict[str, Any], harness: str, method: str = "baseline") -> dict[str, Any]:
    found = [r for m in summary["models"].values() for r in m["results"]
             if r["method"] == method and r["harness"] == harness]
    if len(found) != 1:
        raise RuntimeError(f"validate surfaces: {len(found)} {harness} {method} results in summary.json")
    return found[0]


def _card_metric(report: Path, harness: str, metric: str) -> dict[str, Any]:
    entries = [e for path in report.glob("model-index*.yaml")
               for e in yaml.safe_load(path.read_text(encoding="utf-8"))["model-index"]]
    found = [m for e in entries for r in e["results"] for m in r["metrics"]
             if m["type"] == metric and f"({harness})" in m["name"]]
    if len(found) != 1:
        raise RuntimeError(f"validate surfaces: {len(found)} {harness} {metric} metrics in the model card")
    return found[0]


def inspect_checks(recount: Recount, log_path: Path, summary: dict[str, Any], report: Path,
                   terminal: dict[str, str]) -> list[Check]:
    """The Inspect baseline's strict accuracy where it is read, against the recount."""
    from medfuzz.tasks.inspect.planted_runs import scorer_metrics

    k, n = recount.k, recount.n
    truth, (low, high) = k / n, _wilson(k, n)
    metrics = scorer_metrics(log_path, "baseline_choice")
    number = _result(summary, "Inspect")["numbers"]["baseline_acc"]
    card = _card_metric(report, "Inspect", "baseline_acc")
    where = "Inspect clean baseline accuracy"
    values = np.array([float(v) for v in recount.correct.values()])
    return [
        exact_check(METHOD, f"{where}: Inspect's baseline_acc metric = recount of ANSWER lines", truth,
                    float(metrics.get("baseline_acc", math.nan)), n, tolerance=1e-12),
        exact_check(METHOD, f"{where}: Inspect's baseline_stderr metric = sample SD/√n",
                    float(values.std(ddof=1) / math.sqrt(n)), float(metrics.get("baseline_stderr", math.nan)), n,
                    tolerance=1e-12),
        exact_check(METHOD, f"{where}: summary.json k = recount", float(k), float(number["k"]), n, tolerance=0.0),
        exact_check(METHOD, f"{where}: summary.json n = answered samples", float(n), float(number["n"]), n,
                    tolerance=0.0),
        exact_check(METHOD, f"{where}: summary.json value = k/n", truth, float(number["value"]), n, tolerance=1e-12),
        exact_check(METHOD, f"{where}: summary.json Wilson low = statsmodels", low, float(number["ci95"][0]), n,
                    tolerance=1e-12),
        exact_check(METHOD, f"{where}: summary.json Wilson high = statsmodels", high, float(number["ci95"][1]), n,
                    tolerance=1e-12),
        _rounded(METHOD, f"{where}: model card value = k/n (4 places)", truth, card.get("value"), n),
        _rounded(METHOD, f"{where}: model card Wilson low (4 places)", low, card["args"]["ci95"][0], n),
        _rounded(METHOD, f"{where}: model card Wilson high (4 places)", high, card["args"]["ci95"][1], n),
        exact_check(METHOD, f"{where}: terminal line = k/n, interval, k/n", 0.0,
                    float(_shown_share(truth, low, high, k, n) != next(iter(terminal.values()), "")), n),
    ]


def _shown_share(value: float, low: float, high: float, k: int, n: int) -> str:
    """What the terminal and the page print for a share, written here independently of ``Number.shown``."""
    return f"{value:.3f} [{low:.3f}, {high:.3f}] ({k}/{n})"


def lm_eval_checks(recount: Recount, results_file: Path, summary: dict[str, Any], report: Path,
                   terminal: dict[str, str]) -> list[Check]:
    """lm-eval's accuracy and its standard error, as lm-eval aggregated them and as the report carries them,
    against the recount (lm-eval's ``mean`` and ``mean_stderr``: sample standard deviation over √n)."""
    from medfuzz.validation.surfaces_lm_eval import Rate

    values = np.array([float(v) for v in recount.correct.values()])
    n = len(values)
    truth, se = float(values.mean()), float(values.std(ddof=1) / math.sqrt(n))
    reported = json.loads(results_file.read_text(encoding="utf-8"))["results"]["medqa_clean"]
    number = _result(summary, "lm-eval")["numbers"]["acc"]
    card = _card_metric(report, "lm-eval", "acc")
    where = "lm-eval clean baseline accuracy"
    return [
        exact_check(METHOD, f"{where}: lm-eval's acc = recount of the log-likelihood argmax", truth,
                    float(reported["acc,none"]), n, tolerance=1e-12),
        exact_check(METHOD, f"{where}: lm-eval's acc_stderr = sample SD/√n", se, float(reported["acc_stderr,none"]),
                    n, tolerance=1e-12),
        exact_check(METHOD, f"{where}: summary.json value = recount", truth, float(number["value"]), n,
                    tolerance=1e-12),
        exact_check(METHOD, f"{where}: summary.json se = sample SD/√n", se, float(number["se"]), n, tolerance=1e-12),
        exact_check(METHOD, f"{where}: summary.json n = docs", float(n), float(number["n"]), n, tolerance=0.0),
        _rounded(METHOD, f"{where}: model card value (4 places)", truth, card.get("value"), n),
        _rounded(METHOD, f"{where}: model card stderr (4 places)", se, card["args"].get("stderr"), n),
        exact_check(METHOD, f"{where}: terminal line = value ± SE (n)", 0.0,
                    float(Rate(tuple(values)).shown() != terminal.get("acc")), n),
    ]


def shard_check(whole: dict[str, Any], merged: dict[str, Any], n: int) -> Check:
    """The shards merged by the report (``report.shards``) print what the whole run prints: every number of the
    Inspect baseline's ``summary.json`` result (value, interval, k, n) and its data, field for field."""
    a, b = _result(whole, "Inspect"), _result(merged, "Inspect")
    fields = [("numbers", name) for name in sorted(set(a["numbers"]) | set(b["numbers"]))] + [("data", "")]
    differ = [f"{part}.{name}" for part, name in fields
              if (a[part].get(name) if name else a[part]) != (b[part].get(name) if name else b[part])]
    return exact_check(METHOD, f"Inspect clean baseline: {SHARDS} shards merged = the whole run (summary.json fields "
                               "differing)", 0.0, float(len(differ)), n, note=", ".join(differ), tolerance=0.0)


def truth_checks(spec: PlantedSpec, inspect: Recount, lm_eval: Recount) -> list[Check]:
    """Each harness's measured accuracy against the planted one (exact binomial interval), with its power
    against a defect that scores the answers against another letter than the key (a distractor's share:
    (1 - planted) / 3 on four options)."""
    sampled = proportion_check(METHOD, "Inspect clean baseline accuracy vs planted",
                               planted_accuracy(spec, sorted(inspect.correct)), inspect.k, inspect.n,
                               note="sampled answers: E[clip(b + σU)] per item")
    argmax = proportion_check(METHOD, "lm-eval clean baseline accuracy vs planted",
                              planted_argmax_accuracy(spec, sorted(lm_eval.correct)), lm_eval.k, lm_eval.n,
                              note="log-likelihood argmax: P(b + σU > 1/4) per item")
    return [with_power(c, "scored against a distractor's letter", binomial_power(c, (1 - c.planted) / 3))
            for c in (sampled, argmax)]


def surface_spec(seed: int = 0) -> PlantedSpec:
    """The bundled planted behaviour with a weaker target (Beta(2, 2) accuracy clipped to [0.05, 0.95]): every
    rate of this section strictly between 0 and 1, so that each standard error and interval end is a real check
    (the bundled target, at least 0.3 on the key, is never wrong under lm-eval's log-likelihood argmax)."""
    spec = PlantedSpec.load()
    return replace(spec, seed=seed,  # validate's --seed: the items' planted accuracies and every call's draw
                   target=replace(spec.target, beta_a=2.0, beta_b=2.0, low=0.05, high=0.95, delta=0.0))


# the section's parts in the table's order, and the cheapest first (CPU at ci, measured on 2 quiet cores: the ranking
# 3 s, MedGuard 5 s, TCES 10 s, MedFuzz 9 s plus lm-eval's import, the clean baseline 34 s with lm-eval's task index):
# under ``--fail-fast`` a defect in a later surface stops after its own part, not after the whole section
PARTS = ("clean baseline", "MedGuard", "MedGuard ranking", "TCES", "MedFuzz")
CHEAPEST_FIRST = ("MedGuard ranking", "MedGuard", "TCES", "MedFuzz", "clean baseline")


def clean_baseline_surfaces(size: Size, spec: PlantedSpec) -> list[Check]:
    """The clean baseline in both harnesses, its 3 shards merged, and lm-eval's TCES aggregates."""
    from medfuzz.report import render_all
    from medfuzz.tasks.inspect.planted_runs import clean_baseline_logs, model_of
    from medfuzz.tasks.lm_eval.planted_runs import clean_baseline_results
    from medfuzz.validation.surfaces_lm_eval import lm_eval_surfaces

    limit = SIZES[size]
    with tempfile.TemporaryDirectory(prefix="medfuzz-validate-surfaces-") as tmp:
        folder = Path(tmp)
        log_path, shard_paths = clean_baseline_logs(spec, limit, folder, SHARDS)
        results_file = clean_baseline_results(spec, limit, folder, model_of(log_path))
        report = folder / "report"
        render_all([log_path, results_file], report, echo=False)
        summary = json.loads((report / "summary.json").read_text(encoding="utf-8"))
        terminal = terminal_numbers([log_path, results_file], "Inspect", "Clean baseline")
        page = first_screen_numbers(report, "Inspect", "Clean baseline")
        lm_terminal = terminal_numbers([log_path, results_file], "lm-eval", "Clean baseline")
        lm_page = first_screen_numbers(report, "lm-eval", "Clean baseline")
        render_all(shard_paths, folder / "report-shards", echo=False)
        merged = json.loads((folder / "report-shards" / "summary.json").read_text(encoding="utf-8"))
        inspect_recount, lm_recount = recount_inspect(log_path), recount_lm_eval(results_file)
        lm_eval_tces = lm_eval_surfaces(spec, folder).checks()
        return [*inspect_checks(inspect_recount, log_path, summary, report, terminal),
                *lm_eval_checks(lm_recount, results_file, summary, report, lm_terminal),
                first_screen_check(METHOD, "Inspect clean baseline accuracy", page, terminal, inspect_recount.n),
                first_screen_check(METHOD, "lm-eval clean baseline accuracy", lm_page, lm_terminal, lm_recount.n),
                shard_check(summary, merged, inspect_recount.n),
                *truth_checks(spec, inspect_recount, lm_recount), *lm_eval_tces]


def surface_parts(size: Size = "ci", seed: int = 0,
                  spec: PlantedSpec | None = None) -> dict[str, Callable[[], list[Check]]]:
    """Each part of this section (``PARTS``) as a call that runs it and returns its checks."""
    from medfuzz.validation.surfaces_medfuzz import validate_medfuzz_surfaces
    from medfuzz.validation.surfaces_medguard import validate_medguard_surfaces
    from medfuzz.validation.surfaces_ranking import validate_ranking_surfaces
    from medfuzz.validation.surfaces_tces import validate_tces_surfaces

    spec = spec or surface_spec(seed)
    parts: dict[str, Callable[[], list[Check]]] = {
        "clean baseline": lambda: clean_baseline_surfaces(size, spec),
        "MedGuard": lambda: validate_medguard_surfaces(size, spec),
        "MedGuard ranking": lambda: validate_ranking_surfaces(spec),
        "TCES": lambda: validate_tces_surfaces(size, seed),
        "MedFuzz": lambda: validate_medfuzz_surfaces(size, seed),
    }
    return parts


def validate_surfaces(size: Size = "ci", seed: int = 0, spec: PlantedSpec | None = None) -> list[Check]:
    """Every check of this section, in the table's order (see the module docstring)."""
    return [check for part in surface_parts(size, seed, spec).values() for check in part()]


__all__ = ["CHEAPEST_FIRST", "PARTS", "clean_baseline_surfaces", "planted_accuracy", "recount_inspect",
           "recount_lm_eval", "surface_parts", "validate_surfaces"]
