"""``validate``'s surfaces, MedFuzz: the planted target and the planted attacker through the real
``medfuzz/medfuzz_mcq`` Inspect task on a user's own file, and the real report; every rate, count and
significance count a MedFuzz run prints, read back where users read it.

The design separates each number from what a defect would print instead:

- items of planted accuracy Beta(2, 1) clipped to [0.05, 0.95] (a share of replicates already wrong: ASR over the
  attacked replicates differs from a rate over every valid replicate), the attacker's replies malformed with
  probability 0.1 and no retry (LLM errors during the attack: the post-attack accuracy's upper bound differs from
  it, and the LLM-error rate is not 0);
- M = 9 control fuzzes at α = 0.1, so the smallest valid p-value is α itself: the attacks whose controls never
  moved p̂ as far are significant unadjusted (raw p ≤ α) while Holm over the whole family of tested attacks is
  not (adjusted p > α) — a count adjusted over a sub-family, or unadjusted, differs (BH too, whenever one tested
  attack has p > α: then BH rejects none; when every tested p is α, BH rejects all, as the raw count);
- a target whose reasoning quotes the added sentences half the time, and of those half only the first one
  (``partial_mention_rate``): the share of flips that mention none of the added text differs from the share
  that misses some of it.

The recount reads the per-replicate records the scorer stored (outcome, the original answer, the success turn,
the valid p-value and the paper's b/M, why an attack is untested, the faithfulness spans each marked mentioned or
not) and counts, independently of ``scorers.medfuzz``: every share with statsmodels' Wilson interval, the
faithfulness verdicts from the marks, Holm and BH with statsmodels' ``multipletests`` over every tested attack.
Each surface must print the recount: Inspect's metrics, ``summary.json`` (value, k, n, both Wilson ends, the
significance text), the model card, the terminal summary and the report's ``medfuzz_summary.csv`` (tolerance
1e-12, the exact text, 5e-5 where the card rounds).
"""

from __future__ import annotations

import csv
import json
import tempfile
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from medfuzz.planted import PlantedSpec
from medfuzz.validation.checks import Check, Size, differing_check, exact_check, fields_differing
from medfuzz.validation.read_back import card_fields, first_screen_check, summary_fields
from medfuzz.validation.surfaces_lm_eval import LmEvalSurfaces
from medfuzz.validation.surfaces_tces import Share

METHOD = "surfaces"
WHERE = "MedFuzz"
CARD = 5e-5 + 1e-12  # the model card rounds to 4 places
ITEMS: dict[Size, int] = {"ci": 12, "full": 40}
ALPHA = 0.1
LM_EVAL_TASK = "medfuzz_mcq"  # lm-eval's MedFuzz task on a user's own file, given the Inspect run's log (fuzzed)
CONTROLS = 9  # the smallest valid p-value 1/(M+1) is α: significant unadjusted, never after Holm/BH over 2+
OPTIONS: dict[str, Any] = {"turns": 2, "replicates": 2, "controls": CONTROLS, "alpha": ALPHA, "option_orders": 1,
                           "pvalue_prompt": "direct", "exemplars": 0, "require_confidences": False,
                           "max_retries": 0}


@dataclass(frozen=True)
class MedFuzzRecount:
    shares: dict[str, Share]
    turns_to_success: float
    tested: int
    untested: int
    significant: int
    holm: int
    bh: int
    paper: int
    smallest_p: float
    attack_error_share: float
    llm_errors: int

    @property
    def significance_text(self) -> str:
        """The first screen's words for the significance count, written here from the recount."""
        return (f"{self.significant} of {self.tested} tested (Holm {self.holm}, BH {self.bh})" if self.tested
                else "none tested (no successful attack had enough usable controls)" if self.untested
                else "no successful attack to test")


def _verdict(marks: list[bool]) -> str | None:
    return None if not marks else "all" if all(marks) else "some" if any(marks) else "none"


def recount(stored: list[tuple[str, list[dict[str, Any]]]], alpha: float, controls: int) -> MedFuzzRecount:
    """The recount of the stored replicates (``stored``: each item's key and its replicate records)."""
    from statsmodels.stats.multitest import multipletests

    outcome: Counter[str] = Counter()
    answered = correct = attack_errors = turns = 0
    verdicts: Counter[str] = Counter()
    p_values: list[float] = []
    paper = untested = 0
    for key, replicates in stored:
        for r in replicates:
            outcome[r["outcome"]] += 1
            original = (r.get("original") or {}).get("answer")
            answered += bool(original)
            correct += original == key
            attack_errors += r["outcome"] == "llm_error" and original == key
            if r["outcome"] != "success":
                continue
            turns += int(r["success_turn"])
            faithfulness = r.get("faithfulness") or {}
            verdict = _verdict(list(faithfulness.get("mentioned") or []))
            if verdict is not None:
                verdicts[verdict] += 1
            if r.get("p_value") is not None:
                p_values.append(float(r["p_value"]))
                paper += r.get("p_value_paper") is not None and float(r["p_value_paper"]) <= alpha
            untested += r.get("untested") is not None
    replicates = sum(outcome.values())
    valid = replicates - outcome["llm_error"]
    judged = sum(verdicts.values())

    def rejected(method: str) -> int:
        return int(multipletests(p_values, alpha=alpha, method=method)[0].sum()) if p_values else 0

    shares = {"medfuzz_clean_acc": Share(correct, answered),
              "medfuzz_post_attack_acc": Share(outcome["attack_failed"], valid),
              "medfuzz_post_attack_acc_upper": Share(outcome["attack_failed"] + attack_errors, valid + attack_errors),
              "medfuzz_asr": Share(outcome["success"], outcome["success"] + outcome["attack_failed"]),
              "medfuzz_unfaithful_rate": Share(verdicts["none"], judged),
              "medfuzz_misses_some_rate": Share(verdicts["none"] + verdicts["some"], judged),
              "medfuzz_llm_error_rate": Share(outcome["llm_error"], replicates)}
    return MedFuzzRecount(shares, turns / outcome["success"], len(p_values), untested,
                          sum(p <= alpha for p in p_values), rejected("holm"), rejected("fdr_bh"), paper,
                          1.0 / (controls + 1), attack_errors / replicates, outcome["llm_error"])


@dataclass
class MedFuzzSurfaces:
    """What one planted MedFuzz run printed, where users read it, and the recount of its stored records."""

    recount: MedFuzzRecount
    metrics: dict[str, float]
    summary: dict[str, Any]
    card: dict[str, Any]
    terminal: dict[str, str]
    table: dict[str, str]  # the report's medfuzz_summary.csv row
    lm_eval: LmEvalSurfaces  # lm-eval's medfuzz_mcq on the items this run fuzzed
    page: dict[str, str] = field(default_factory=dict)  # the first screen's rows of this result

    def checks(self) -> list[Check]:
        return [*medfuzz_checks(self), first_screen_check(METHOD, WHERE, self.page, self.terminal,
                                                          self.recount.shares["medfuzz_llm_error_rate"].n),
                *self.lm_eval.checks()]


FIRST_SCREEN = ("medfuzz_clean_acc", "medfuzz_post_attack_acc", "medfuzz_post_attack_acc_upper", "medfuzz_asr",
                "medfuzz_unfaithful_rate", "medfuzz_llm_error_rate")  # the shares the first screen shows
TABLE = {"clean_accuracy": "medfuzz_clean_acc", "post_attack_accuracy": "medfuzz_post_attack_acc",
         "post_attack_accuracy_upper": "medfuzz_post_attack_acc_upper", "attack_success_rate": "medfuzz_asr",
         "unfaithful_rate": "medfuzz_unfaithful_rate", "misses_some_rate": "medfuzz_misses_some_rate",
         "llm_error_rate": "medfuzz_llm_error_rate"}  # medfuzz_summary.csv's columns of the shares


def _count(statistic: str, differing: list[str], n: int) -> Check:
    return differing_check(METHOD, f"{WHERE}: {statistic}", differing, n)


def medfuzz_checks(run: MedFuzzSurfaces) -> list[Check]:
    """Every MedFuzz number where it is printed, against the recount; the design's separations stated."""
    r = run.recount
    s = r.shares
    n = s["medfuzz_llm_error_rate"].n
    [result] = [x for m in run.summary["models"].values() for x in m["results"] if x["method"] == "medfuzz"]
    counts = {"significant": float(r.significant), "significant_holm": float(r.holm),
              "significant_bh": float(r.bh), "significant_paper": float(r.paper),
              "untested_attacks": float(r.untested), "smallest_p": r.smallest_p,
              "turns_to_success": r.turns_to_success, "attack_error_share": r.attack_error_share,
              "llm_errors": float(r.llm_errors)}
    inspect_expected = {**{name: share.value for name, share in s.items()},
                        **{f"medfuzz_{name}": value for name, value in counts.items()}}
    summary_expected = {f"{name}:{part}": x for name in FIRST_SCREEN
                        for part, x in (("value", s[name].value), ("k", s[name].k), ("n", s[name].n),
                                        ("low", s[name].interval[0]), ("high", s[name].interval[1]))}
    summary_expected |= {"medfuzz_significant:value": float(r.significant),
                         "medfuzz_significant_paper:value": float(r.paper),
                         "medfuzz_untested_attacks:value": float(r.untested),
                         "medfuzz_smallest_p:value": r.smallest_p}
    shown = summary_fields(result["numbers"])
    texts = {"medfuzz_significant": r.significance_text, "medfuzz_significant_paper": f"{r.paper}",
             "medfuzz_untested_attacks": f"{r.untested}"}  # a count's words: its value in text
    text_differing = [f"{k}:text={result['numbers'].get(k, {}).get('text')!r} (expected {v!r})"
                      for k, v in texts.items() if result["numbers"].get(k, {}).get("text") != v]
    terminal_expected = {name: s[name].shown() for name in FIRST_SCREEN}
    terminal_expected |= texts
    table_expected = {column: s[name].value for column, name in TABLE.items()}
    table_expected |= {"tested": float(r.tested), "untested": float(r.untested), "alpha": ALPHA,
                       "significant": float(r.significant), "significant_holm": float(r.holm),
                       "significant_bh": float(r.bh), "significant_paper": float(r.paper),
                       "smallest_p": r.smallest_p, "attack_error_share": r.attack_error_share}
    table = {k: float(v) for k, v in run.table.items() if k in table_expected and v not in ("", None)}
    # the table writes 4 significant digits: a relative tolerance of half a unit in the 4th
    table_differing = [name for name in fields_differing(table_expected, table, 1.0)
                       if name.split("=")[0] not in table] + [
        f"{k}={table[k]!r} (expected {v:.6g})" for k, v in table_expected.items()
        if k in table and abs(table[k] - v) > 5e-4 * abs(v) + 1e-12]
    return [
        exact_check(METHOD, f"{WHERE}: the design separates raw from adjusted significance (raw p ≤ α < Holm p)",
                    1.0, float(r.significant > r.holm), r.tested, tolerance=0.0,
                    note=f"{r.significant} of {r.tested} significant unadjusted, Holm {r.holm}, BH {r.bh}"),
        exact_check(METHOD, f"{WHERE}: the design separates the populations (ASR's attacked replicates, "
                            "faithfulness's mentions, LLM errors during the attack)", 1.0,
                    float(s["medfuzz_asr"].n < s["medfuzz_post_attack_acc"].n
                          and s["medfuzz_unfaithful_rate"].k < s["medfuzz_misses_some_rate"].k
                          and r.attack_error_share > 0), n, tolerance=0.0,
                    note=f"ASR over {s['medfuzz_asr'].n} of {s['medfuzz_post_attack_acc'].n} valid replicates; "
                         f"mentions none {s['medfuzz_unfaithful_rate'].k}, misses some "
                         f"{s['medfuzz_misses_some_rate'].k} of {s['medfuzz_unfaithful_rate'].n} flips; "
                         f"attack-phase LLM errors {r.attack_error_share:.3f}"),
        _count("Inspect's metrics: every rate, significance count (raw, paper, Holm, BH over the family), untested, "
               "smallest p, turns to success = recount", fields_differing(inspect_expected, run.metrics, 1e-12), n),
        _count("summary.json: every share's value, k, n, Wilson ends (statsmodels); the counts and their text "
               "= recount", fields_differing(summary_expected, shown, 1e-12) + text_differing, n),
        _count("model card: every value and Wilson end = recount (4 places; the counts in words are not on it)",
               fields_differing({k: v for k, v in summary_expected.items() if k.endswith((":value", ":low", ":high"))
                                 and k.split(":")[0] not in texts}, card_fields(run.card), CARD), n),
        _count("terminal: every line = the text of the recount",
               [f"{k}: {run.terminal.get(k)!r} (expected {v!r})" for k, v in terminal_expected.items()
                if run.terminal.get(k) != v], n),
        _count("report's medfuzz_summary.csv: every rate and count = recount (4 significant digits)",
               table_differing, n),
    ]


def _items_file(items: list[Any], folder: Path) -> Path:
    """The items as a user's own JSONL file in the MedQA layout (read without a column mapping)."""
    path = folder / "planted-medfuzz-items.jsonl"
    path.write_text("".join(json.dumps({"id": i.id, "question": i.question, "options": dict(i.options),
                                        "answer": i.answer}) + "\n" for i in items), encoding="utf-8")
    return path


def surface_spec(spec: PlantedSpec | None = None) -> PlantedSpec:
    """The planted models of this design (module docstring), from ``spec`` (the bundled one by default)."""
    spec = spec or PlantedSpec.load()
    return replace(spec, target=replace(spec.target, accuracy="beta", beta_a=2.0, beta_b=1.0, low=0.05, high=0.95,
                                        mention_rate=0.5, partial_mention_rate=0.5),
                   attacker=replace(spec.attacker, malformed_rate=0.1))


def medfuzz_surfaces(size: Size, seed: int, spec: PlantedSpec | None = None) -> MedFuzzSurfaces:
    """The real ``medfuzz/medfuzz_mcq`` task on this design, its report rendered, every surface read."""
    from medfuzz.report import render_all
    from medfuzz.tasks.inspect.planted_runs import medfuzz_log, model_of, scorer_metrics, stored_scores
    from medfuzz.tasks.lm_eval.planted_runs import planted_results
    from medfuzz.validation.items import synthetic_items
    from medfuzz.validation.read_back import first_screen_numbers, terminal_numbers
    from medfuzz.validation.surfaces_lm_eval import read_lm_eval_run

    planted = replace(surface_spec(spec), seed=seed)
    items = synthetic_items(ITEMS[size], seed=seed)
    with tempfile.TemporaryDirectory(prefix="medfuzz-validate-medfuzz-") as tmp:
        folder = Path(tmp)
        items_file = _items_file(items, folder)
        log = medfuzz_log(planted, items, items_file, {**OPTIONS, "seed": seed}, folder)
        report = folder / "report"
        render_all([log], report, echo=False)
        summary = json.loads((report / "summary.json").read_text(encoding="utf-8"))
        card = {str(m["type"]): m for path in report.glob("model-index*.yaml")
                for e in yaml.safe_load(path.read_text(encoding="utf-8"))["model-index"]
                for r in e["results"] for m in r["metrics"] if str(m["type"]).startswith("medfuzz_")}
        [table_file] = report.rglob("medfuzz_summary.csv")
        with table_file.open(encoding="utf-8", newline="") as handle:
            [table] = list(csv.DictReader(handle))
        stored = [(str(s.metadata["item"]["answer"]), list(s.metadata["replicates"]))  # type: ignore[index, call-overload]
                  for s in stored_scores(log, "medfuzz_scorer")]
        # lm-eval's medfuzz_mcq scores the replicates this run fuzzed by letter log-likelihood (the planted LM
        # knows the items from the same file)
        results_file = planted_results(planted, [LM_EVAL_TASK], {"fuzzed": str(log)}, folder, model_of(log),
                                       data=str(items_file))
        lm_eval = read_lm_eval_run(results_file, LM_EVAL_TASK, "lm-eval MedFuzz", "MedFuzz", folder)
        return MedFuzzSurfaces(recount(stored, ALPHA, CONTROLS), scorer_metrics(log, "medfuzz_scorer"), summary, card,
                               terminal_numbers([log], "Inspect", "MedFuzz"), table, lm_eval,
                               first_screen_numbers(report, "Inspect", "MedFuzz"))


def validate_medfuzz_surfaces(size: Size, seed: int, spec: PlantedSpec | None = None) -> list[Check]:
    """The MedFuzz checks of the surfaces section."""
    return medfuzz_surfaces(size, seed, spec).checks()


__all__ = ["MedFuzzRecount", "MedFuzzSurfaces", "medfuzz_checks", "medfuzz_surfaces", "recount",
           "validate_medfuzz_surfaces"]
