"""``medfuzz run``'s application, above the harness tasks (``medfuzz.tasks``) and the report (``medfuzz.report``):
plan.py (the plan from the options: runs, levels, backends, the bound; the tasks built for it, the Inspect half
as one eval set, the lm-eval half), run.py (the plan to its outcome), progress.py (calls against the bound, the
ETA), heartbeat.py, cost.py (the calls, tokens and cost expected), preflight.py (checks before the first call),
stop.py (a stop signal: what was done is kept and reported), shard.py (``--shard auto`` from a scheduler) and
sweep.py (``medfuzz sweep tces``: the TCES studies as one eval set, read from the run's finished logs)."""
