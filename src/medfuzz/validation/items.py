"""Synthetic MCQ items for validation runs: templated vignettes (no trigger phrase, no bank sentence) with four
distinct drug options and a seeded answer letter."""

from __future__ import annotations

import random

from medfuzz.benchmarks.items import LETTERS, MCQItem, derive_seed

_SYMPTOMS = ("fever and cough", "chest pain", "joint swelling", "abdominal pain", "headache", "a skin rash",
             "shortness of breath", "weight loss", "back pain", "blurred vision")
_SIGNS = ("a raised temperature", "a heart murmur", "an enlarged liver", "a swollen knee", "neck stiffness",
          "pale conjunctivae", "wheezing", "a tender abdomen")
_DRUGS = ("Amoxicillin", "Ceftriaxone", "Doxycycline", "Vancomycin", "Metformin", "Lisinopril", "Atenolol",
          "Furosemide", "Warfarin", "Heparin", "Prednisone", "Ibuprofen", "Omeprazole", "Levothyroxine",
          "Insulin", "Albuterol", "Azithromycin", "Ciprofloxacin", "Clopidogrel", "Digoxin")


def synthetic_items(n: int, seed: int = 0, options: int = 4) -> list[MCQItem]:
    items = []
    for i in range(n):
        rng = random.Random(derive_seed(seed, "synthetic", i))
        sex = rng.choice(("man", "woman"))
        stem = (f"A {rng.randint(20, 80)}-year-old {sex} presents with {rng.choice(_SYMPTOMS)} for "
                f"{rng.randint(2, 14)} days. Examination shows {rng.choice(_SIGNS)}. Laboratory studies are "
                f"pending for case {i}. Which of the following is the most appropriate treatment?")
        drugs = rng.sample(_DRUGS, options)
        items.append(MCQItem(id=f"syn-{seed}-{i}", question=stem, options=dict(zip(LETTERS, drugs, strict=False)),
                             answer=LETTERS[rng.randrange(options)]))
    return items
