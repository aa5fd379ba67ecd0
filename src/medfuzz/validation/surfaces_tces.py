"""``validate``'s surfaces, TCES: the planted target through the real ``medfuzz/tces`` Inspect task, run on a user's
own file, and the real report; every printed rate, count and the diversity read back where users read them.

The design is the TCES section's denominator run (``validation.tces``): the validation items and vocabulary, the
planted TCES rule, and every other item planted wrong before the attack (P(key) = 0.1). So the populations differ:
clean accuracy and accuracy after the attack are over every evaluated item, ASR@B and ASR@1 over the items
answered correctly clean, the queries to success over the successes alone (a check states that they differ from
the queries per attacked item). The items are written to a JSONL file in the ``choices``-less MedQA layout and run
as a user's own benchmark (``benchmark=mcq``, ``data=FILE``), the path a researcher's question bank takes.

The recount reads the per-item records the scorer stored (outcome, queries to success, the replacement; the TCES
section checks the attack that writes them against the planted rule) and counts, independently of
``scorers.tces``: successes, attack failures and the clean-wrong items, the shares with statsmodels' Wilson
interval, the mean queries to success over the successes, 1 - Σ q² over the successful replacements and the
five replacements used most often (ties alphabetical) with their counts. Each surface (Inspect's metrics,
``summary.json``, the model card, the terminal summary) must print the recount (tolerance 1e-12 or the exact
text; 5e-5 where the card rounds), the items attacked must be the items planted right, and ASR@1 must match the
planted rule (exact: Σ over the winners of the Eq. 3 draw probabilities), with its power against an ASR over
every evaluated item instead of the attacked ones.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from medfuzz.benchmarks.items import MCQItem, derive_seed
from medfuzz.planted import PlantedSpec
from medfuzz.validation.checks import (
    Check,
    Size,
    binomial_power,
    differing_check,
    exact_check,
    fields_differing,
    proportion_check,
    with_power,
)
from medfuzz.validation.read_back import card_fields, first_screen_check, summary_fields

METHOD = "surfaces"
WHERE = "TCES"
CARD = 5e-5 + 1e-12  # the model card rounds to 4 places
# half of them attacked: at 40 attacked items ASR@1's planted check has power >= 0.8 against an ASR over every
# evaluated item (20 attacked items: 0.50)
ITEMS: dict[str, int] = {"ci": 80, "full": 150}
TOP = 5  # the reused entities Inspect's metric lists
SHARDS = 2  # a bounded run in shards, merged: the first SHARDED_ITEMS items, whole and in shards
SHARDED_ITEMS = 12


@dataclass(frozen=True)
class Share:
    k: int
    n: int

    @property
    def value(self) -> float:
        return self.k / self.n

    @property
    def interval(self) -> tuple[float, float]:
        from statsmodels.stats.proportion import proportion_confint

        low, high = proportion_confint(self.k, self.n, alpha=0.05, method="wilson")
        return float(low), float(high)

    def shown(self) -> str:
        """The text a share is printed as, written here independently of ``report.overview.Number``."""
        low, high = self.interval
        return f"{self.value:.3f} [{low:.3f}, {high:.3f}] ({self.k}/{self.n})"


@dataclass(frozen=True)
class TCESRecount:
    shares: dict[str, Share]
    queries_per_success: float
    queries_per_attack: float  # what a defect over the wrong population prints
    gini_simpson: float
    successes: int
    reused: dict[str, int]  # the TOP most used replacements (ties alphabetical, as documented): their counts
    attacked: frozenset[str]


def recount(records: list[dict[str, Any]]) -> TCESRecount:
    """The recount of the stored per-item records (see the module docstring)."""
    outcome = Counter(r["outcome"] for r in records)
    evaluated = outcome["success"] + outcome["attack_failed"] + outcome["already_wrong"]
    attacked = outcome["success"] + outcome["attack_failed"]
    wins = [r for r in records if r["outcome"] == "success"]
    at_first = sum(1 for r in wins if int(r["queries_to_success"]) == 1)
    names = Counter(str(r["replacement"]) for r in wins)
    shares = {"tces_clean_acc": Share(attacked, evaluated),
              "tces_attacked_acc": Share(outcome["attack_failed"], evaluated),
              "tces_asr": Share(len(wins), attacked), "tces_asr_at_1": Share(at_first, attacked)}
    spent = [int(r["queries_to_success"]) if r["outcome"] == "success" else int(r["queries_used"])
             for r in records if r["outcome"] in ("success", "attack_failed")]
    return TCESRecount(
        shares, float(np.mean([int(r["queries_to_success"]) for r in wins])), float(np.mean(spent)),
        1.0 - sum((c / len(wins)) ** 2 for c in names.values()), len(wins),
        dict(sorted(names.items(), key=lambda pair: (-pair[1], pair[0]))[:TOP]),
        frozenset(str(r["item_id"]) for r in records if r["outcome"] in ("success", "attack_failed")))


@dataclass
class TCESSurfaces:
    """What one planted TCES run printed, where users read it, and the recount of its stored records."""

    recount: TCESRecount
    metrics: dict[str, float]
    summary: dict[str, Any]
    card: dict[str, Any]
    terminal: dict[str, str]
    planted_right: frozenset[str]
    planted_asr_at_1: float
    shards: list[Check]  # the same task in shards, merged by the report (``shard_checks``)
    page: dict[str, str] = field(default_factory=dict)  # the first screen's rows of this result

    def checks(self) -> list[Check]:
        return [*tces_checks(self), first_screen_check(METHOD, WHERE, self.page, self.terminal,
                                                       self.recount.shares["tces_clean_acc"].n), *self.shards]


def _count(statistic: str, differing: list[str], n: int) -> Check:
    return differing_check(METHOD, f"{WHERE}: {statistic}", differing, n)


def tces_checks(run: TCESSurfaces) -> list[Check]:
    """Every TCES number where it is printed, against the recount and the planted rule."""
    r = run.recount
    n = r.shares["tces_clean_acc"].n
    [result] = [x for m in run.summary["models"].values() for x in m["results"] if x["method"] == "tces"]
    numbers = result["numbers"]
    values = {name: share.value for name, share in r.shares.items()}
    inspect_expected = {**{k: v for k, v in values.items() if k != "tces_asr_at_1"},
                        "tces_queries_to_success": r.queries_per_success, "tces_gini_simpson": r.gini_simpson,
                        **{f"reused:{name}": float(c) for name, c in r.reused.items()}}
    inspect_extra = sorted(k for k in run.metrics if k.startswith("reused:") and k not in inspect_expected)  # listed
    summary_expected = {f"{name}:{part}": x for name, s in r.shares.items()
                        for part, x in (("value", s.value), ("k", s.k), ("n", s.n), ("low", s.interval[0]),
                                        ("high", s.interval[1]))}
    summary_expected |= {"tces_gini_simpson:value": r.gini_simpson, "tces_gini_simpson:n": float(r.successes)}
    shown_terminal = {name: share.shown() for name, share in r.shares.items()}
    shown_terminal["tces_gini_simpson"] = f"{r.gini_simpson:.3f} (n={r.successes})"
    attacked = r.shares["tces_asr"].n
    asr1 = proportion_check(METHOD, f"{WHERE}: Inspect's ASR@1 (summary.json k/n) vs planted",
                            run.planted_asr_at_1, r.shares["tces_asr_at_1"].k, attacked,
                            note="exact: Σ over the winners of the Eq. 3 first-draw probabilities, attacked items")
    wrong_population = run.planted_asr_at_1 * attacked / n
    return [
        exact_check(METHOD, f"{WHERE}: items attacked = the items planted right clean (items differing)", 0.0,
                    float(len(r.attacked ^ run.planted_right)), n, tolerance=0.0,
                    note=f"{len(run.planted_right)} planted right of {n}"),
        exact_check(METHOD, f"{WHERE}: the design separates queries per success from queries per attack", 1.0,
                    float(abs(r.queries_per_success - r.queries_per_attack) > 0.1), r.successes, tolerance=0.0,
                    note=f"per success {r.queries_per_success:.3f}, per attacked item {r.queries_per_attack:.3f}"),
        _count("Inspect's metrics: every rate, queries per success, Gini-Simpson, reused counts = recount",
               fields_differing(inspect_expected, run.metrics, 1e-12)
               + [f"{k} (not among the most used)" for k in inspect_extra], n),
        _count("summary.json: every share's value, k, n, Wilson ends (statsmodels); Gini-Simpson and n = recount",
               fields_differing(summary_expected, summary_fields(numbers), 1e-12), n),
        _count("model card: every value and Wilson end = recount (4 places)",
               fields_differing({k: v for k, v in summary_expected.items() if k.endswith((":value", ":low", ":high"))},
                                card_fields(run.card), CARD), n),
        _count("terminal: every line = the text of the recount",
               [f"{k}: {run.terminal.get(k)!r} (expected {v!r})" for k, v in shown_terminal.items()
                if run.terminal.get(k) != v], n),
        with_power(asr1, "ASR@1 over every evaluated item instead of the attacked ones",
                   binomial_power(asr1, wrong_population)),
    ]


def shard_checks(logs: list[Path], folder: Path) -> list[Check]:
    """A bounded run in ``SHARDS`` shards, merged by the report (``report.shards``), prints what the whole run
    prints (every field of its ``summary.json`` TCES result) and records the whole run's call bound
    (``max_calls``: the config's bound for every sample, not one shard's)."""
    from medfuzz.report import render_all
    from medfuzz.report.shards import MERGED_DIR
    from medfuzz.tasks.inspect.planted_runs import recorded_metadata

    whole, *parts = logs
    render_all([whole], folder / "report-whole", echo=False)
    render_all(parts, folder / "report-shards", echo=False)
    a, b = (next(r for m in json.loads((folder / name / "summary.json").read_text(encoding="utf-8"))["models"].values()
                 for r in m["results"] if r["method"] == "tces") for name in ("report-whole", "report-shards"))
    differ = [f"{part}.{name}" for part in ("numbers", "data") for name in sorted(set(a[part]) | set(b[part]))
              if a[part].get(name) != b[part].get(name)]
    [merged] = (folder / "report-shards" / MERGED_DIR).glob("*.eval")
    bound, merged_bound = (recorded_metadata(path).get("max_calls") for path in (whole, merged))
    shard_bounds = [recorded_metadata(path).get("max_calls") for path in parts]
    n = int(a["numbers"]["tces_clean_acc"]["n"])
    return [
        differing_check(METHOD, f"{WHERE}: {SHARDS} shards merged = the whole run (summary.json fields)", differ, n),
        differing_check(METHOD, f"{WHERE}: the merged shards record the whole run's call bound (max_calls)",
                        [] if merged_bound == bound and bound not in shard_bounds else
                        [f"merged {merged_bound} (whole {bound}; shards {shard_bounds})"], n),
    ]


def _items_file(items: list[MCQItem], folder: Path) -> Path:
    """The items as a user's own JSONL file in the MedQA layout (read without a column mapping)."""
    path = folder / "planted-tces-items.jsonl"
    path.write_text("".join(json.dumps({"id": i.id, "question": i.question, "options": dict(i.options),
                                        "answer": i.answer}) + "\n" for i in items), encoding="utf-8")
    return path


def tces_surfaces(size: Size, seed: int, spec: PlantedSpec | None = None) -> TCESSurfaces:
    """The real ``medfuzz/tces`` task on the denominator design, its report rendered, every surface read."""
    from medfuzz.report import render_all
    from medfuzz.solvers.tces.config import TCESConfig
    from medfuzz.tasks.inspect.planted_runs import scorer_metrics, stored_scores, tces_log
    from medfuzz.validation.read_back import first_screen_numbers, terminal_numbers
    from medfuzz.validation.tces import PLANS, Setup, accuracy_file, planted_wrong, simulate

    # the ci plan's vocabulary at both sizes: with the full plan's (800 entities) every attack finds a winner, so
    # queries per success and per attacked item coincide and the design no longer separates them
    setup = Setup.build(replace(PLANS["ci"], items=ITEMS[size]), seed, spec)
    items = setup.items
    wrong = planted_wrong(items)
    planted = setup.spec.with_target(accuracy=str(accuracy_file(items, wrong, seed)), low=0.0, high=1.0)
    right = [item for item in items if item.id not in wrong]
    config = TCESConfig(entity=planted.tces.entity, vocabulary=str(setup.vocabulary),
                        embedding=planted.tces.embedding, budget=setup.plan.budget)
    simulated = simulate(setup.world, setup.truths(planted, right), config, 1,
                         derive_seed(seed, "tces-surfaces"))  # only the exact ASR@1 is read
    with tempfile.TemporaryDirectory(prefix="medfuzz-validate-tces-") as tmp:
        folder = Path(tmp)
        data = _items_file(items, folder)
        [log] = tces_log(planted, items, data, setup.vocabulary, setup.plan.budget, folder)
        shards = shard_checks(tces_log(planted, items, data, setup.vocabulary, setup.plan.budget,
                                       folder / "sharded", shards=SHARDS, limit=SHARDED_ITEMS), folder)
        report = folder / "report"
        render_all([log], report, echo=False)
        summary = json.loads((report / "summary.json").read_text(encoding="utf-8"))
        card = {str(m["type"]): m for path in report.glob("model-index*.yaml")
                for e in yaml.safe_load(path.read_text(encoding="utf-8"))["model-index"]
                for r in e["results"] for m in r["metrics"] if str(m["type"]).startswith("tces_")}
        records = [dict(s.metadata["record"]) for s in stored_scores(log, "tces_scorer")]  # type: ignore[call-overload]
        return TCESSurfaces(recount(records), scorer_metrics(log, "tces_scorer"), summary, card,
                            terminal_numbers([log], "Inspect", "TCES"), frozenset(i.id for i in right),
                            float(np.mean(simulated.asr1)) if simulated.asr1 is not None else float("nan"), shards,
                            first_screen_numbers(report, "Inspect", "TCES"))


def validate_tces_surfaces(size: Size, seed: int, spec: PlantedSpec | None = None) -> list[Check]:
    """The TCES checks of the surfaces section; about 10 s."""
    return tces_surfaces(size, seed, spec).checks()


__all__ = ["TCESRecount", "TCESSurfaces", "recount", "tces_checks", "tces_surfaces", "validate_tces_surfaces"]
