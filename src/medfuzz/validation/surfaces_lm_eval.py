"""``validate``'s surfaces, lm-eval's robustness aggregates: the planted target through the real lm-eval
``tces_medqa_drugs`` task (one substitution per item, scored by letter log-likelihood) and the real report; each
rate lm-eval aggregates, with its standard error, read back where users read it.

The design makes the populations differ: every other bundled demo item is planted wrong (P(key) 0.1, else 0.9),
so ``flip_rate`` (ASR@1, over the docs answered correctly clean) has fewer docs than ``clean_acc`` and
``attacked_acc`` (over every doc): a rate over the wrong docs, or an n that counts every doc, differs; its
standard error is finite wherever its n ≥ 2 (docs/usage.md promises one for each metric).

The recount reads lm-eval's samples file: each doc's clean and attacked version picked by the largest
log-likelihood among its letters (numpy argmax over the logged responses, independently of
``records.lm_eval_docs``), against the gold index. Each rate is the mean over its docs and its standard error the
sample SD over √n (lm-eval's ``mean`` / ``mean_stderr``). lm-eval's results file, ``summary.json`` (value, se, n),
the model card (value, stderr) and the terminal summary must print the recount (tolerance 1e-12, the exact text,
5e-5 where the card rounds).
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from medfuzz.planted import PlantedSpec
from medfuzz.validation.checks import Check, differing_check, exact_check, fields_differing
from medfuzz.validation.read_back import first_screen_check

METHOD = "surfaces"
WHERE = "lm-eval TCES"
TASK = "tces_medqa_drugs"
CARD = 5e-5 + 1e-12
METRICS = ("clean_acc", "attacked_acc", "flip_rate")


@dataclass(frozen=True)
class Rate:
    values: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def value(self) -> float:
        return float(np.mean(self.values))

    @property
    def se(self) -> float:
        return float(np.std(self.values, ddof=1) / math.sqrt(self.n)) if self.n > 1 else math.nan

    def shown(self) -> str:
        """The terminal's text of a mean ± its SE, written here independently of ``report.format``."""
        return f"{self.value:.3f} ± {self.se:.3f} (n={self.n})"


def recount(samples: list[dict[str, Any]]) -> dict[str, Rate]:
    """Each scored doc's (clean right, attacked right) from its logged log-likelihoods; the rates. A doc that is
    counted, not scored (lm-eval MedFuzz's replicates outside ``outcomes``, ``"scored": false``) is in the
    LLM-error rate alone, over every doc (only MedFuzz's docs record an outcome)."""
    pairs, errors = [], []
    for record in samples:
        doc = record["doc"]
        if "outcome" in doc:
            errors.append(float(doc["outcome"] == "llm_error"))
        if doc.get("scored") is False:
            continue
        n = int(doc["n_options"])
        scores = np.array([float(r[0][0]) for r in record["resps"]])
        gold = int(doc["answer_index"])
        pairs.append((int(np.argmax(scores[:n])) == gold, int(np.argmax(scores[n:2 * n])) == gold))
    rates = {"clean_acc": Rate(tuple(float(c) for c, _ in pairs)),
             "attacked_acc": Rate(tuple(float(c and a) for c, a in pairs)),
             "flip_rate": Rate(tuple(float(not a) for c, a in pairs if c))}
    return rates | ({"llm_error_rate": Rate(tuple(errors))} if errors else {})


@dataclass
class LmEvalSurfaces:
    where: str  # the checks' prefix ("lm-eval TCES")
    task: str
    rates: dict[str, Rate]
    results: dict[str, Any]  # lm-eval's results file: the task's entry
    summary: dict[str, Any]
    card: dict[str, Any]
    terminal: dict[str, str]
    page: dict[str, str] = field(default_factory=dict)  # the first screen's rows of this result

    def checks(self) -> list[Check]:
        return [*lm_eval_checks(self), first_screen_check(METHOD, self.where, self.page, self.terminal,
                                                          max(rate.n for rate in self.rates.values()))]


def lm_eval_checks(run: LmEvalSurfaces) -> list[Check]:
    """lm-eval's rates and their standard errors where they are printed, against the recount: every rate in the
    results file (MedFuzz's LLM-error count too), the first screen's (``METRICS``) on the other surfaces."""
    r = run.rates
    where = run.where
    n = max(rate.n for rate in r.values())
    [result] = [x for m in run.summary["models"].values() for x in m["results"]
                if x["harness"] == "lm-eval" and x["task"] == run.task]
    numbers = result["numbers"]
    every = {f"{name}:{part}": x for name, rate in r.items() for part, x in (("value", rate.value), ("se", rate.se))}
    if "llm_error_rate" in r:  # a count of this run: no standard error
        every["llm_errors:value"] = float(sum(r["llm_error_rate"].values))
    metrics = {name.split(":")[0] for name in every}
    lm_shown = {f"{metric}:{part}": run.results.get(f"{metric}{end},none")
                for metric in metrics for part, end in (("value", ""), ("se", "_stderr"))}
    first = {f"{name}:{part}": x for name in METRICS for part, x in (("value", r[name].value), ("se", r[name].se),
                                                                     ("n", float(r[name].n)))}
    summary_shown = {f"{name}:{part}": (numbers.get(name) or {}).get(part) for name in METRICS
                     for part in ("value", "se", "n")}
    card_shown = {f"{name}:{part}": x for name in METRICS
                  for part, x in (("value", (run.card.get(name) or {}).get("value")),
                                  ("se", ((run.card.get(name) or {}).get("args") or {}).get("stderr")),
                                  ("n", ((run.card.get(name) or {}).get("args") or {}).get("n")))}
    sizes = sorted({(name, rate.n) for name, rate in r.items()}, key=lambda x: x[1])
    return [
        exact_check(METHOD, f"{where}: the design separates flip_rate's docs from every doc", 1.0,
                    float(1 < r["flip_rate"].n < n), n, tolerance=0.0,
                    note=", ".join(f"{name} over {size}" for name, size in sizes)),
        differing_check(METHOD, f"{where}: lm-eval's results file: every rate and its stderr (sample SD/√n over "
                                "its own docs) = recount", fields_differing(every, lm_shown, 1e-12), n),
        differing_check(METHOD, f"{where}: summary.json: every rate's value, se, n = recount",
                        fields_differing(first, summary_shown, 1e-12), n),
        differing_check(METHOD, f"{where}: model card: every value, stderr (4 places) and n = recount",
                        fields_differing(first, card_shown, CARD), n),
        differing_check(METHOD, f"{where}: terminal: every line = the text of the recount",
                        [f"{k}: {run.terminal.get(k)!r} (expected {r[k].shown()!r})" for k in METRICS
                         if run.terminal.get(k) != r[k].shown()], n),
    ]


def read_lm_eval_run(results_file: Path, task: str, where: str, title: str, folder: Path) -> LmEvalSurfaces:
    """One lm-eval results file: its samples recounted, the report rendered over it, every surface read."""
    from medfuzz.report import render_all
    from medfuzz.validation.read_back import first_screen_numbers, terminal_numbers

    stamp = results_file.name.removeprefix("results_").removesuffix(".json")
    samples = [json.loads(line) for line in (results_file.parent / f"samples_{task}_{stamp}.jsonl")
               .read_text(encoding="utf-8").splitlines() if line.strip()]
    report = folder / f"report-{task}"
    render_all([results_file], report, echo=False)
    summary = json.loads((report / "summary.json").read_text(encoding="utf-8"))
    card = {str(m["type"]): m for path in report.glob("model-index*.yaml")
            for e in yaml.safe_load(path.read_text(encoding="utf-8"))["model-index"]
            for r in e["results"] for m in r["metrics"] if str(m["type"]) in METRICS}
    return LmEvalSurfaces(where, task, recount(samples),
                          json.loads(results_file.read_text(encoding="utf-8"))["results"][task], summary, card,
                          terminal_numbers([results_file], "lm-eval", title),
                          first_screen_numbers(report, "lm-eval", title))


def lm_eval_surfaces(spec: PlantedSpec, folder: Path) -> LmEvalSurfaces:
    """The real lm-eval TCES task on the demo rows, half planted wrong; its report rendered, every surface read."""
    from medfuzz.benchmarks.loaders import load_items
    from medfuzz.tasks.lm_eval.planted_runs import planted_results

    items = load_items("medqa", "demo")
    accuracy = folder / "lm-eval-tces-accuracy.jsonl"
    accuracy.write_text("".join(json.dumps({"id": item.id, "p": 0.1 if i % 2 else 0.9}) + "\n"
                                for i, item in enumerate(items)), encoding="utf-8")
    planted = replace(spec, target=replace(spec.target, accuracy=str(accuracy), low=0.0, high=1.0))
    results_file = planted_results(planted, [TASK], {"data": "demo"}, folder, "openai-api/planted/planted")
    return read_lm_eval_run(results_file, TASK, WHERE, "TCES", folder)


def validate_lm_eval_surfaces(spec: PlantedSpec) -> list[Check]:
    """The lm-eval TCES checks of the surfaces section."""
    with tempfile.TemporaryDirectory(prefix="medfuzz-validate-lm-eval-") as tmp:
        return lm_eval_surfaces(spec, Path(tmp)).checks()


__all__ = ["LmEvalSurfaces", "Rate", "lm_eval_checks", "lm_eval_surfaces", "read_lm_eval_run", "recount",
           "validate_lm_eval_surfaces"]
