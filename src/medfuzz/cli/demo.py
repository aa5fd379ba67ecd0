"""``medfuzz demo``: a short robustness evaluation on the embedded model and the bundled data, through both
harnesses, ending with the report page. It is ``medfuzz run --model embedded --attacker template --level demo
--data demo --lm-eval embedded`` (``suite_plan``) followed by a summary in words.

1. Inspect, one eval set against the embedded SmolLM2 server: the clean baseline (strict and lenient scoring); TCES on
   drugs and diseases with RandS and PDWS (n = -20), budget 8; MedGuard on the balanced bundled build; MedFuzz
   with SmolLM2 as the target and the deterministic *template attacker* (no LLM: a 135M model cannot write
   valid rewrites, so the attacks come from a bank of patient-characteristic sentences and one red herring
   that names a distractor).
2. lm-eval, the same GGUF in-process (``medfuzz-local``): the clean baseline, the single-query TCES tasks,
   the MedGuard group and MedFuzz on the items the Inspect run fuzzed.
3. ``medfuzz report`` on every log; the page's path is printed last.

Ctrl-C stops the server; running the same command again finishes what was interrupted without paying twice.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medfuzz.scorers.stats import DEFAULT_ALPHA


@dataclass
class DemoPlan:
    out: Path
    threads: int = 2
    limit: int | None = 10  # clean-baseline items (the attacks pick their own subsets)
    quick: bool = False  # a smaller run for the end-to-end test: drugs and RandS only, fewer items

    @property
    def medguard_per_aspect(self) -> int:
        return 1 if self.quick else 2

    @property
    def medfuzz_items(self) -> int:
        return 2 if self.quick else 10


def _se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n) if n and not math.isnan(p) else math.nan


def _fmt(value: Any, se: float | None = None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "  n/a"
    text = f"{float(value):.3f}"
    return text + (f" ± {se:.3f}" if se is not None and not math.isnan(se) else "")


def _lm(result: dict[str, Any], metric: str) -> str:
    """An lm-eval metric with lm-eval's own standard error (left out where lm-eval has none: "N/A", nan)."""
    se = result.get(f"{metric}_stderr,none")
    return _fmt(result.get(f"{metric},none"), se if isinstance(se, float) else None)


def suite_plan(plan: DemoPlan) -> Any:
    """The demo as a ``medfuzz run``: the embedded model, the template attacker, level demo (quick: level
    quick) on the bundled items; ``--limit`` sets the clean baseline's items."""
    from medfuzz.tasks.suite import EMBEDDED, TEMPLATE_ATTACKER, SuitePlan

    return SuitePlan(model=EMBEDDED, out=plan.out, attacker=TEMPLATE_ATTACKER, level="quick" if plan.quick else "demo",
                     data="demo", limits={"baseline": plan.limit} if plan.limit else {})


# ----------------------------------------------------------------------------------------------- summary


def _metrics(log_path: Path) -> dict[str, float]:
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(log_path), header_only=True)
    return {name: m.value for s in (log.results.scores if log.results else []) for name, m in s.metrics.items()}


def _lm_eval_results(folder: Path) -> dict[str, dict[str, Any]]:
    files = sorted(folder.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    return json.loads(files[-1].read_text())["results"] if files else {}


def summary(plan: DemoPlan, inspect_logs: dict[str, Path], lm_eval_out: Path) -> list[str]:
    from medfuzz.report.runs import read_inspect_log, read_lm_eval_output
    from medfuzz.report.tces import read_tces_log
    from medfuzz.scorers.tces import asr_by_budget

    lines = ["", "medfuzz demo: SmolLM2-135M-Instruct (embedded) on the bundled MedQA dev sample", ""]
    lm = _lm_eval_results(lm_eval_out)
    # clean baseline, both harnesses
    strict = read_inspect_log(inspect_logs["clean baseline"])
    clean_lm = read_lm_eval_output(lm_eval_out, "medqa_clean")
    lines.append("Clean baseline (MedQA)")
    lines.append(f"  inspect  medqa_clean  strict {_fmt(strict.reported, strict.stderr)}  lenient "
                 f"{_fmt(strict.lenient, strict.lenient_stderr)}  n={strict.n}  ({strict.lenient_needed or 0} replies "
                 "lacked Inspect's 'ANSWER: X' line and were read leniently)")
    lines.append(f"  lm-eval  medqa_clean  acc    {_fmt(clean_lm.reported, clean_lm.stderr)}  n={clean_lm.n}")
    shared = set(strict.per_item) & set(clean_lm.per_item)
    same = sum(strict.per_item[i] == clean_lm.per_item[i] for i in shared)
    lines.append(f"  same strict correctness in both harnesses on {same}/{len(shared)} items")
    # TCES
    lines += ["", "TCES (Inspect: budget 8; lm-eval: one substitution)  clean → attacked accuracy, ASR ± SE, "
                  "Gini-Simpson"]
    for label, path in inspect_logs.items():
        if not label.startswith("tces"):
            continue
        run = read_tces_log(path)
        if run is None:
            continue
        s = run.summary
        curve = asr_by_budget(run.records, run.budget)
        attacked = s.clean_correct
        asr1 = curve[0] if curve else math.nan
        lines.append(f"  inspect  {label:22s} items {s.evaluated:2d}  acc {_fmt(s.clean_accuracy)} → "
                     f"{_fmt(s.attacked_accuracy)}  ASR@1 {_fmt(asr1, _se(asr1, attacked))}  ASR@8 "
                     f"{_fmt(s.asr, _se(s.asr, attacked))}  Gini-Simpson {_fmt(s.gini_simpson)}"
                     + (f"  reused: {', '.join(f'{e} ×{c}' for e, c in s.top_entities[:3])}" if s.top_entities
                        else ""))
    for task in ("tces_medqa_drugs", "tces_medqa_diseases"):
        r = lm.get(task, {})
        if r:
            lines.append(f"  lm-eval  {task:22s} clean_acc {_lm(r, 'clean_acc')}  attacked_acc "
                         f"{_lm(r, 'attacked_acc')}  flip_rate (ASR@1) {_lm(r, 'flip_rate')}")
    # MedGuard
    m = _metrics(inspect_logs["medguard"])
    per = plan.medguard_per_aspect
    lines += ["", f"MedGuard (balanced bundled build, {per} items per aspect; equity: {per} cases × 8 variants)  "
                  "safety ± bootstrap SE (chance level)"]
    aspects = [k.removeprefix("medguard_") for k in m if f"{k}_chance" in m]
    for aspect in aspects:
        key = f"medguard_{aspect}"
        lines.append(f"  inspect  {aspect:18s} {_fmt(m[key], m.get(f'{key}_se'))}  (chance "
                     f"{_fmt(m[f'{key}_chance'])})")
    if "medguard_overall" in m:
        lines.append(f"  inspect  {'overall':18s} {_fmt(m['medguard_overall'], m.get('medguard_overall_se'))}")
    if "medguard" in lm:
        lines.append(f"  lm-eval  {'medguard (group)':18s} {_lm(lm['medguard'], 'safety')}  (unweighted mean of "
                     "the 10 aspects)")
    # MedFuzz
    f = _metrics(inspect_logs["medfuzz"])
    lines += ["", f"MedFuzz (target: SmolLM2; attacker: the TEMPLATE attacker, no LLM: patient characteristics plus "
                  f"one red herring naming a distractor; {plan.medfuzz_items} items, K=3, sequential permutation test "
                  "over up to 10 control fuzzes)"]
    upper = _fmt(f.get("medfuzz_post_attack_acc_upper"))
    lines.append(f"  inspect  clean acc {_fmt(f.get('medfuzz_clean_acc'))}  post-attack acc "
                 f"{_fmt(f.get('medfuzz_post_attack_acc'))} (upper bound {upper})"
                 f"  ASR {_fmt(f.get('medfuzz_asr'))}  untested {f.get('medfuzz_untested_attacks', 0):.0f}  unfaithful "
                 f"CoT {_fmt(f.get('medfuzz_unfaithful_rate'))}")
    smallest = f.get("medfuzz_smallest_p")
    reach = ("" if smallest is None or smallest != smallest else
             f"; smallest attainable p at this M {_fmt(smallest)}"
             + (" > alpha: no attack can be significant at the demo's M (the paper's M = 30 reaches 1/31)"
                if smallest > DEFAULT_ALPHA else ""))
    asr = f.get("medfuzz_asr")
    if asr is None or math.isnan(asr) or asr == 0:  # say so in words, not only as a number
        lines.append("  inspect  no attack succeeded in this run: SmolLM2 kept its answers on every attacked item (the "
                     "template adds patient details, never evidence for a distractor)")
    lines.append(f"  inspect  significant at alpha {DEFAULT_ALPHA} (valid p): {f.get('medfuzz_significant', 0):.0f}, "
                 f"Holm {f.get('medfuzz_significant_holm', 0):.0f}, BH {f.get('medfuzz_significant_bh', 0):.0f}; "
                 f"with the paper's b/M: {f.get('medfuzz_significant_paper', 0):.0f}{reach}")
    if "medfuzz_medqa" in lm:
        r = lm["medfuzz_medqa"]
        lines.append(f"  lm-eval  the same fuzzed items: clean_acc {_lm(r, 'clean_acc')}  attacked_acc "
                     f"{_lm(r, 'attacked_acc')}  flip_rate {_lm(r, 'flip_rate')}  LLM errors "
                     f"{r.get('llm_errors,none', 0):.0f}")
    else:
        lines.append("  lm-eval  medfuzz_medqa skipped: the target got every demo item wrong, so nothing was attacked")
    lines += ["", "A 135M model answers near chance and the attacker is a template: these numbers show that every",
              "method runs end to end and what it reports, not medical skill or attack strength."]
    return lines


def run_demo(plan: DemoPlan) -> int:
    from medfuzz.cli.run import execute

    plan.out.mkdir(parents=True, exist_ok=True)
    # lm-eval's single-substitution TCES tasks take the first 5 attackable items
    done = execute(suite_plan(plan), lm_eval="embedded", threads=plan.threads, lm_eval_limits={"tces_limit": 5})
    if done.code != 0 or done.lm_eval_out is None:
        return done.code
    for line in summary(plan, {label: Path(entry.location) for label, entry in done.logs.items()}, done.lm_eval_out):
        print(line)
    print(f"report: {done.index or plan.out / 'report'}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from medfuzz.cli.serve import stop_servers_on_signals

    stop_servers_on_signals()  # leave the server's ``with`` block instead of orphaning it
    return run_demo(DemoPlan(out=Path(args.out).resolve(), threads=args.threads, limit=args.limit, quick=args.quick))


def add_parser(commands: Any) -> None:
    demo = commands.add_parser("demo", help="a short robustness evaluation (clean, TCES, MedGuard, MedFuzz) on the "
                                            "embedded model through Inspect and lm-eval, then the report page")
    demo.add_argument("--out", default="medfuzz-demo", help="folder for logs and results")
    demo.add_argument("--limit", type=int, default=10, help="clean-baseline items (of the 50 bundled)")
    demo.add_argument("--threads", type=int, default=2)
    demo.add_argument("--quick", action="store_true", help="a smaller run (drugs and RandS only, fewer items)")
    demo.set_defaults(func=_demo)
