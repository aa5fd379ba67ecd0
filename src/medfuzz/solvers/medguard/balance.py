"""Balanced answer-key positions: every letter is the key about equally often in every pool.

Sources have skewed keys (the 50 bundled MedQA items have 19 keys at A; the statement-pair and refusal
items had theirs wherever a shuffle put them), so a model that always answers "A" scored 0.38-0.47 on
six aspects instead of the chance level 1/k. The builders therefore place each item's key at a position
taken from a seeded **block schedule**: for items with k options, blocks that are random permutations of
the k positions, one after another. Every prefix of a pool's items then holds each position
``floor(m/k)`` or ``ceil(m/k)`` times, so the whole pool and any ``limit_per_aspect`` cut of it (which keeps
a prefix) are balanced to within one item per letter. The distractors fill the other slots in a seeded
random order of their own (per item), so the order carries no information about the key either.

Equity variants are not balanced here: their orders follow a design over each case's variants
(``equity_orders``) under which a constant-letter model scores the chance level, with the key positions
balanced as a by-product.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import replace

from medfuzz.benchmarks import LETTERS, MCQItem
from medfuzz.benchmarks.items import item_seed

# metadata fields that hold an option letter of the item (moved with their option)
LETTER_FIELDS = ("promoted_option", "leak_option", "argued_option")


class KeySchedule:
    """Key positions for one pool, in item order: seeded blocks of the k positions, per option count k
    (a pool whose items have different option counts is balanced within each count)."""

    def __init__(self, seed: int, pool: str) -> None:
        self._seed = seed
        self._pool = pool
        self._rngs: dict[int, random.Random] = {}
        self._queues: dict[int, list[int]] = {}

    def next(self, k: int) -> int:
        queue = self._queues.setdefault(k, [])
        if not queue:
            rng = self._rngs.setdefault(k, random.Random(item_seed(self._seed, f"keys:{self._pool}:{k}")))
            block = list(range(k))
            rng.shuffle(block)
            queue.extend(block)
        return queue.pop(0)


def reorder(item: MCQItem, order: Sequence[str]) -> MCQItem:
    """The item with its options shown in ``order`` (the item's letters, new position by new position).

    ``metadata["option_order"]`` maps each new letter to the item's original letter (composed with an
    ``option_order`` the item already had, so it always points at the source's order); the letters in
    ``LETTER_FIELDS`` follow their option. Text that names a letter is not rewritten: balance such items
    before writing it (sycophancy).
    """
    if sorted(order) != sorted(item.letters):
        raise ValueError(f"item {item.id}: {list(order)} is not an order of its letters {item.letters}")
    before = item.metadata.get("option_order") or {}
    options = {LETTERS[i]: item.options[old] for i, old in enumerate(order)}
    mapping = {LETTERS[i]: before.get(old, old) for i, old in enumerate(order)}
    moved = {name: LETTERS[order.index(item.metadata[name])] for name in LETTER_FIELDS if name in item.metadata}
    return replace(item, options=options, answer=LETTERS[order.index(item.answer)],
                   metadata={**item.metadata, **moved, "option_order": mapping})


def place_key(item: MCQItem, position: int, rng: random.Random) -> MCQItem:
    """The item with its key at ``position`` and the distractors in a random order in the other slots
    (``reorder`` says how the metadata follows)."""
    letters = item.letters
    if not 0 <= position < len(letters):
        raise ValueError(f"item {item.id}: key position {position} outside its {len(letters)} options")
    distractors = [letter for letter in letters if letter != item.answer]
    rng.shuffle(distractors)
    return reorder(item, [*distractors[:position], item.answer, *distractors[position:]])


def balance_keys(items: Iterable[MCQItem], seed: int, pool: str) -> list[MCQItem]:
    """Every item of ``pool`` with its key moved to the pool's next scheduled position (see module doc), in
    the items' order; deterministic for ``seed`` and the items' order and ids."""
    schedule = KeySchedule(seed, pool)
    return [place_key(item, schedule.next(len(item.options)), random.Random(item_seed(seed, f"order:{item.id}")))
            for item in items]
