"""The metadata keys a medfuzz run writes into its Inspect task metadata or lm-eval ``--metadata``, and the one
reading of which method a log is a run of."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from medfuzz.records.methods import METHODS

METHOD_KEY = "medfuzz_method"  # Inspect task metadata: which method the task runs (a ``records.methods`` key)
SUITE_KEY = "medfuzz_suite"  # task metadata: the run's label in the suite (the logs are found by it)
DATA_SOURCE = "data_source"  # task metadata: the run's data (``benchmarks.registry.DataRecord.record``)
# every method's task records its checked config here, in one shape (``<Config>.to_dict()``): the shard merge, the
# run cards, the report's titles and the summary read it with ``recorded_config``, never per method
CONFIG_KEY = "medfuzz_config"
SHARD_KEY = "medfuzz_shard"  # a shard's task metadata: index k, count n, the run's samples, the slice's start/end
# --metadata name of the model's name in the report (``report.runs.lm_eval_model_name``): lm-eval stores
# --metadata in every task's config in its results file, so the name travels with the results. ``medfuzz run``
# passes its Inspect model name, so both harnesses' numbers land on one model card; no hook reads it.
MODEL_LABEL = "medfuzz_model"
# What medfuzz never reads of a logged sample (the report, the lm-eval hook reading a MedFuzz log): its transcript
# and the model's last output. At the MedQA split's size a MedFuzz sample is ~3 MB of JSON, 85 % of it events (one
# ModelEvent per call) and attachments; the records are in the score metadata. Inspect skips excluded fields while
# it streams a member (ijson), so a sample whose model wrote 40 MB (five copies: events, messages, output) costs no
# memory: reading the output made `medfuzz report` over a 44 KB `.eval` of three such samples hold 723 MB.
TRANSCRIPT_FIELDS = frozenset({"events", "attachments", "messages", "output"})
# MedFuzz task names of logs written before the tasks recorded METHOD_KEY
LEGACY_MEDFUZZ_TASKS = ("medfuzz", "medfuzz_medqa", "medfuzz_medmcqa")


def recorded_config(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The method config a run recorded in its task metadata (``CONFIG_KEY``; a log written before that key:
    MedFuzz's nested ``medfuzz`` dict); empty when it recorded none (the clean baselines)."""
    metadata = metadata or {}
    found = metadata.get(CONFIG_KEY, metadata.get("medfuzz"))
    return dict(found) if isinstance(found, Mapping) else {}


def method_of(metadata: Mapping[str, Any] | None, task: str) -> str:
    """The method an Inspect log is a run of (a ``records.methods`` key, or "other"), from its task ``metadata``
    and task name (``log.eval.metadata``, ``log.eval.task``).

    The recorded ``medfuzz_method`` decides, so a user's own ``@task`` built on ``medfuzz_task`` is reported as
    MedFuzz; logs written before that key are read by their task name (and MedGuard's ``medguard`` flag)."""
    metadata = metadata or {}
    recorded = metadata.get(METHOD_KEY)
    if isinstance(recorded, str) and recorded in METHODS and METHODS[recorded].recorded:
        return recorded
    name = task.split("/")[-1]
    if recorded is None:  # an older log: its task name says what it ran
        if metadata.get("medguard") or name.startswith("medguard"):
            return "medguard"
        if name in LEGACY_MEDFUZZ_TASKS:
            return "medfuzz"
    if name.endswith("_clean"):
        return "baseline"
    return "other"
