"""``medfuzz run``'s application, above the harness tasks (``medfuzz.tasks``) and the report (``medfuzz.report``),
one module per role: levels.py (the named settings), plan.py (the plan from the options: runs, backends),
build.py (the tasks built for it and the bound they imply), inspect_half.py (the tasks as one eval set),
lm_eval_half.py (the ``medfuzz-lm-eval`` process), run.py (the plan to its outcome), progress.py (calls against
the bound, the ETA), heartbeat.py, cost.py and cost_model.py (the calls, tokens and cost expected), preflight.py
(checks before the first call), stop.py (a stop signal: what was done is kept and reported), shard.py (``--shard
auto`` from a scheduler) and sweep.py (``medfuzz sweep tces``: the TCES studies as one eval set)."""
