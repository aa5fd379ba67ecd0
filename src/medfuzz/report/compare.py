"""Cross-model comparison for MedFuzz and TCES: is model B significantly more robust than model A on the same
items, and do A's successful adversarial items also fool B (transfer)?

Runs are read from Inspect logs (``medfuzz/medfuzz*``, ``medfuzz/tces*``) and lm-eval output folders
(``results_*.json`` with its ``samples_*.jsonl``; tasks ``tces_*`` and ``medfuzz_*``). Runs are grouped so that
only runs on the same items under the same attack are compared: MedFuzz by benchmark, TCES by benchmark,
entity type, sampler (n, M), budget and harness. Per group and model: the per-item *attacked correctness*
(correct on the clean item and still correct after the attack) with its mean and bootstrap SE
(``medfuzz.stats``); per pair of models: the exact two-sided McNemar test on the items both runs have,
Holm-adjusted over the pairs of the group. Items only one run has are listed per pair, never dropped silently.

MedFuzz with several replicates per item: an item counts as correct under attack only when every usable
replicate left it correct (the worst case over the attacker's tries), so the unit of the test is the item, as
McNemar needs; with one replicate this is the paper's post-attack accuracy. The paper's pooled estimate is in
the JSON beside it. lm-eval ``medfuzz_*`` runs evaluate a fuzzed file: they feed the transfer table only.

Transfer (per method): for a source run A and a model B, B's accuracy on the adversarial items of A's
successful attacks, wherever B was evaluated on exactly those items: for MedFuzz an lm-eval ``medfuzz_medqa``
run of B on A's log (matched on item id and fuzzed question text), for TCES any run of B that queried the same
substitution (item, victim, replacement; e.g. lm-eval ``tces_*`` or Inspect budget-1 runs, which draw the same
first substitution for every model). Where no such run exists, ``commands`` gives the one that produces it
(MedFuzz) or says why there is none (TCES).
"""

from __future__ import annotations

import csv
import html
import itertools
import json
import logging
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medfuzz.records.keys import METHOD_KEY, recorded_config
from medfuzz.records.lm_eval_docs import versions_correct
from medfuzz.records.methods import by_lm_eval_task
from medfuzz.report.format import html_page, markdown_tables, number, safe_cell
from medfuzz.report.log_reader import collect_logs
from medfuzz.stats import DEFAULT_ALPHA, significant

log = logging.getLogger(__name__)

OUTPUT = "attack_comparison"
Key = tuple[str, ...]  # identifies one adversarial item: (item id, fuzzed text) or (item id, victim, replacement)


def _norm(text: str) -> str:
    return " ".join(str(text).split()).lower()


@dataclass
class AttackRun:
    """One model's run of one attack on one set of items."""

    method: str  # medfuzz | tces
    group: str  # runs in the same group saw the same items under the same attack
    model: str
    harness: str
    source: Path
    clean: dict[str, bool] = field(default_factory=dict)  # per item id
    attacked: dict[str, bool] = field(default_factory=dict)  # correct clean and still correct after the attack
    excluded: dict[str, str] = field(default_factory=dict)  # item id -> why it is outside the comparison
    successes: dict[str, Key] = field(default_factory=dict)  # replicate/record id -> adversarial item it fooled
    evaluations: dict[Key, tuple[bool, bool]] = field(default_factory=dict)  # adversarial item -> (clean, adv.)
    paper_post_attack: float | None = None  # MedFuzz: the paper's pooled estimate over replicates
    fuzzed_from: str | None = None  # lm-eval medfuzz: the fuzzed file / log it evaluated
    label: str = ""

    @property
    def compared(self) -> bool:
        """Whether the run enters the accuracy / McNemar comparison (lm-eval MedFuzz runs: transfer only)."""
        return bool(self.attacked)


# ------------------------------------------------------------------------------------------- Inspect


def _medfuzz_inspect(log: Any, path: Path) -> AttackRun:
    from medfuzz.benchmarks.items import MCQItem
    from medfuzz.scorers.medfuzz import totals

    metadata = log.eval.metadata or {}
    run = AttackRun("medfuzz", f"medfuzz · {metadata.get('benchmark', '?')} · Inspect", str(log.eval.model),
                    "inspect", path)
    values = []
    for sample in log.samples or []:
        score = (sample.scores or {}).get("medfuzz_scorer")
        if score is None or not isinstance(score.value, dict):
            run.excluded[str(sample.id)] = "not scored"
            continue
        value, meta = score.value, score.metadata or {}
        item = meta.get("item") or {}
        item_id = str(item.get("id", sample.id))
        turns = int((meta.get("config") or {}).get("turns", 0))
        valid = int(value.get("valid", 0))
        if valid == 0:
            run.excluded[item_id] = "LLM error in every replicate"
            continue
        values.append(value)
        run.clean[item_id] = bool(value.get("clean_correct", 0))
        run.attacked[item_id] = int(value.get(f"correct_after_{turns}", 0)) == valid
        original = MCQItem.from_record(item) if item else None
        for story in meta.get("replicates", []):
            if story.get("outcome") == "success" and story.get("fuzzed_question") and original is not None:
                fuzzed = original.with_question(story["fuzzed_question"]).clean_question()
                run.successes[f"{item_id}#r{story.get('replicate')}"] = (item_id, _norm(fuzzed))
    if values:
        turns = max((int(k.rsplit("_", 1)[1]) for v in values for k in v if k.startswith("correct_after_")),
                    default=0)
        run.paper_post_attack = totals(values, turns)["post_attack_accuracy"]
    return run


def _tces_key(item_id: str, victim: Any, replacement: Any) -> Key:
    return (str(item_id), _norm(victim or ""), _norm(replacement or ""))


def _tces_inspect(log: Any, path: Path) -> AttackRun:
    metadata = log.eval.metadata or {}
    config = recorded_config(metadata)
    sampler = str(config.get("sampler", "?"))
    detail = {"pdws": f"n={config.get('n')}", "zoo": f"M={config.get('zoo_m')}"}.get(sampler, "")
    group = (f"tces · {metadata.get('benchmark', '?')} · {config.get('entity', '?')} · {sampler} {detail}".strip()
             + f" · B={config.get('budget')} · Inspect")
    run = AttackRun("tces", group, str(log.eval.model), "inspect", path)
    for sample in log.samples or []:
        score = (sample.scores or {}).get("tces_scorer")
        record = (score.metadata or {}).get("record") if score is not None else None
        if not record:
            run.excluded[str(sample.id)] = "not scored"
            continue
        item_id, outcome = str(record["item_id"]), record["outcome"]
        if outcome in ("no_entity", "llm_error"):
            run.excluded[item_id] = outcome
            continue
        run.clean[item_id] = outcome in ("success", "attack_failed")
        run.attacked[item_id] = outcome == "attack_failed"
        victim = (record.get("victim") or {}).get("text")
        for attempt in record.get("attempts") or []:
            if attempt.get("answer") is not None and not attempt.get("error"):
                run.evaluations[_tces_key(item_id, victim, attempt["replacement"])] = (
                    bool(record.get("clean_correct")), attempt["answer"] == record["key"])
        if outcome == "success":
            run.successes[item_id] = _tces_key(item_id, victim, record.get("replacement"))
    return run


def _inspect_run(path: Path) -> AttackRun | None:
    try:
        from medfuzz.report.log_reader import read_log

        header = read_log(path, header_only=True)
    except Exception:  # not an Inspect log: another reader's business
        return None
    method = (header.eval.metadata or {}).get(METHOD_KEY)
    if method not in ("medfuzz", "tces") or header.status != "success":
        return None
    log = read_log(path)
    return _medfuzz_inspect(log, path) if method == "medfuzz" else _tces_inspect(log, path)


# -------------------------------------------------------------------------------------------- lm-eval


def _lm_eval_model(data: dict[str, Any]) -> str:
    from medfuzz.report.runs import lm_eval_model_name

    return lm_eval_model_name(data)


def _has_samples(results_file: Path, task: str) -> bool:
    stamp = results_file.stem.removeprefix("results_")
    return any(results_file.parent.glob(f"samples_{task}_{stamp}.jsonl"))


def _samples(results_file: Path, task: str) -> list[dict[str, Any]]:
    stamp = results_file.stem.removeprefix("results_")
    found = sorted(results_file.parent.glob(f"samples_{task}_{stamp}.jsonl"))
    if not found:
        raise FileNotFoundError(f"{results_file}: no samples_{task}_{stamp}.jsonl beside it (run lm-eval with "
                                "--log_samples)")
    return [json.loads(line) for line in found[0].read_text(encoding="utf-8").splitlines() if line.strip()]


def _lm_eval_runs(path: Path) -> list[AttackRun]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return []
    if not isinstance(data, dict) or not isinstance(data.get("configs"), dict):
        return []
    model = _lm_eval_model(data)
    runs = []
    for task, config in data["configs"].items():
        metadata = (config or {}).get("metadata") or {}
        method = by_lm_eval_task(task)  # the registry says whose task it is (``Method.lm_eval_prefix``)
        kind = method.key if method is not None else None
        if kind in ("tces", "medfuzz") and not _has_samples(path, task):
            log.warning("%s: task %s has no samples file beside it (run lm-eval with --log_samples); it is left "
                        "out of the comparison", path, task)
            continue
        if kind == "tces":
            detail = " ".join(f"{k}={metadata[k]}" for k in ("sampler", "n", "seed") if k in metadata)
            run = AttackRun("tces", f"tces · {task} {detail}".strip() + " · lm-eval", model, "lm-eval", path)
            records: dict[str, dict[str, Any]] = defaultdict(dict)
            for sample in _samples(path, task):
                doc = sample["doc"]
                if "variant" in doc:  # results written before one doc held both versions (task version < 3)
                    correct = bool((sample.get("clean_acc") or {}).get("correct"))
                    records[str(doc["id"])][doc["variant"]] = (correct, doc)
                    continue
                clean, attacked = versions_correct(doc, sample["filtered_resps"])
                records[str(doc["id"])] = {"clean": (clean, doc), "attacked": (attacked, doc)}
            for item_id, variants in records.items():
                if "clean" not in variants or "attacked" not in variants:
                    run.excluded[item_id] = "clean or attacked doc missing"
                    continue
                clean, attacked = variants["clean"][0], variants["attacked"][0]
                doc = variants["attacked"][1]
                key = _tces_key(item_id, doc.get("victim"), doc.get("replacement"))
                run.clean[item_id], run.attacked[item_id] = clean, clean and attacked
                run.evaluations[key] = (clean, attacked)
                if clean and not attacked:
                    run.successes[item_id] = key
            runs.append(run)
        elif kind == "medfuzz":
            run = AttackRun("medfuzz", f"medfuzz · {task} · lm-eval", model, "lm-eval", path,
                            fuzzed_from=str(metadata.get("fuzzed") or metadata.get("medfuzz_fuzzed") or "") or None)
            for sample in _samples(path, task):
                doc = sample["doc"]
                if not doc.get("scored", True):  # a counted-only replicate (an LLM error, an outcome not asked for)
                    continue
                clean, fuzzed = versions_correct(doc, sample["filtered_resps"])
                run.evaluations[(str(doc["item_id"]), _norm(doc["fuzzed_question"]))] = (clean, fuzzed)
            runs.append(run)
    return runs


def load_runs(paths: Iterable[Path]) -> list[AttackRun]:
    """Every MedFuzz / TCES run under ``paths`` (files or folders); other files are ignored."""
    runs: list[AttackRun] = []
    for path in collect_logs([Path(p) for p in paths]):
        if path.name.startswith("results_") and path.suffix == ".json":
            runs += _lm_eval_runs(path)
        elif path.suffix in (".eval", ".json"):
            found = _inspect_run(path)
            if found is not None:
                runs.append(found)
    # one label per run: the model name, plus its folder (else its file name) where a model has several runs in
    # one group, e.g. two planted models that share a name
    same: dict[tuple[str, str], list[AttackRun]] = defaultdict(list)
    for run in runs:
        same[(run.group, run.model)].append(run)
    for members in same.values():
        folders = [r.source.parent.name for r in members]
        for run in members:
            where = run.source.parent.name if len(set(folders)) == len(folders) else run.source.name
            run.label = run.model if len(members) == 1 else f"{run.model} [{where}]"
    return runs


# ------------------------------------------------------------------------------------------- compare


@dataclass
class Comparison:
    groups: list[dict[str, Any]]
    transfer: list[dict[str, Any]]
    commands: list[str]
    alpha: float

    def to_dict(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "groups": self.groups, "transfer": self.transfer, "commands": self.commands,
                "definitions": {
                    "attacked_accuracy": "share of items answered correctly clean and still correctly after the "
                                         "attack (MedFuzz: in every usable replicate)",
                    "se": "bootstrap standard error (9,999 resamples, seed 0)",
                    "mcnemar": "exact two-sided McNemar on the items both runs have; b: only the first model "
                               "correct under attack, c: only the second; Holm over the pairs of a group",
                    "transfer_accuracy": "model B's accuracy on the adversarial items of source run A's "
                                         "successful attacks, where B was evaluated on exactly those items"}}

    def markdown(self) -> str:
        out = []
        for group in self.groups:
            out.append(f"## {group['group']}\n")
            out.append("| model | harness | items | clean acc | attacked acc ± SE | excluded | log |")
            out.append("|---|---|---|---|---|---|---|")
            for m in group["models"]:
                out.append(f"| {m['model']} | {m['harness']} | {m['items']} | {number(m['clean_accuracy'])} | "
                           f"{number(m['attacked_accuracy'], se=m['se'])} | {m['excluded']} | {m['source']} |")
            if group["pairs"]:
                out.append("")
                out.append("| model 1 | model 2 | paired items | only 1 right | only 2 right | p (exact) | p (Holm) | "
                           f"more robust, Holm p ≤ {self.alpha} | items only in 1 | items only in 2 |")
                out.append("|---|---|---|---|---|---|---|---|---|---|")
                for p in group["pairs"]:
                    out.append(f"| {p['first']} | {p['second']} | {p['n']} | {p['b']} | {p['c']} | "
                               f"{number(p['p'], spec='.4g')} | {number(p['p_holm'], spec='.4g')} | "
                               f"{p['more_robust'] or 'no significant difference'} | "
                               f"{len(p['only_first'])} | {len(p['only_second'])} |")
            out.append("")
        if self.transfer:
            out.append("## Transfer: model B on model A's successful adversarial items\n")
            out.append("| method | source A | successes of A | model B | evaluated | B correct (adversarial) | "
                       "B correct (clean) | flipped among B clean-correct | B's run |")
            out.append("|---|---|---|---|---|---|---|---|---|")
            for t in self.transfer:
                out.append(f"| {t['method']} | {t['source']} | {t['successes']} | {t['model']} | {t['evaluated']} | "
                           f"{number(t['accuracy'])} | {number(t['clean_accuracy'])} | {number(t['transfer_rate'])} | "
                           f"{t['evaluator_source']} |")
            out.append("")
        if self.commands:
            out.append("## Transfer runs still to make\n")
            out += [f"{c}\n" for c in self.commands]
        return "\n".join(out).rstrip() + "\n"


def _mean(values: list[bool]) -> float:
    return sum(values) / len(values) if values else math.nan


def _group(runs: list[AttackRun], alpha: float, seed: int) -> dict[str, Any]:
    from medfuzz.stats import bootstrap_se, holm, mcnemar, pair_items

    models = []
    for run in runs:
        attacked = [run.attacked[i] for i in sorted(run.attacked)]
        models.append({"model": run.label, "harness": run.harness, "source": str(run.source),
                       "items": len(attacked), "clean_accuracy": _mean([run.clean[i] for i in run.attacked]),
                       "attacked_accuracy": _mean(attacked), "se": bootstrap_se([float(a) for a in attacked],
                                                                                seed=seed),
                       "paper_post_attack_accuracy": run.paper_post_attack, "excluded": len(run.excluded),
                       "excluded_ids": dict(sorted(run.excluded.items()))})
    pairs = []
    for first, second in itertools.combinations(runs, 2):
        paired = pair_items(first.attacked, second.attacked)
        test = mcnemar(paired.first, paired.second, exact=True)
        pairs.append({"first": first.label, "second": second.label, "n": test.n, "b": test.b, "c": test.c,
                      "statistic": test.statistic, "p": test.pvalue, "only_first": paired.only_first,
                      "only_second": paired.only_second})
    for pair, adjusted in zip(pairs, holm([p["p"] for p in pairs]), strict=True):
        pair["p_holm"] = adjusted
        better = pair["first"] if pair["b"] > pair["c"] else pair["second"]
        pair["more_robust"] = better if significant(adjusted, alpha) else None
    everywhere = set.intersection(*(set(r.attacked) for r in runs)) if runs else set()
    return {"method": runs[0].method, "group": runs[0].group, "models": models, "pairs": pairs,
            "items_in_every_run": len(everywhere),
            "items_not_in_every_run": {r.label: sorted(set(r.attacked) - everywhere) for r in runs
                                       if set(r.attacked) - everywhere}}


def _transfer(runs: list[AttackRun]) -> tuple[list[dict[str, Any]], list[str]]:
    cells, commands = [], []
    for source in (r for r in runs if r.successes):
        wanted = set(source.successes.values())
        covered = False
        for other in runs:
            if other is source or other.model == source.model or other.method != source.method:
                continue
            hits = [other.evaluations[k] for k in wanted if k in other.evaluations]
            if not hits:
                continue
            covered = True
            clean_right = [adv for clean, adv in hits if clean]
            cells.append({"method": source.method, "source": f"{source.label} ({source.group})",
                          "source_log": str(source.source), "successes": len(wanted), "model": other.label,
                          "evaluator_source": str(other.source), "evaluated": len(hits),
                          "accuracy": _mean([adv for _, adv in hits]), "clean_accuracy": _mean([c for c, _ in hits]),
                          "transfer_rate": _mean([not adv for adv in clean_right]),
                          "not_evaluated": len(wanted) - len(hits)})
        if not covered:
            commands.append(_command(source))
    return cells, commands


def _command(source: AttackRun) -> str:
    if source.method == "medfuzz" and source.harness == "inspect":
        from medfuzz.benchmarks.registry import DEFAULT_BENCHMARK, named_in

        task = f"medfuzz_{named_in(source.group) or DEFAULT_BENCHMARK}"
        return (f"{source.label}: no run of another model on its {len(source.successes)} successful fuzzed items; "
                f"`medfuzz-lm-eval --model <B's lm-eval model> --model_args <B's args> --tasks {task} "
                f"--metadata '{json.dumps({'fuzzed': str(source.source), 'outcomes': 'success'})}' --log_samples "
                "--output_path <folder>`, then compare again with that folder")
    return (f"{source.label} ({source.group}): no other model was evaluated on the same substitutions; lm-eval "
            "tces_* runs and Inspect budget-1 runs with the same sampler and seed draw the same substitution for "
            "every model (budget > 1 searches are model-specific and no task replays them)")


def compare(paths: list[Path], alpha: float = DEFAULT_ALPHA, seed: int = 0,
            runs: list[AttackRun] | None = None) -> Comparison:
    """The comparison of the runs under ``paths`` (or of ``runs`` when given, already loaded)."""
    runs = load_runs(paths) if runs is None else runs
    if not runs:
        raise ValueError(f"no MedFuzz or TCES run (Inspect log or lm-eval results) under {[str(p) for p in paths]}")
    by_group: dict[str, list[AttackRun]] = defaultdict(list)
    for run in runs:
        if run.compared:
            by_group[run.group].append(run)
    groups = [_group(members, alpha, seed) for _, members in sorted(by_group.items())]
    transfer, commands = _transfer(runs)
    return Comparison(groups, transfer, commands, alpha)


# ------------------------------------------------------------------------------------------- writing

MODEL_COLUMNS = ["method", "group", "model", "harness", "items", "clean_accuracy", "attacked_accuracy", "se",
                 "paper_post_attack_accuracy", "excluded", "source"]
PAIR_COLUMNS = ["method", "group", "first", "second", "n", "b", "c", "p", "p_holm", "more_robust", "only_first",
                "only_second"]
TRANSFER_COLUMNS = ["method", "source", "successes", "model", "evaluated", "accuracy", "clean_accuracy",
                    "transfer_rate", "not_evaluated", "source_log", "evaluator_source"]


def _csv(path: Path, columns: list[str], rows: Iterable[dict[str, Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: safe_cell(len(row[k]) if isinstance(row.get(k), list) else row.get(k))
                             for k in columns})
    return path


def _relative(result: Comparison, out_dir: Path) -> Comparison:
    """``result`` with every log and fuzzed file it names written relative to ``out_dir`` (``index.shown_path``):
    the report page embeds these tables, and users share the folder, never their absolute paths."""
    from dataclasses import replace

    from medfuzz.report.format import shown_path

    named = {str(v) for g in result.groups for m in g["models"] for v in [m.get("source")] if v}
    named |= {str(t[k]) for t in result.transfer for k in ("source_log", "evaluator_source") if t.get(k)}
    shown = {path: shown_path(path, out_dir) for path in sorted(named, key=len, reverse=True)
             if Path(path).is_absolute()}

    def relative(value: Any) -> Any:
        if isinstance(value, str):
            for path, short in shown.items():
                value = value.replace(path, short)
            return value
        if isinstance(value, dict):
            return {k: relative(v) for k, v in value.items()}
        if isinstance(value, list):
            return [relative(v) for v in value]
        return value

    return replace(result, groups=relative(result.groups), transfer=relative(result.transfer),
                   commands=relative(result.commands))


def write(result: Comparison, out_dir: Path) -> list[Path]:
    """``attack_comparison.{md,json,html}`` and three CSVs (models, pairs, transfer) in ``out_dir``, every path in
    them relative to ``out_dir`` (``_relative``)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    result = _relative(result, out_dir)
    text = "# MedFuzz / TCES cross-model comparison\n\n" + result.markdown()
    markdown = out_dir / f"{OUTPUT}.md"
    markdown.write_text(text, encoding="utf-8")
    data = out_dir / f"{OUTPUT}.json"
    data.write_text(json.dumps(result.to_dict(), indent=1), encoding="utf-8")
    page = out_dir / f"{OUTPUT}.html"
    page.write_text(html_page("medfuzz compare", f"<div class=md>{markdown_tables(text)}</div><p class=note>"
                              f"{html.escape(result.to_dict()['definitions']['mcnemar'])}</p>"), encoding="utf-8")
    models = _csv(out_dir / f"{OUTPUT}_models.csv", MODEL_COLUMNS,
                  ({**m, "method": g["method"], "group": g["group"]} for g in result.groups for m in g["models"]))
    pairs = _csv(out_dir / f"{OUTPUT}_pairs.csv", PAIR_COLUMNS,
                 ({**p, "method": g["method"], "group": g["group"]} for g in result.groups for p in g["pairs"]))
    transfer = _csv(out_dir / f"{OUTPUT}_transfer.csv", TRANSFER_COLUMNS, result.transfer)
    return [markdown, data, page, models, pairs, transfer]


def render(log_paths: list[Path], out_dir: Path) -> list[Path]:
    """What ``medfuzz report`` calls: the comparison when some group has two models or a transfer exists."""
    runs = load_runs(log_paths)
    groups = defaultdict(set)
    for run in runs:
        if run.compared:
            groups[run.group].add(run.label)
    if not any(len(labels) > 1 for labels in groups.values()) and not any(r.fuzzed_from for r in runs):
        return []
    return write(compare(log_paths, runs=runs), out_dir)
