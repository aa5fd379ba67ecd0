"""Clean/attacked pairs from Inspect logs of ``medfuzz/tces*`` runs, for ``medfuzz explain``.

Each TCES sample keeps the clean item (``sample.metadata["item"]``) and, in its score's ``record``, the last
item the attack asked (``modified_item``: the successful substitution for a success). By default every success is
a pair; ``items`` picks samples by id instead (any outcome that asked a substituted item, e.g. a failed attack's
last try).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medfuzz.benchmarks.items import MCQItem
from medfuzz.errors import MedfuzzError
from medfuzz.records.keys import METHOD_KEY, TRANSCRIPT_FIELDS
from medfuzz.report.log_reader import collect_logs
from medfuzz.solvers.tces.explain.pair import ExplainPair

SCORER = "tces_scorer"


def _samples(path: Path) -> tuple[Any, list[Any]] | None:
    from inspect_ai.log import read_eval_log

    try:
        log = read_eval_log(str(path), exclude_fields=set(TRANSCRIPT_FIELDS))  # records: scores
    except Exception:  # not an Inspect log (an lm-eval file, a PNG, ...): not ours to read
        return None
    if (log.eval.metadata or {}).get(METHOD_KEY) != "tces" or not log.samples:
        return None
    return log, list(log.samples)


def _pair(path: Path, log: Any, sample: Any, record: dict[str, Any]) -> ExplainPair:
    clean = MCQItem.from_record(sample.metadata["item"])
    attacked = MCQItem.from_record(record["modified_item"])
    answers = record.get("target_answers") or []
    logged = {
        "log": str(path),
        "target_model": str(log.eval.model),
        "outcome": record.get("outcome"),
        "replacement": record.get("replacement") or (record.get("attempts") or [{}])[-1].get("replacement"),
        "victim": record.get("victim"),
        "queries_used": record.get("queries_used"),
        "answers": {"clean": record.get("clean_answer"), "attacked": answers[-1] if answers else None},
    }
    return ExplainPair(str(record.get("item_id", sample.id)), clean, attacked, logged)


def read_pairs(paths: Sequence[Path], items: Sequence[str] | None = None) -> list[ExplainPair]:
    """Pairs from the TCES logs among ``paths`` (files; folders are searched as ``medfuzz report`` does).

    Without ``items``: every success. With ``items``: exactly those ids (item or sample id), each of which must
    exist and have a substituted item; an unknown id or one the attack never substituted is an error naming it."""

    wanted = list(dict.fromkeys(items or []))
    found: dict[str, ExplainPair] = {}
    pairs: list[ExplainPair] = []
    seen: dict[str, str] = {}  # id -> outcome, to explain why a wanted id gives no pair
    runs = 0
    for path in collect_logs(list(paths)):
        read = _samples(path)
        if read is None:
            continue
        runs += 1
        log, samples = read
        for sample in samples:
            score = (sample.scores or {}).get(SCORER)
            record = (score.metadata or {}).get("record") if score is not None else None
            if not record:
                continue
            ids = {str(sample.id), str(record.get("item_id"))}
            for i in ids:
                seen[i] = str(record.get("outcome"))
            has_pair = bool(record.get("modified_item"))
            if wanted:
                match = next((i for i in wanted if i in ids), None)
                if match is not None and has_pair and match not in found:
                    found[match] = _pair(path, log, sample, record)
            elif record.get("outcome") == "success" and has_pair:
                pairs.append(_pair(path, log, sample, record))
    if runs == 0:
        raise MedfuzzError(f"no finished medfuzz TCES Inspect log in {', '.join(map(str, paths))}")
    if wanted:
        missing = [i for i in wanted if i not in found]
        if missing:
            reasons = [f"{i} ({'not in the logs' if i not in seen else 'outcome ' + seen[i] + ', no substituted item'})"
                       for i in missing]
            raise MedfuzzError(f"--items: no clean/attacked pair for {', '.join(reasons)}")
        pairs = [found[i] for i in wanted]
    return _unique_ids(pairs)


def _unique_ids(pairs: list[ExplainPair]) -> list[ExplainPair]:
    """The same item from several runs gets its log's name appended, so output files do not overwrite."""
    counts: dict[str, int] = {}
    for pair in pairs:
        counts[pair.item_id] = counts.get(pair.item_id, 0) + 1
    out = []
    for pair in pairs:
        if counts[pair.item_id] > 1:
            pair = ExplainPair(f"{pair.item_id}@{Path(pair.logged['log']).stem}", pair.clean, pair.attacked,
                               pair.logged)
        out.append(pair)
    return out
