"""The embedded model's server process: llama-cpp-python's OpenAI-compatible server (``python -m
llama_cpp.server``, its arguments unchanged) with three replacements that give the same replies for less work:
two in its log-probability output, which cost more than the model itself, and one in its prompt evaluation.

llama-cpp-python 0.3.x answers a request for ``logprobs`` by normalising *every* row of its logits buffer (the
prompt's rows too: ~400 × 49,152 floats for a MedQA question, ~0.5 s on 2 cores) and then, per generated token,
sorting all 49,152 (log-probability, token) pairs as Python tuples (~24 ms a token) to keep the top few. For the
135M model the decode itself takes ~19 ms a token, so a 12-token reply with log-probabilities took 0.82 s
against 0.33 s without (bench/embedded_logprobs.py). Here, only the rows it returns are normalised (the same
per-row arithmetic) and the pairs are ordered by ``numpy.lexsort`` in exactly the order ``sorted(..., reverse=True)``
gives. These two apply only where llama-cpp-python's source has the lines they replace
(``LOGPROB_LINES``); any other version runs unpatched, as before, and says so in the server log.

Third, the server loads the model with ``logits_all`` (llama-cpp-python refuses log-probabilities without it), so
every prompt token's logits were computed — 49,152 × 576 multiply-adds a token, ~15 % of a prompt's evaluation —
and copied, although a reply without ``echo`` reads only the last prompt token's row and the generated tokens'.
``eval_needed_rows`` asks llama.cpp for the last row of each batch only during such a reply (its rows are the
same numbers: each position's logits do not depend on which others are output); a reply with ``echo`` evaluates
its whole prompt anew with every row, as before. It replaces ``Llama.eval`` only when that method's source is
the one it was written against (``EVAL_SOURCE_SHA256``, llama-cpp-python 0.3.36).
"""

from __future__ import annotations

import builtins
import hashlib
import inspect
import runpy
import sys
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

# the statements of ``Llama._create_completion`` the two replacements stand in for (llama-cpp-python 0.3.x)
LOGPROB_LINES = ("all_logprobs = Llama.logits_to_logprobs(self._scores)[token_offset:]",
                 "zip(logprobs_token, range(len(logprobs_token))), reverse=True")


# sha256 of ``inspect.getsource(Llama.eval)`` in llama-cpp-python 0.3.36, which ``eval_needed_rows`` restates
EVAL_SOURCE_SHA256 = "01b45d258b6688c787a9d6825af103b16b87a1fad9a7b270140ec59e84838631"
EVERY_ROW = "_medfuzz_every_row"  # the Llama attribute: False inside a reply that reads no prompt row


class RowLogprobs:
    """``logits_to_logprobs`` of a 2-D logits buffer, computed for the rows taken from it only: each row's
    log-softmax depends on that row alone, so a row's values are those of the whole buffer's."""

    def __init__(self, logits: np.ndarray, normalise: Any) -> None:
        self._logits, self._normalise = logits, normalise

    def __getitem__(self, rows: Any) -> np.ndarray:
        return self._normalise(self._logits[rows])

    def __len__(self) -> int:
        return len(self._logits)

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(self[:])


class VocabularyPairs:
    """``zip(logprobs_token, range(len(logprobs_token)))`` for one row of log-probabilities: iterates as that zip,
    and ``ordered`` gives ``sorted`` of it without building and comparing 49,152 tuples in Python."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        return builtins.zip(self.values, range(len(self.values)), strict=True)

    def ordered(self, reverse: bool) -> list[tuple[Any, int]]:
        # tuples compare by value, then by token id: lexsort's last key is the primary one
        order = np.lexsort((np.arange(len(self.values)), self.values))
        if reverse:
            order = order[::-1]
        # Python floats (the float32 values exactly) rather than numpy scalars: 3 ms a token instead of 8; equal
        # values, and the server's response model turns either into the same JSON number
        return list(builtins.zip(self.values[order].tolist(), order.tolist(), strict=True))


def pairing_zip(*iterables: Iterable[Any], strict: bool = False) -> Iterable[Any]:
    """``zip``, except that a row of log-probabilities paired with its token ids is a ``VocabularyPairs``."""
    if len(iterables) == 2 and not strict:
        values, ids = iterables
        if (isinstance(values, np.ndarray) and values.ndim == 1 and isinstance(ids, range)
                and ids == range(len(values)) and not np.isnan(values).any()):
            return VocabularyPairs(values)
    return builtins.zip(*iterables, strict=strict)


def ordering_sorted(iterable: Iterable[Any], /, *, key: Any = None, reverse: bool = False) -> list[Any]:
    """``sorted``, with a ``VocabularyPairs`` ordered by numpy (the same list)."""
    if isinstance(iterable, VocabularyPairs) and key is None:
        return iterable.ordered(reverse)
    return builtins.sorted(iterable, key=key, reverse=reverse)


def patch_logprobs() -> bool:
    """Install both replacements in ``llama_cpp.llama`` where its source has ``LOGPROB_LINES``; True if done."""
    import llama_cpp.llama as module

    llama = module.Llama
    try:
        source = inspect.getsource(llama._create_completion)
    except (OSError, TypeError):
        return False
    # the 2-D use must be the only one (the others pass one row, whose result is used as an array)
    if not all(line in source for line in LOGPROB_LINES) or source.count("logits_to_logprobs(self._scores)") != 1:
        return False
    normalise = llama.logits_to_logprobs

    def logits_to_logprobs(logits: Any, axis: int = -1) -> Any:
        if isinstance(logits, np.ndarray) and logits.ndim == 2 and axis in (-1, 1):
            return RowLogprobs(logits, normalise)
        return normalise(logits, axis=axis)

    llama.logits_to_logprobs = staticmethod(logits_to_logprobs)
    # module globals shadow the builtins for that module's code only
    module.zip = pairing_zip  # type: ignore[attr-defined]
    module.sorted = ordering_sorted  # type: ignore[attr-defined]
    return True


def eval_needed_rows(self: Any, tokens: Any) -> None:
    """``Llama.eval`` (0.3.36) with llama.cpp asked for the last position's logits of each batch only, stored in
    the same row of ``scores``; the original with every row unless the running reply said otherwise."""
    if getattr(self, EVERY_ROW, True):
        return ORIGINAL["eval"](self, tokens)
    self._ctx.kv_cache_seq_rm(-1, self.n_tokens, -1)
    for i in range(0, len(tokens), self.n_batch):
        batch = tokens[i: min(len(tokens), i + self.n_batch)]
        n_past, n_tokens = self.n_tokens, len(batch)
        self._batch.set_batch(batch=batch, n_past=n_past, logits_all=False)  # the last token's flag only
        self._ctx.decode(self._batch)
        self.input_ids[n_past: n_past + n_tokens] = batch
        self.scores[n_past + n_tokens - 1, :] = np.ctypeslib.as_array(self._ctx.get_logits(), shape=(self._n_vocab,))
        self.n_tokens += n_tokens
        self._requires_eval = False
    return None


ORIGINAL: dict[str, Any] = {}


def create_completion_reading_needed_rows(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
    """``Llama._create_completion``, with ``eval_needed_rows`` told whether the reply reads prompt rows
    (``echo``): then the cached prefix, whose rows may not have been computed, is evaluated again."""
    original = ORIGINAL["_create_completion"]
    echo = bool(inspect.signature(original).bind(self, *args, **kwargs).arguments.get("echo", False))
    previous = getattr(self, EVERY_ROW, True)
    if echo:
        self.reset()
    setattr(self, EVERY_ROW, echo)
    try:
        yield from original(self, *args, **kwargs)
    finally:
        setattr(self, EVERY_ROW, previous)


def patch_prompt_rows() -> bool:
    """Install ``eval_needed_rows`` where ``Llama.eval`` is the known source; True if done."""
    from llama_cpp import Llama

    try:
        source = inspect.getsource(Llama.eval)
    except (OSError, TypeError):
        return False
    if hashlib.sha256(source.encode()).hexdigest() != EVAL_SOURCE_SHA256 or "eval" in ORIGINAL:
        return False
    ORIGINAL["eval"], ORIGINAL["_create_completion"] = Llama.eval, Llama._create_completion
    Llama.eval = eval_needed_rows
    Llama._create_completion = create_completion_reading_needed_rows
    return True


def main(argv: list[str] | None = None) -> None:
    """``python -m medfuzz.models.llama_server ARGS``: ``python -m llama_cpp.server ARGS``, patched."""
    patched, rows = patch_logprobs(), patch_prompt_rows()
    print(f"medfuzz: log-probability post-processing {'by numpy' if patched else 'unpatched (unknown version)'}; "
          f"prompt logits {'of the rows a reply reads' if rows else 'of every row (unknown version)'}",
          file=sys.stderr, flush=True)
    sys.argv = ["llama_cpp.server", *(sys.argv[1:] if argv is None else argv)]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
