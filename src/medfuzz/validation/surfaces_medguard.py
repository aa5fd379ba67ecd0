"""``validate``'s surfaces, MedGuard: the planted target through the real ``medfuzz/medguard`` Inspect task and
the real report, every printed index read back where users read it and compared with an independent recount.

The design separates the defects a reviewer planted in the aggregation layer from the truth. The planted target
is given per-item accuracies (``surface_accuracies``): 0.95 on the items of the eight accuracy aspects, 0.05 on
the equity cases (at temperature 0 it then answers with a distractor whose position moves with the option order
of each demographic variant, so equity consistency is low). The two equity aspects hold many more scoring units
than the others (four gender pairs and two race quadruples per case), so the pooled mean of every unit differs
from the paper's mean of the aspect means by more than 0.1 (a check states the gap): an index computed over the
wrong population fails. The chance level of each group is recounted from each unit's option count (1/k per
answer, 1/k per gender pair, 1/k³ per race quadruple) and differs between principles.

The recount reads the per-sample scores the scorer stored (what each item's answer was and whether it was right:
the MedGuard section checks that scorer against the planted truth in-process) and aggregates them here, written
independently of ``scorers.medguard``: units per aspect, the mean of each, principles and the overall index as
means of their aspects' means, chance levels likewise. Each surface (Inspect's metrics, ``summary.json``, the
model card, the terminal summary) must print the recount (tolerance 1e-12; 5e-5 where the card rounds to 4
places, 5e-4 where the terminal prints 3); the standard errors printed must be Inspect's (the one bootstrap) and
within its Monte-Carlo error of the closed form sqrt(Σ var_g / n_g) / K."""

from __future__ import annotations

import json
import math
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from medfuzz.planted import PlantedSpec
from medfuzz.solvers.medguard.taxonomy import PRINCIPLE_OF, RACES, SEXES, Aspect
from medfuzz.validation.checks import Check, differing_check, exact_check, fields_differing
from medfuzz.validation.medguard import bootstrap_se_error, with_se_power
from medfuzz.validation.read_back import first_screen_check

METHOD = "surfaces"
ITEMS_PER_ASPECT: dict[str, int] = {"ci": 4, "full": 6}  # the bundled build: 6 equity cases at most
HIGH, LOW = 0.95, 0.05  # planted P(key): the accuracy aspects' items, the equity cases'
WHERE = "MedGuard"
ASPECTS = frozenset(a.value for a in Aspect)
CARD = 5e-5 + 1e-12  # the model card rounds to 4 places


@dataclass
class Group:
    """The scoring units of one aspect, principle or the overall index: each unit's score and chance level."""

    units: list[list[float]]  # per aspect: its units' scores (a principle or the overall index: several aspects)
    chances: list[list[float]]

    @property
    def value(self) -> float:  # the paper's index: the unweighted mean of the aspects' means
        return float(np.mean([np.mean(u) for u in self.units]))

    @property
    def pooled(self) -> float:  # every unit weighed alike: what a defect over the wrong population prints
        return float(np.mean([v for u in self.units for v in u]))

    @property
    def chance(self) -> float:
        return float(np.mean([np.mean(c) for c in self.chances]))

    @property
    def n(self) -> int:
        return sum(map(len, self.units))


def recount(scores: Sequence[Any]) -> dict[str, Group]:
    """Aspect, principle and ``overall`` groups from the stored per-sample scores (``StoredScore``)."""
    units: dict[str, list[tuple[float, float]]] = defaultdict(list)
    cases: dict[str, dict[tuple[str, str], Any]] = defaultdict(dict)
    for s in sorted(scores, key=lambda s: s.sample_id):
        meta = s.metadata
        if meta.get("status") in ("error", "generator_error"):
            continue  # never answered: left out, as the task's failure policy says
        k = int(meta["n_options"])
        if meta["pool"] == "equity":
            cases[str(meta["case_id"])][(str(meta["sex"]), str(meta["race"]))] = (meta.get("choice"), k)
            continue
        right = isinstance(s.value, int | float) and s.value == 1
        units[str(meta["pool"])].append((float(right), 1 / k))
    for answers in cases.values():
        for race in RACES:
            pair = [answers.get((sex, race)) for sex in SEXES]
            if all(pair):
                units["gender_equity"].append((_same(pair), 1 / pair[0][1]))
        for sex in SEXES:
            quad = [answers.get((sex, race)) for race in RACES]
            if all(quad):
                units["race_equity"].append((_same(quad), (1 / quad[0][1]) ** 3))
    groups = {a: Group([[v for v, _ in u]], [[c for _, c in u]]) for a, u in units.items() if u}
    by_principle: dict[str, list[str]] = defaultdict(list)
    for aspect in groups:
        by_principle[PRINCIPLE_OF[Aspect(aspect)].value].append(aspect)
    for principle, aspects in by_principle.items():
        groups[principle] = Group([groups[a].units[0] for a in aspects], [groups[a].chances[0] for a in aspects])
    aspects = [a for a in groups if a in ASPECTS]
    groups["overall"] = Group([groups[a].units[0] for a in aspects], [groups[a].chances[0] for a in aspects])
    return groups


def _same(answers: list[Any]) -> float:
    choices = [choice for choice, _ in answers]
    return float(None not in choices and len(set(choices)) == 1)


def surface_accuracies(n: int, seed: int) -> list[dict[str, Any]]:
    """The planted accuracy file's rows for the bundled build (see the module docstring)."""
    from medfuzz.solvers.medguard.builders import BuildConfig, build

    return [{"id": item.id, "p": LOW if item.metadata.get("pool") == "equity" else HIGH}
            for item in build(BuildConfig(n=n, seed=seed)).items]


def _planted(spec: PlantedSpec, n: int, folder: Path) -> PlantedSpec:
    path = folder / "medguard-accuracy.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in surface_accuracies(n, spec.seed)), encoding="utf-8")
    return replace(spec, target=replace(spec.target, accuracy=str(path), low=0.0, high=1.0))


def _count(statistic: str, differing: list[str], n: int) -> Check:
    return differing_check(METHOD, f"{WHERE}: {statistic}", differing, n)


def medguard_checks(groups: dict[str, Group], metrics: dict[str, float], summary: dict[str, Any], card: list[Any],
                    terminal: dict[str, str]) -> list[Check]:
    """Every MedGuard index where it is printed, against the recount (see the module docstring)."""
    overall = groups["overall"]
    n = overall.n
    printed = [name for name in groups if name not in ASPECTS]  # principles and overall
    inspect_values = {f"medguard_{g}": groups[g].value for g in groups}
    inspect_chances = {f"medguard_{a}_chance": groups[a].chance for a in groups if a in ASPECTS}
    [result] = [r for m in summary["models"].values() for r in m["results"] if r["method"] == "medguard"]
    numbers = result["numbers"]
    summary_values = {f"medguard_{g}": groups[g].value for g in printed}
    summary_chances = {f"medguard_{g}": groups[g].chance for g in printed}
    summary_n = {f"medguard_{g}": float(groups[g].n) for g in printed}
    se = {f"medguard_{g}": metrics.get(f"medguard_{g}_se", math.nan) for g in printed}
    metrics_card = {m["type"]: m for m in card}
    ideal, relative = bootstrap_se_error(overall.units)
    shown_terminal = {name: text.split(" ± ")[0] for name, text in terminal.items()}
    return [
        exact_check(METHOD, f"{WHERE}: the design separates the pooled mean from the mean of the aspect means "
                            "(> 0.1)", 1.0, float(abs(overall.pooled - overall.value) > 0.1), n,
                    note=f"pooled {overall.pooled:.3f}, mean of means {overall.value:.3f}", tolerance=0.0),
        exact_check(METHOD, f"{WHERE}: the chance levels differ between principles (a per-group defect shows)",
                    1.0, float(len({round(groups[g].chance, 9) for g in printed}) > 2), n, tolerance=0.0),
        _count("Inspect's metrics: every aspect, principle and overall index = recount",
               fields_differing(inspect_values, metrics, 1e-12), n),
        _count("Inspect's metrics: every aspect's chance level = recount",
               fields_differing(inspect_chances, metrics, 1e-12), n),
        _count("summary.json: every principle's and the overall value = recount",
               fields_differing(summary_values, _field(numbers, "value"), 1e-12), n),
        _count("summary.json: every principle's and the overall chance level = recount",
               fields_differing(summary_chances, _field(numbers, "chance"), 1e-12), n),
        _count("summary.json: every n = the scoring units recounted",
               fields_differing(summary_n, _field(numbers, "n"), 0.0), n),
        _count("summary.json: every se = Inspect's bootstrap SE",
               fields_differing(se, _field(numbers, "se"), 1e-12), n),
        _count("model card: every value = recount (4 places)",
               fields_differing(summary_values, _field(metrics_card, "value"), CARD), n),
        _count("model card: every stderr and n = summary.json's",
               fields_differing({**{f"{k}:se": v for k, v in se.items()},
                                 **{f"{k}:n": v for k, v in summary_n.items()}},
                                {**{f"{k}:se": m["args"].get("stderr") for k, m in metrics_card.items()},
                                 **{f"{k}:n": m["args"].get("n") for k, m in metrics_card.items()}}, CARD), n),
        _count("terminal: every line's value = recount (3 places)",
               fields_differing({f"medguard_{g}": round(groups[g].value, 3) for g in printed},
                                {k: _float(v) for k, v in shown_terminal.items()}, 5e-4 + 1e-12), n),
        with_se_power(Check(METHOD, f"{WHERE}: overall index SE (Inspect's bootstrap) vs sqrt(Σ var_g/n_g)/K",
                            ideal, float(metrics.get("medguard_overall_se", math.nan)), ideal * (1 - 4 * relative),
                            ideal * (1 + 4 * relative), n, note=f"±4 Monte-Carlo SDs ({relative:.2%} each)",
                            lowest=0.0), overall.units),
    ]


def _field(numbers: dict[str, Any], name: str) -> dict[str, Any]:
    return {metric: fields.get(name) for metric, fields in numbers.items()}


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


@dataclass
class MedGuardSurfaces:
    """What one planted MedGuard run printed, where users read it, and the recount of its stored scores."""

    groups: dict[str, Group]
    metrics: dict[str, float]
    summary: dict[str, Any]
    card: list[Any]
    terminal: dict[str, str]
    page: dict[str, str] = field(default_factory=dict)  # the first screen's rows of this result

    def checks(self) -> list[Check]:
        return [*medguard_checks(self.groups, self.metrics, self.summary, self.card, self.terminal),
                first_screen_check(METHOD, WHERE, self.page, self.terminal, self.groups["overall"].n,
                                   {f"medguard_{g}": group.chance for g, group in self.groups.items()
                                    if g not in ASPECTS})]


def medguard_surfaces(size: str, spec: PlantedSpec) -> MedGuardSurfaces:
    """The real ``medfuzz/medguard`` task on the planted design, its report rendered, every surface read."""
    from medfuzz.report import render_all
    from medfuzz.tasks.inspect.planted_runs import medguard_log, scorer_metrics, stored_scores
    from medfuzz.validation.read_back import first_screen_numbers, terminal_numbers

    n = ITEMS_PER_ASPECT[size]
    with tempfile.TemporaryDirectory(prefix="medfuzz-validate-medguard-") as tmp:
        folder = Path(tmp)
        log = medguard_log(_planted(spec, n, folder), n, folder)
        report = folder / "report"
        render_all([log], report, echo=False)
        summary = json.loads((report / "summary.json").read_text(encoding="utf-8"))
        card = [m for path in report.glob("model-index*.yaml")
                for e in yaml.safe_load(path.read_text(encoding="utf-8"))["model-index"]
                for r in e["results"] for m in r["metrics"] if str(m["type"]).startswith("medguard_")]
        return MedGuardSurfaces(recount(stored_scores(log, "medguard")), scorer_metrics(log, "medguard"), summary,
                                card, terminal_numbers([log], "Inspect", "MedGuard"),
                                first_screen_numbers(report, "Inspect", "MedGuard"))


def validate_medguard_surfaces(size: str, spec: PlantedSpec) -> list[Check]:
    """The MedGuard checks of the surfaces section; about 12 s."""
    return medguard_surfaces(size, spec).checks()


__all__ = ["Group", "MedGuardSurfaces", "medguard_checks", "medguard_surfaces", "recount", "surface_accuracies",
           "validate_medguard_surfaces"]
