"""Agreement of medfuzz's entity typing with the paper's own labels (qstab's ``medmcqa_train_leaner_typed``).

For every item and every distractor letter, the paper says whether the distractor holds a drug (UMLS CHEM) or
a disease (UMLS DISO) entity (``DrugChoices`` / ``DiseaseChoices``, from scispaCy); we say whether the
vocabulary matcher finds an entity of the type in it. Prints precision and recall (paper labels as reference) per
vocabulary, per distractor and per item (``Drugs?`` / ``Diseases?``). The qstab file is CC BY-NC-ND: read by path,
never copied.

    python bench/tces_typing_agreement.py [--shared ../shared]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from medfuzz.samplers.entities import EntityMatcher
from medfuzz.samplers.vocab import load_vocabulary


def precision_recall(predicted: list[bool], truth: list[bool]) -> tuple[float, float, int, int, int]:
    p, t = np.array(predicted), np.array(truth)
    tp = int((p & t).sum())
    return tp / max(p.sum(), 1), tp / max(t.sum(), 1), tp, int(p.sum()), int(t.sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shared", default=str(Path(__file__).resolve().parents[2] / "shared"))
    args = parser.parse_args()
    external = Path(args.shared) / "data" / "qstab" / "external"
    frame = pd.read_parquet(external / "medmcqa_train_leaner_typed.parquet")
    vocabularies = {
        "drugs": [("builtin (DrugBank ∩ MeSH/MedlinePlus)", None), ("paper FDA-drugs", external / "FDA_Approved.csv")],
        "diseases": [("builtin (MeSH C + F03)", None),
                     ("paper CTD-diseases", external / "CTD_unique_disease_names.csv")],
    }
    columns = {"drugs": ("DrugChoices", "Drugs?"), "diseases": ("DiseaseChoices", "Diseases?")}
    print(f"MedMCQA train subset typed by the paper: {len(frame)} items, {3 * len(frame)} distractors\n")
    print("| type | vocabulary | size | level | precision | recall | TP | predicted | paper |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, choices in vocabularies.items():
        letters_column, flag_column = columns[kind]
        for label, source in choices:
            vocab = load_vocabulary(kind, source)
            matcher = EntityMatcher(vocab)
            pred_d, true_d, pred_i, true_i = [], [], [], []
            for _, row in frame.iterrows():
                options, answer = row["options"], row["answer_idx"]
                labelled = set(row[letters_column])
                hits = []
                for letter in "ABCD":
                    if letter == answer or options.get(letter) is None:
                        continue
                    hit = bool(matcher.find(str(options[letter])))
                    hits.append(hit)
                    pred_d.append(hit)
                    true_d.append(letter in labelled)
                pred_i.append(any(hits))
                true_i.append(bool(row[flag_column]))
            for level, (pred, true) in (("distractor", (pred_d, true_d)), ("item", (pred_i, true_i))):
                precision, recall, tp, n_pred, n_true = precision_recall(pred, true)
                print(f"| {kind} | {label} | {len(vocab):,} | {level} | {precision:.3f} | {recall:.3f} | {tp} | "
                      f"{n_pred} | {n_true} |")


if __name__ == "__main__":
    main()
