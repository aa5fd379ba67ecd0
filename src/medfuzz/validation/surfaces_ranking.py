"""``validate``'s surfaces, the MedGuard ranking across models: three planted models through the real
``medfuzz/medguard`` task (the hallucination aspect of the bundled build, 8 items) and the real report's comparison
(``medguard_comparison.json`` and ``.md``: every pair's McNemar test, raw and Holm-adjusted, and both rankings), at
the defaults (α = 0.05, Holm over every pair).

The design fixes each model's answers (P(key) 1 or 0 per item, no jitter): model A answers every item right, B
misses the first 6, C the first 7. So the pairs' discordant counts are (A, B) 6:0, exact two-sided McNemar p =
2/2⁶ = 0.031; (A, C) 7:0, p = 0.016; (B, C) 1:0, p = 1. Raw p ≤ α for both of A's pairs, but after Holm over the
three pairs only (A, C) (0.047), not (A, B) (0.0625): the paper's raw ranking (A beats B and C) differs from the
Holm ranking (A beats C), and a ranking that reads one pair's test, or none adjusted, differs from both.

The recount reads each model's stored per-item scores, counts every pair's discordant items, tests them with
statsmodels' exact McNemar and adjusts with statsmodels' Holm, and orders the models by their accuracy, each
beating the models it is significantly better than. The comparison file's tables and both rankings, and the
ranking text of the markdown page, must equal it (p-values to 1e-12).
"""

from __future__ import annotations

import itertools
import json
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from medfuzz.planted import PlantedSpec
from medfuzz.validation.checks import Check, differing_check, exact_check

METHOD = "surfaces"
WHERE = "MedGuard ranking"
ASPECT = "hallucination"
ITEMS = 8
ALPHA = 0.05
MISSES = {"a": 0, "b": 6, "c": 7}  # per model: how many of the aspect's items (in id order) it answers wrong


@dataclass(frozen=True)
class Pair:
    first: str
    second: str
    b: int  # only the first right
    c: int  # only the second right
    p: float
    p_holm: float


@dataclass(frozen=True)
class RankingRecount:
    accuracy: dict[str, float]
    pairs: list[Pair]
    ranking: list[tuple[str, list[str]]]  # the paper's: raw p ≤ α
    ranking_holm: list[tuple[str, list[str]]]


def recount(right: dict[str, dict[str, bool]]) -> RankingRecount:
    """``right``: model -> item -> answered right. Models best first; every pair in that order."""
    from statsmodels.stats.contingency_tables import mcnemar
    from statsmodels.stats.multitest import multipletests

    accuracy = {m: sum(r.values()) / len(r) for m, r in right.items()}
    order = sorted(right, key=lambda m: -accuracy[m])
    raw = []
    for first, second in itertools.combinations(order, 2):
        shared = sorted(set(right[first]) & set(right[second]))
        b = sum(right[first][i] and not right[second][i] for i in shared)
        c = sum(right[second][i] and not right[first][i] for i in shared)
        raw.append((first, second, b, c, float(mcnemar([[0, b], [c, 0]], exact=True).pvalue)))
    adjusted = multipletests([p for *_, p in raw], alpha=ALPHA, method="holm")[1]
    pairs = [Pair(f, s, b, c, p, float(h)) for (f, s, b, c, p), h in zip(raw, adjusted, strict=True)]

    def ranking(holm: bool) -> list[tuple[str, list[str]]]:
        beats: dict[str, list[str]] = {m: [] for m in order}
        for pair in pairs:
            if (pair.p_holm if holm else pair.p) <= ALPHA and pair.b != pair.c:
                winner, loser = (pair.first, pair.second) if pair.b > pair.c else (pair.second, pair.first)
                beats[winner].append(loser)
        return [(m, beats[m]) for m in order]

    return RankingRecount(accuracy, pairs, ranking(False), ranking(True))


@dataclass
class RankingSurfaces:
    recount: RankingRecount
    comparison: dict[str, Any]  # medguard_comparison.json
    page: str  # medguard_comparison.md

    def checks(self) -> list[Check]:
        return ranking_checks(self)


LABEL = " · basic"  # the comparison labels a run by its model and its prompt strategy (the default, basic)


def _model(label: str) -> str:
    return label.removesuffix(LABEL)


def page_differing(page: str, rankings: list[list[tuple[str, list[str]]]]) -> list[str]:
    """The numbered lines of the page's rankings section against ``rankings`` in order (the raw, then the Holm
    ranking): each line's model and the models it beats, the index printed between them left out."""
    import re

    shown = [line for line in page.partition("## Rankings")[2].splitlines() if re.match(r"\d+\. ", line)]
    expected = [(f"{rank}. {model}{LABEL}: overall ",
                 "; significantly beats " + (", ".join(b + LABEL for b in beats) if beats else "none"))
                for ranking in rankings for rank, (model, beats) in enumerate(ranking, start=1)]
    out = [f"{len(shown)} ranking lines (expected {len(expected)})"] if len(shown) != len(expected) else []
    return out + [f"{line!r} (expected {start}...{end})" for line, (start, end) in zip(shown, expected, strict=False)
                  if not (line.startswith(start) and line.endswith(end))]


def ranking_checks(run: RankingSurfaces) -> list[Check]:
    r = run.recount
    n = len(r.pairs)
    shown = {(_model(p["first"]), _model(p["second"])): p for p in run.comparison.get("mcnemar", [])}
    differing = []
    for pair in r.pairs:
        got = shown.get((pair.first, pair.second))
        if got is None:
            differing.append(f"({pair.first}, {pair.second}) missing")
            continue
        differing += [f"({pair.first}, {pair.second}).{name}={got.get(name)!r} (expected {value!r})"
                      for name, value in (("b", pair.b), ("c", pair.c), ("p", pair.p), ("p_holm", pair.p_holm))
                      if not isinstance(got.get(name), int | float) or abs(float(got[name]) - value) > 1e-12]
    rankings = []
    for key, expected in (("ranking_paper_raw_p", r.ranking), ("ranking_holm", r.ranking_holm)):
        got = [(_model(x["model"]), [_model(b) for b in x["beats"]]) for x in run.comparison.get(key, [])]
        if got != [(m, list(b)) for m, b in expected]:
            rankings.append(f"{key}={got!r} (expected {expected!r})")
    page = page_differing(run.page, [r.ranking, r.ranking_holm])
    separated = (sum(map(len, (b for _, b in r.ranking))) > sum(map(len, (b for _, b in r.ranking_holm)))
                 and any(p.p <= ALPHA < p.p_holm for p in r.pairs))
    return [
        exact_check(METHOD, f"{WHERE}: the design has a pair with raw p ≤ α < Holm p (the rankings differ)", 1.0,
                    float(separated), n, tolerance=0.0,
                    note="; ".join(f"{p.first}-{p.second} {p.b}:{p.c} p={p.p:.4g} Holm {p.p_holm:.4g}"
                                   for p in r.pairs)),
        differing_check(METHOD, f"{WHERE}: medguard_comparison.json: every pair's discordant counts, McNemar p "
                                "and Holm p (statsmodels) = recount", differing, n),
        differing_check(METHOD, f"{WHERE}: medguard_comparison.json: both rankings (raw p, Holm) = recount",
                        rankings, n),
        differing_check(METHOD, f"{WHERE}: medguard_comparison.md: both rankings' lines = recount", page, n),
    ]


def _spec(spec: PlantedSpec, name: str, misses: int, ids: list[str], every: list[str], folder: Path) -> PlantedSpec:
    """The planted model ``name``: wrong on the first ``misses`` of ``ids``, right on every other built item."""
    wrong = set(ids[:misses])
    path = folder / f"ranking-accuracy-{name}.jsonl"
    path.write_text("".join(json.dumps({"id": i, "p": 0.0 if i in wrong else 1.0}) + "\n" for i in every),
                    encoding="utf-8")
    return replace(spec, name=f"model-{name}", target=replace(spec.target, accuracy=str(path), low=0.0, high=1.0,
                                                              noise=0.0))


def ranking_surfaces(spec: PlantedSpec) -> RankingSurfaces:
    """The three planted models through the real task, the report rendered over their logs, both files read."""
    from medfuzz.report import render_all
    from medfuzz.solvers.medguard.builders import BuildConfig, build
    from medfuzz.tasks.inspect.planted_runs import medguard_model_logs, model_of, stored_scores

    built = build(BuildConfig(n=ITEMS, seed=spec.seed)).items
    ids = sorted(i.id for i in built if i.metadata.get("pool") == ASPECT)
    with tempfile.TemporaryDirectory(prefix="medfuzz-validate-ranking-") as tmp:
        folder = Path(tmp)
        specs = [_spec(spec, name, misses, ids, [i.id for i in built], folder) for name, misses in MISSES.items()]
        logs = medguard_model_logs(specs, ITEMS, ASPECT, folder)
        right = {model_of(log): {s.sample_id: s.value == 1 for s in stored_scores(log, "medguard")} for log in logs}
        report = folder / "report"
        render_all(logs, report, echo=False)
        [comparison] = report.rglob("medguard_comparison.json")
        [page] = report.rglob("medguard_comparison.md")
        return RankingSurfaces(recount(right), json.loads(comparison.read_text(encoding="utf-8")),
                               page.read_text(encoding="utf-8"))


def validate_ranking_surfaces(spec: PlantedSpec) -> list[Check]:
    """The ranking checks of the surfaces section."""
    return ranking_surfaces(spec).checks()


__all__ = ["Pair", "RankingRecount", "RankingSurfaces", "page_differing", "ranking_checks", "ranking_surfaces",
           "recount", "validate_ranking_surfaces"]
