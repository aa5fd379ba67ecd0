"""What a medfuzz run writes into its logs and how to read it back: the shared vocabulary of both shells.

The task shells (``medfuzz.tasks``) write these records and the report (``medfuzz.report``) reads them; both
import this package, which imports no harness and neither shell, so the two shells never import each other.

- ``methods``: the method registry, one spec per method in one mapping, which the suite, both harnesses' option
  checks, the report and the summary loop over;
- ``keys``: the metadata keys (``medfuzz_method``, ``medfuzz_suite``, ``medfuzz_shard``, ``medfuzz_model``) and
  ``method_of``, the one reading of which method a log is a run of (older logs included);
- ``lm_eval_docs``: the lm-eval docs that hold several versions of a question, built by the hooks and decoded
  by the hooks and the report alike;
- ``run_start``: what a run records when it starts (MedFuzz's attainability), recomputed by the report for
  shards merged into one run;
- ``locations``: a log's ``location`` (a path, or a ``file:`` URI) as a local path.
"""

from medfuzz.records.keys import METHOD_KEY, MODEL_LABEL, SHARD_KEY, SUITE_KEY, method_of

__all__ = ["METHOD_KEY", "MODEL_LABEL", "SHARD_KEY", "SUITE_KEY", "method_of"]
