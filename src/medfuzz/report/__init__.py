"""``medfuzz report``: plots and tables from Inspect logs and lm-eval results.

Each method contributes a module here with ``render(log_paths, out_dir) -> list[Path]`` that picks out the
logs it understands and ignores the rest (named by its spec in ``medfuzz.records.methods``; ``renderers``);
``render_all`` runs every one that is installed, then writes
``index.html`` (``medfuzz.report.index``): one self-contained page over every run and every file written, with
``summary.json`` and the model-index file(s) (``medfuzz.report.overview``) beside it. Every log is parsed once
(``medfuzz.report.log_reader.read_once``), however many renderers look at it. The logs of a run split into shards
(``medfuzz run --shard K/N``) are merged into that one run first (``medfuzz.report.shards``).

The report always lands: a section that fails is shown as an error in its place, an input that cannot be used
(an unreadable ``.eval``, a shard set with a shard missing, shards of two configurations) is named, both on the
console and at the top of the page, and ``render_all`` returns them (``Rendered.problems``) so that ``medfuzz
report`` exits 1. Files a previous render wrote and this one did not are removed (``medfuzz.report.outputs``).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from medfuzz.records.methods import METHODS
from medfuzz.report.log_reader import collect_logs
from medfuzz.report.problems import Problems, describe

__all__ = ["Rendered", "collect_logs", "render_all", "renderers", "usable_logs"]

# the renderers of the sections that are no method's; a method's renderer is named by its spec
# (``records.methods.Method.renderer``, a module's import name)
OTHER_RENDERERS = {"sweep": "medfuzz.report.sweep", "compare": "medfuzz.report.compare"}


def renderers() -> dict[str, str]:
    """The page's section key -> the module that renders it, in the page's order (``index.page_sections``)."""
    from medfuzz.report.index import page_sections

    named = {key: method.renderer for key, method in METHODS.items() if method.renderer}
    return {key: (named.get(key) or OTHER_RENDERERS[key]) for key in page_sections()
            if key in named or key in OTHER_RENDERERS}


class Rendered(dict[str, list[Path]]):
    """What ``render_all`` did: section key -> files written (a dict, as callers have always read it; the page's
    files under ``"index"``) plus ``problems``, every section that failed and every input that could not be used,
    in the order found. ``medfuzz report`` exits 1 when there is any."""

    def __init__(self, problems: Problems) -> None:
        super().__init__()
        self.problems = problems

    @property
    def written(self) -> dict[str, list[Path]]:
        return dict(self)

    @property
    def index(self) -> Path | None:
        return next((p for p in self.get("index", []) if p.name == "index.html"), None)


def render_all(paths: list[Path], out_dir: Path, echo: bool = True) -> Rendered:
    """Every installed renderer over the logs under ``paths``, then the page, ``summary.json`` and
    ``model-index.yaml`` in ``out_dir``. Never stops at one bad section or file: a renderer that raises is
    shown as an error in its section's place, an unreadable input is named, and both are in ``problems`` (each
    also printed on stderr as it is found, unless ``echo`` is off). Files an earlier render wrote into
    ``out_dir`` and this one did not are removed (``medfuzz.report.outputs``)."""
    from medfuzz.report.log_reader import read_once
    from medfuzz.report.outputs import forget_page, previous_files, settle

    logs = collect_logs(paths)  # first: a missing input stops the command before it creates any folder
    inputs = list(logs)
    out_dir.mkdir(parents=True, exist_ok=True)
    previous = previous_files(out_dir)
    forget_page(out_dir, previous)
    problems = Problems(echo)
    written = Rendered(problems)
    with read_once():  # every renderer below gets the same parsed logs (each file parsed once)
        from medfuzz.report.shards import MERGED_DIR, merge_shards

        logs = usable_logs(logs, out_dir, problems)
        logs = merge_shards(logs, out_dir, problems)  # shards of one run become that run, before any statistic
        merged = [p for p in logs if p.parent == out_dir / MERGED_DIR]
        failed = _render_sections(logs, out_dir, written, problems)
        _write_page(logs, out_dir, written, problems, failed)
    settle(out_dir, [*merged, *(p for files in written.values() for p in files)], inputs, previous)
    return written


def _render_sections(logs: list[Path], out_dir: Path, written: Rendered, problems: Problems) -> dict[str, str]:
    """Each renderer, guarded; returns the message of each section that failed (section key -> message)."""
    from medfuzz.report.index import page_sections

    titles = page_sections()
    failed: dict[str, str] = {}
    for key, name in renderers().items():
        title = titles.get(key, (key,))[0]
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:  # that method's reporting is not part of this installation
                continue
            failed[key] = problems.failed(title, err).error
            continue
        except Exception as err:  # a renderer that cannot even be imported is that section's failure alone
            failed[key] = problems.failed(title, err).error
            continue
        files = problems.guard(title, module.render, logs, out_dir, default=None)
        if files is None:
            failed[key] = problems[-1].error
        else:
            written[key] = list(files)
    return failed


def _write_page(logs: list[Path], out_dir: Path, written: Rendered, problems: Problems,
                failed: dict[str, str]) -> None:
    """``index.html`` with ``summary.json`` and ``model-index.yaml``; if the page writer itself fails, a page
    that lists the problems and the files the renderers wrote, so there is always a page to open."""
    from medfuzz.report.index import write_fallback_page, write_index

    twins: list[Path] = []  # summary.json and the model-index file(s), as write_index wrote them
    try:
        index = write_index(logs, out_dir, dict(written), problems=problems, failed=failed, page_files=twins)
    except Exception as err:  # the page's own failure: named, and a plain page written in its place
        problems.failed("index.html", err)
        index = write_fallback_page(out_dir, dict(written), problems)
    if index is not None:  # the page's machine-readable twins first; the page last: the CLI prints it last
        written["index"] = [p for p in twins if p.is_file()] + [index]


def usable_logs(logs: list[Path], out_dir: Path, problems: Problems) -> list[Path]:
    """``logs`` without the files that cannot be read as what their names say (an ``.eval`` that is not an
    Inspect log, a ``results_*.json`` that is not lm-eval's results), each named in ``problems``. Other JSON
    files (``eval-set.json``, ...) pass: a renderer that knows them reads them."""
    from medfuzz.report.format import shown_path
    from medfuzz.report.log_reader import read_log

    usable = []
    for path in logs:
        why = None
        if path.suffix == ".eval":
            try:
                read_log(path)
            except Exception as err:  # corrupt, truncated, or not a log at all
                why = f"not readable as an Inspect log ({describe(err)}); left out of every number"
        elif path.suffix == ".json" and path.name.startswith("results_"):
            why = _lm_eval_problem(path)
        if why is None:
            usable.append(path)
        else:
            problems.add(shown_path(path, out_dir), why)
    return usable


def _lm_eval_problem(path: Path) -> str | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        return f"not readable as lm-eval results ({describe(err)}); left out of every number"
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict) or "configs" not in data:
        return "not lm-eval results (no 'results' and 'configs'); left out of every number"
    return None
