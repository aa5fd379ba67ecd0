"""``medfuzz-local`` request scheduling without llama.cpp: a fake context whose next-token log-probabilities are
a fixed function of the evaluated tokens, so results can be checked against a from-scratch computation and the
evaluated tokens counted by hand."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest
from lm_eval.api.instance import Instance
from lm_eval.api.model import LM

from medfuzz.adapters.llama_cpp_lm import LlamaCppLM, _log_softmax

VOCAB = 256


def next_logprobs(tokens: list[int]) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(np.asarray(tokens, dtype=np.int64).tobytes()))
    return _log_softmax(rng.normal(size=VOCAB))


class FakeLlama:
    """Character tokens and the KV-cache bookkeeping of llama-cpp-python's ``Llama``."""

    def __init__(self) -> None:
        self.input_ids = np.zeros(512, dtype=np.intc)
        self.n_tokens = 0

    def tokenize(self, text: bytes, add_bos: bool = False, special: bool = True) -> list[int]:
        return ([1] if add_bos else []) + list(text)

    def n_ctx(self) -> int:
        return 64

    def token_bos(self) -> int:
        return 1

    def create_completion(self, prompt: list[int], **_: object) -> dict:
        self.n_tokens = 3  # llama.cpp's generation rewrites the cache
        self.input_ids[:3] = [7, 7, 7]
        return {"choices": [{"text": bytes(t for t in prompt if t != 1).decode()[::-1]}]}


class FakeLM(LlamaCppLM):
    """Overrides the one method that touches llama.cpp: a decode counts its tokens and returns the fake
    model's next-token log-probabilities (logits up to a constant) at the asked positions."""

    def __init__(self) -> None:  # no GGUF: only what the scheduling uses
        LM.__init__(self)
        self.llm = FakeLlama()
        self.max_gen_toks = 8
        self.evaluated: list[int] = []
        self._forget()

    def _decode(self, tokens: list[int], start: int, end: int, outputs: list[int]) -> np.ndarray:
        assert start <= self.llm.n_tokens and list(self.llm.input_ids[:start]) == tokens[:start]
        assert outputs == sorted(set(outputs)) and start <= outputs[0] and outputs[-1] < end <= len(tokens)
        self.evaluated.append(end - start)
        self.llm.input_ids[start: end] = tokens[start: end]
        self.llm.n_tokens = end
        return np.stack([next_logprobs(tokens[: p + 1]) for p in outputs])


def reference(context: str, continuation: str) -> float:
    tokens, cont = list(context.encode()), list(continuation.encode())
    return sum(float(next_logprobs(tokens + cont[:p])[t]) for p, t in enumerate(cont))


def test_prefix_order_reuses_the_cache_and_keeps_results_in_request_order(capsys) -> None:
    clean, attacked, other = "abcdefXYZ", "abcdefQRS", "zzzz"  # attacked: its clean twin with a new ending
    args = [(other, " A"), (clean, " A"), (other, " B"), (attacked, " A"), (clean, " B"), (attacked, " B")]
    lm = FakeLM()
    results = lm.loglikelihood([Instance("loglikelihood", {}, a, i) for i, a in enumerate(args)])
    assert [r[0] for r in results] == pytest.approx([reference(*a) for a in args])
    # sorted: attacked (Q < X), clean, other. attacked " A": its 10 tokens before the letter in one decode
    # (the letter itself is never evaluated); " B": the distribution after "abcdefQRS " is kept, 0; clean
    # " A": shares "abcdef" with attacked, "XYZ " = 4; " B": 0; other " A": 5; " B": 0 -> 19 tokens in 3
    # decodes, the floor (one token per decode before: 9 decodes; in the given order, re-evaluating the last
    # context token each time: 38 tokens)
    assert lm.evaluated == [10, 4, 5] and sum(lm.evaluated) == evaluation_floor(lm, args)
    err = capsys.readouterr().err
    assert "Running loglikelihood requests" in err and "6/6" in err


def evaluation_floor(lm: LlamaCppLM, args: list[tuple[str, str]]) -> int:
    """The token positions any exact evaluation must compute: the nodes of the prefix trie of the scored
    sequences less their last token (the same count as ``bench/lm_eval_tces_cost.py``)."""
    nodes: set[tuple[int, ...]] = set()
    for context, continuation in args:
        tokens, _ = lm._fit(*lm._encode_pair(context, continuation), None)
        nodes.update(tuple(tokens[:k]) for k in range(1, len(tokens)))
    return len(nodes)


def random_batch(rng: random.Random) -> list[tuple[str, str]]:
    """Requests that share prefixes in every way a batch can: questions with several answer letters, a
    version that turns off inside the continuation (TCES), the same text split at another place (the clean
    half of a TCES doc and the plain task), exact duplicates, one sequence the extension of another, empty
    contexts (conditioned on BOS), trailing spaces moved into the continuation."""
    stems = ["".join(rng.choice("ab c") for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 4))]
    batch = []
    for _ in range(rng.randint(1, 12)):
        text = rng.choice(stems) + "".join(rng.choice("abc ") for _ in range(rng.randint(1, 8)))
        cut = rng.randint(0, len(text) - 1)  # at least one continuation character
        batch.append((text[:cut], text[cut:]))
        if rng.random() < 0.3:
            batch.append(batch[-1])
    return batch


@pytest.mark.parametrize("seed", range(300))
def test_any_batch_is_scored_exactly_and_evaluates_each_needed_token_once(seed: int) -> None:
    """Over random batches: every request's log-likelihood and greedy flag equal a from-scratch computation,
    and the tokens evaluated equal the floor (no token is evaluated twice, none that no request needs)."""
    rng = random.Random(seed)
    args = random_batch(rng)
    lm = FakeLM()
    results = lm.loglikelihood([Instance("loglikelihood", {}, a, i) for i, a in enumerate(args)],
                               disable_tqdm=True)
    for (context, continuation), (score, greedy) in zip(args, results, strict=True):
        tokens, scored_from = lm._fit(*lm._encode_pair(context, continuation), None)
        rows = [next_logprobs(tokens[:p]) for p in range(scored_from, len(tokens))]
        assert score == pytest.approx(sum(float(r[t]) for r, t in zip(rows, tokens[scored_from:], strict=True)))
        assert greedy == all(int(r.argmax()) == t for r, t in zip(rows, tokens[scored_from:], strict=True))
    assert sum(lm.evaluated) == evaluation_floor(lm, args)


def test_generation_shows_progress(capsys) -> None:
    lm = FakeLM()
    out = lm.generate_until([Instance("generate_until", {}, ("abc", {"until": ["\n"]}), 0),
                             Instance("generate_until", {}, ("xy", {}), 1)])
    assert out == ["cba", "yx"]
    assert np.isnan(lm._token_logprob).all() and lm._rows == {}  # nothing is kept after a generation
    err = capsys.readouterr().err
    assert "Running generate_until requests" in err and "2/2" in err


def test_long_continuations_cost_one_decode_and_match_token_by_token_scoring() -> None:
    """A MedFuzz pair doc puts the whole question in the continuation: every letter after the first reuses it."""
    question = "A 45-year-old man has chest pain. Which drug? "
    args = [("Q:", question + letter) for letter in "ABCD"] + [("Q:", "Another question " + letter) for letter in "AB"]
    lm = FakeLM()
    results = lm.loglikelihood([Instance("loglikelihood", {}, a, i) for i, a in enumerate(args)])
    assert [r[0] for r in results] == pytest.approx([reference(*a) for a in args])
    # sorted: the question's "A" first (all of it but the letter, one decode; it also keeps the distribution
    # after "Q:A", where "Another ..." turns off); its B, C, D: 0 tokens. "Another question ": shares "Q:A",
    # evaluates the rest up to its letter. One token per decode: 69.
    assert lm.evaluated == [len("Q:" + question), len("Q:Another question ") - 3]
    assert sum(lm.evaluated) == evaluation_floor(lm, args)


def test_greedy_flags_follow_the_argmax() -> None:
    lm = FakeLM()
    context = "xyz"
    best = int(np.argmax(next_logprobs(list(context.encode()))))
    other = (best + 1) % 128
    out = lm.loglikelihood([Instance("loglikelihood", {}, (context, chr(best)), 0),
                            Instance("loglikelihood", {}, (context, chr(other)), 1)])
    assert out[0][1] is True and out[1][1] is False


def test_a_request_longer_than_the_context_is_left_truncated_and_named(caplog) -> None:
    lm = FakeLM()  # a context window of 64 tokens
    long_context, continuation = "x" * 80, " A"
    request = Instance("loglikelihood", {}, (long_context, continuation), 0, metadata=("medqa_clean", 7, 1))
    [(score, _)] = lm.loglikelihood([request])
    kept = (list(long_context.encode()) + list(continuation.encode()))[-64:]
    expected = sum(float(next_logprobs(kept[:p])[kept[p]]) for p in (62, 63))
    assert score == pytest.approx(expected)
    assert "medqa_clean doc 7: 82 tokens exceed the context window of 64" in caplog.text
