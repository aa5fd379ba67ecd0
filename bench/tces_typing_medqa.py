"""Precision and recall of TCES entity typing on hand-labelled MedQA-USMLE dev distractors.

``tests/fixtures/tces/medqa_dev_distractor_types.jsonl``: 100 distractors drawn at random (seeded) from the 3,816
distractors of the 4-option dev split, each labelled by hand: does it name a drug (a medication, as a stand-alone
entity) / a disorder (disease, syndrome, injury or named symptom) — labelling rules in the fixture's NOTICE.md.
"before" = any vocabulary match in the option (``EntityMatcher.find``, the old typing); "after" = a match that
stands on its own (``EntityMatcher.typed``, what TCES now attacks). Builtin vocabularies (the ``vocab`` extra).
Wilson 95 % intervals from statsmodels.

    python bench/tces_typing_medqa.py [--labels ...jsonl] [--medqa ../shared/data/medqa_us_4options/dev.jsonl]

With ``--medqa`` it also counts, over every dev distractor, the options typed by each rule and lists a few that the
stand-alone rule leaves out.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from statsmodels.stats.proportion import proportion_confint

from medfuzz.samplers.entities import EntityMatcher
from medfuzz.samplers.vocab import load_vocabulary

LABELS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "tces" / "medqa_dev_distractor_types.jsonl"


def rate(hits: int, total: int) -> str:
    if total == 0:
        return "–"
    low, high = proportion_confint(hits, total, method="wilson")
    return f"{hits / total:.2f} ({hits}/{total}; {low:.2f}–{high:.2f})"


def scores(predicted: list[bool], truth: list[bool]) -> tuple[str, str]:
    tp = sum(p and t for p, t in zip(predicted, truth, strict=True))
    return rate(tp, sum(predicted)), rate(tp, sum(truth))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--labels", default=str(LABELS))
    parser.add_argument("--medqa", help="the MedQA 4-option dev.jsonl, for dev-wide counts")
    args = parser.parse_args()
    rows = [json.loads(line) for line in Path(args.labels).read_text().splitlines() if line.strip()]
    print(f"{len(rows)} hand-labelled MedQA dev distractors\n")
    print("| type | typing | precision (TP/predicted; 95 % CI) | recall (TP/labelled; 95 % CI) |")
    print("|---|---|---|---|")
    for kind in ("drugs", "diseases"):
        matcher = EntityMatcher(load_vocabulary(kind))
        truth = [bool(row[kind]) for row in rows]
        before = [bool(matcher.find(row["text"])) for row in rows]
        after = [bool(matcher.typed(row["text"])) for row in rows]
        for label, predicted in (("before (any match)", before), ("after (stand-alone)", after)):
            precision, recall = scores(predicted, truth)
            print(f"| {kind} | {label} | {precision} | {recall} |")
        for row, b, a, t in zip(rows, before, after, truth, strict=True):
            if b != t or a != t:
                print(f"<!-- {kind}: label={t} before={b} after={a}: {row['text'][:90]!r} -->")
    if args.medqa:
        dev_counts(Path(args.medqa))


def dev_counts(path: Path) -> None:
    from medfuzz.benchmarks import load_items

    items = load_items("medqa", path)
    distractors = [text for item in items for letter, text in item.clean_options().items() if letter != item.answer]
    print(f"\n{len(distractors)} MedQA dev distractors\n")
    print("| type | any match | stand-alone | left out, e.g. |\n|---|---|---|---|")
    for kind in ("drugs", "diseases"):
        matcher = EntityMatcher(load_vocabulary(kind))
        found = [(text, matcher.find(text)) for text in distractors]
        dropped = [text for text, hits in found if hits and not matcher.typed(text, found=hits)]
        typed = sum(1 for _, hits in found if hits) - len(dropped)
        examples = "; ".join(repr(text[:60]) for text in dropped[:6])
        print(f"| {kind} | {sum(1 for _, hits in found if hits)} | {typed} | {examples} |")


if __name__ == "__main__":
    main()
