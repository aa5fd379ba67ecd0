"""``medfuzz-lm-eval``: exactly ``lm_eval``'s CLI, plus medfuzz's task folder and registered models.

Every subcommand (run, ls, validate) sees the medfuzz tasks; a user's own ``--include_path`` still works and
is searched after ours, so a user task of the same name wins, as with plain lm_eval. The hooks' own log lines
(which layout a data file was read in, how many items TCES can attack and why each other one cannot) are
printed beside lm-eval's, at its level (``LMEVAL_LOG_LEVEL``, default INFO).
"""

from __future__ import annotations

from pathlib import Path

from medfuzz.adapters.lm_eval_registry import register_models
from medfuzz.tasks import LM_EVAL_TASKS_PATH


def _install_task_path() -> None:
    import lm_eval.tasks

    base = lm_eval.tasks.TaskManager
    if getattr(base, "_medfuzz_wrapped", False):
        return

    class TaskManagerWithMedfuzz(base):  # type: ignore[misc, valid-type]
        _medfuzz_wrapped = True

        def __init__(self, *args, include_path=None, **kwargs):
            if include_path is None:
                paths: list[str | Path] = []
            elif isinstance(include_path, list | tuple):
                paths = list(include_path)
            else:
                paths = [include_path]
            super().__init__(*args, include_path=[LM_EVAL_TASKS_PATH, *paths], **kwargs)

    lm_eval.tasks.TaskManager = TaskManagerWithMedfuzz


def _show_hook_logs() -> None:
    """lm-eval prints its own logger only: the ``medfuzz`` logger gets the same kind of handler."""
    import logging
    import os

    logger = logging.getLogger("medfuzz")
    if any(getattr(h, "_medfuzz_lm_eval", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-8s [%(name)s] %(message)s",
                                           datefmt="%Y-%m-%d:%H:%M:%S"))
    handler._medfuzz_lm_eval = True  # type: ignore[attr-defined]
    level = logging.getLevelName(os.environ.get("LMEVAL_LOG_LEVEL", "INFO").upper())
    logger.setLevel(level if isinstance(level, int) else logging.INFO)
    logger.addHandler(handler)
    logger.propagate = False


def main() -> None:
    import sys

    from medfuzz.models.failures import environment_secrets, redact_log_records
    from medfuzz.tasks.lm_eval.hook_options import command_line_secrets

    # lm-eval logs a failed request's raw body (a 401 may echo the key) and its model arguments: no key in a log
    redact_log_records([*environment_secrets(), *command_line_secrets(sys.argv[1:])])
    _install_task_path()
    _show_hook_logs()
    register_models()
    from lm_eval.__main__ import cli_evaluate

    from medfuzz.errors import MedfuzzError

    try:
        cli_evaluate()
    except MedfuzzError as err:  # a misspelt --metadata option, a bad data file: one line, not a traceback
        raise SystemExit(f"medfuzz-lm-eval: {err}") from None


if __name__ == "__main__":
    main()
