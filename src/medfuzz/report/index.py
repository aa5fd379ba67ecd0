"""``DIR/index.html``: one self-contained page over everything ``medfuzz report`` found and wrote.

First "Robustness at a glance" (``medfuzz.report.overview``): one card per target model with each method's
headline numbers and their intervals, banners for runs that failed or whose every sample is an LLM error, one
figure comparing the models when there are several, and a line on why the harnesses differ where both appear;
``summary.json`` and ``model-index.yaml`` beside the page hold the same numbers. Then one section per method
(baselines, MedFuzz, TCES, MedGuard, lm-eval results) and, inside it, one card per run:
the model(s) and their roles, the data, the parameters, the headline metrics and what the run cost (model calls
and tokens per role from the engines' usage ledgers, else Inspect's own token counts per model/role). Under the
runs come the tables and plots the per-method renderers wrote (``written``): PNGs are embedded as base64 so the
page can be mailed or archived alone; CSV/HTML files stay beside it and are linked; Markdown tables are shown.

Reading is best effort per file: a log this page cannot read is listed with the reason, never fatal, since the
renderers have already written their own files by the time this runs. Every part of the page is drawn guarded
(``problems.Problems.guard``): a part that raises is shown as an error in its place, and the problems of the
whole render are listed at the top. Log paths are shown relative to the report folder, or by file name
(``shown_path``), never as absolute paths.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from medfuzz.records.keys import CONFIG_KEY, METHOD_KEY, method_of, recorded_config
from medfuzz.records.methods import METHODS
from medfuzz.report.format import Shown, display, html_page, markdown_tables, path_like, shown_path, table
from medfuzz.report.outputs import write_text_atomically
from medfuzz.report.problems import Problems

INDEX = "index.html"
# the page's sections that are no method's: (key, title, blurb, the method section each follows; None: last)
OTHER_SECTIONS = (
    ("sweep", "TCES sweeps", "medfuzz sweep tces: accuracy after the attack and Gini-Simpson diversity against the "
     "PDWS exponent n per entity type (paper Fig. 2), and ASR against DiscreteZOO's gradient points M (App. E); the "
     "runs themselves are listed under TCES.", "tces"),
    ("compare", "MedFuzz / TCES across models", "Attacked accuracy per model on the same items, pairwise exact "
     "McNemar (Holm) and transfer: model B on model A's successful adversarial items.", "medguard"),
    ("lm-eval", "lm-eval results", "Tasks run through lm-evaluation-harness (log-likelihood of the answer letters).",
     None),
)


def page_sections() -> dict[str, tuple[str, str]]:
    """Section key -> (title, one line on what the numbers mean), in the page's order: every registered method's
    section (``records.methods``), each followed by the other sections that follow it, then the rest."""
    out: dict[str, tuple[str, str]] = {}
    for key, method in METHODS.items():
        out[key] = (method.section, method.blurb)
        out.update((other, (title, blurb)) for other, title, blurb, after in OTHER_SECTIONS if after == key)
    out.update((other, (title, blurb)) for other, title, blurb, _ in OTHER_SECTIONS if other not in out)
    return out


@dataclass
class RunCard:
    """What the page shows about one run."""

    method: str
    title: str
    source: Path
    facts: dict[str, Any] = field(default_factory=dict)  # model, roles, data, ... (name -> text)
    metrics: dict[str, Any] = field(default_factory=dict)
    parameters: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, dict[str, int]] = field(default_factory=dict)  # role -> calls / tokens
    usage_note: str = ""
    max_calls: dict[str, int] = field(default_factory=dict)
    problem: str = ""  # why the run's numbers cannot be trusted (failed, every sample an LLM error): a banner
    anchor: str = ""


# ---------------------------------------------------------------------------------------- reading


def _ledger_usage(value: Any, into: dict[str, dict[str, int]]) -> None:
    """Add up every engine ``usage`` ledger (``{role: {calls, input_tokens, ...}}``) found in score metadata."""
    if isinstance(value, Mapping):
        for key, inner in value.items():
            if key == "usage" and isinstance(inner, Mapping) and inner and all(
                    isinstance(v, Mapping) and "calls" in v for v in inner.values()):
                for role, counts in inner.items():
                    total = into.setdefault(str(role), {})
                    for name, count in counts.items():
                        if isinstance(count, int | float):
                            total[name] = total.get(name, 0) + int(count)
            else:
                _ledger_usage(inner, into)
    elif isinstance(value, list):
        for inner in value:
            _ledger_usage(inner, into)


def _inspect_usage(log: Any) -> dict[str, dict[str, int]]:
    """Inspect's own token counts: per role when it kept them, else per model (no call counts)."""
    stats = log.stats
    per = getattr(stats, "role_usage", None) or stats.model_usage or {}
    return {name: {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens} for name, u in per.items()}


def medguard_key(name: str) -> str:
    """A MedGuard metric key as the Inspect task writes it now: logs from before the ``medguard_`` prefix
    (``overall``, ``defense_se``, ...) read as if written today, so users' old logs keep their report."""
    return name if name.startswith("medguard_") else f"medguard_{name}"


def _metric_values(log: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    medguard = method_of(log.eval.metadata, log.eval.task) == "medguard"
    for score in (log.results.scores if log.results else []):
        for name, m in score.metrics.items():
            key = f"{name} ({score.name})" if name in ("stderr", "accuracy") else name
            values[medguard_key(key) if medguard and score.name == "medguard" else key] = m.value
    return values


def _roles(log: Any) -> dict[str, str]:
    roles = {"target": str(log.eval.model)}
    for role, config in (getattr(log.eval, "model_roles", None) or {}).items():
        config = config[0] if isinstance(config, list) and config else config
        roles[str(role)] = str(getattr(config, "model", config))
    return roles


def _paired(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """``x`` and ``x_se`` as one ``(value, se)`` entry (MedGuard's indices and their bootstrap SEs)."""
    paired: dict[str, Any] = {}
    for name, value in metrics.items():
        if name.endswith("_se") and name[:-3] in metrics:
            continue
        paired[name] = (value, metrics[f"{name}_se"]) if f"{name}_se" in metrics else value
    return paired


def sample_failure(sample: Any) -> str | None:
    """Why a sample has no answer to score (it errored, or ended as an LLM error after the retries), else None."""
    if sample.error:
        return str(getattr(sample.error, "message", sample.error)).splitlines()[0]
    for score in (sample.scores or {}).values():
        metadata = score.metadata or {}
        if metadata.get("llm_error"):  # baselines and MedGuard: the failure policy's reason
            return str(metadata["llm_error"])
        record = metadata.get("record")
        if isinstance(record, Mapping) and record.get("outcome") == "llm_error":  # TCES
            return str(record.get("reason") or "LLM error")
        stories = metadata.get("replicates")
        if isinstance(stories, list) and stories and all(s.get("outcome") == "llm_error" for s in stories):
            return next((str(s["error"]) for s in stories if s.get("error")), "LLM error in every replicate")
    return None


def run_problem(log: Any) -> str:
    """The banner of a run whose numbers cannot be read as results, with its cause; empty for a sound run."""
    # a run stopped by the run checks (tasks/inspect/run_checks.py: every sample an LLM error) is shown by its
    # samples' causes, which name the problem more plainly than the exception text; any other failed run by its
    # error; a finished run whose every sample failed (logs from before the run checks) by its samples
    reasons = [sample_failure(s) for s in log.samples or []]
    stopped_by_checks = log.status != "success" and "AllLLMErrors" in str(getattr(log.error, "message", ""))
    if reasons and all(reasons) and (log.status == "success" or stopped_by_checks):
        from medfuzz.report.overview import problem_counts

        return f"Every sample ended as an LLM error: {problem_counts([str(r) for r in reasons])}"
    if log.status != "success":
        message = str(getattr(log.error, "message", log.error) or "no error message in the log")
        return f"Run {log.status}: {message}"
    return ""


def _short(value: Any) -> str:
    """A parameter in a card title: lists as words (a count when long), never a Python repr."""
    if isinstance(value, list | tuple):
        more = f" and {len(value) - 3} more" if len(value) > 3 else ""
        return ", ".join(map(str, value[:3])) + more
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def inspect_card(path: Path) -> RunCard | None:
    """The card of an Inspect log; ``None`` when the file is not an Inspect log."""
    from medfuzz.report.log_reader import read_log

    try:
        log = read_log(path)
    except Exception:  # not an Inspect log (lm-eval JSON, a plot, ...): another reader's business
        return None
    method = method_of(log.eval.metadata, log.eval.task)
    metadata = dict(log.eval.metadata or {})
    config = recorded_config(metadata)
    for key in (CONFIG_KEY, "medfuzz"):  # the config, read once above (an older MedFuzz log's nested dict)
        metadata.pop(key, None)
    max_calls = metadata.pop("max_calls", None)
    parameters = {**{k: v for k, v in metadata.items() if k not in (METHOD_KEY, "medguard")},
                  **config, **(log.eval.task_args or {})}
    named = METHODS[method].key_parameters if method in METHODS else ()
    key = ", ".join(f"{k} {_short(parameters[k])}" for k in named if k in parameters)
    card = RunCard(method=method, title=f"{log.eval.task} · {log.eval.model}" + (f" · {key}" if key else ""),
                   source=path, parameters=parameters, max_calls=dict(max_calls or {}))
    data = [str(part) for part in (metadata.get("benchmark") or log.eval.dataset.name,
                                   metadata.get("data") or log.eval.dataset.location) if part]
    if metadata.get("split"):
        data.append(f"split {metadata['split']}")
    card.facts = {"models": ", ".join(f"{role}: {model}" for role, model in _roles(log).items()),
                  "status": log.status, "samples": len(log.samples or []), "data": data or "–",
                  "started": log.eval.created}
    card.metrics = _paired(_metric_values(log))
    card.problem = run_problem(log)
    for sample in log.samples or []:
        for score in (sample.scores or {}).values():
            _ledger_usage(score.metadata or {}, card.usage)
    if card.usage:
        card.usage_note = "calls and tokens per role, from the engine's usage ledger in each sample's score"
    else:
        card.usage = _inspect_usage(log)
        card.usage_note = "tokens as Inspect counted them (it does not count calls)"
    return card


def lm_eval_card(path: Path) -> RunCard | None:
    """The card of an lm-eval ``results_*.json``; ``None`` for any other JSON."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict) or "configs" not in data:
        return None
    from medfuzz.report.runs import lm_eval_model_name

    config = data.get("config") or {}
    tasks = sorted(data["results"])
    card = RunCard(method="lm-eval", title=f"lm-eval · {', '.join(tasks)}", source=path)
    args = model_args_text(config.get("model_args"))
    card.facts = {"model": f"{lm_eval_model_name(data)} (lm-eval --model {config.get('model', '?')}"
                           + (f" --model_args {args})" if args else ")"),
                  "samples": ", ".join(f"{t}: {_lm_eval_samples(data, t)}" for t in tasks),
                  "data": next((c.get("metadata", {}) for t in tasks  # groups have no config
                                if isinstance(c := (data.get("configs") or {}).get(t), dict)), {}) or "–",
                  "started": _lm_eval_started(data.get("date"))}
    for task, values in data["results"].items():
        for key, value in values.items():
            if "," in key and not key.startswith("alias") and "_stderr" not in key:
                stderr = values.get(key.replace(",", "_stderr,", 1))
                card.metrics[f"{task} · {key.split(',')[0]}"] = (value, stderr)
    card.parameters = {k: config[k] for k in ("batch_size", "limit", "num_fewshot", "random_seed") if k in config}
    card.usage_note = "lm-eval records no per-call usage; sample counts are above"
    return card


def model_args_text(args: Any) -> str:
    """lm-eval's ``model_args`` as ``name=value`` words: it keeps them as the string given on the command line or
    as the dict a Python caller passed (shown as words, never a dict repr); a file path as its name."""
    if isinstance(args, Mapping):
        pairs = [(str(k), v) for k, v in args.items()]
    elif isinstance(args, str) and args:
        pairs = [tuple(part.split("=", 1)) if "=" in part else (part, None) for part in args.split(",")]
    else:
        return ""
    shown = []
    for name, value in pairs:
        text = str(value) if value is not None else ""
        if path_like(text):
            text = Path(text).name
        shown.append(f"{name}={text}" if value is not None else name)
    return ", ".join(shown)


def _lm_eval_samples(data: dict[str, Any], task: str) -> str:
    """A task's evaluated docs; for a group (which lm-eval gives no count) the sum over its subtasks."""
    counts = data.get("n-samples") or {}
    if task in counts:
        return str(counts[task].get("effective", "?"))
    subtasks = (data.get("group_subtasks") or {}).get(task) or []
    found = [counts[t]["effective"] for t in subtasks if isinstance(counts.get(t), dict) and "effective" in counts[t]]
    return f"{sum(found)} (group of {len(subtasks)} tasks)" if found else "?"


def _lm_eval_started(date: Any) -> Any:
    """lm-eval writes its start as Unix seconds; shown as ISO time (UTC) like the Inspect cards."""
    if isinstance(date, int | float):
        return datetime.fromtimestamp(date, tz=UTC).isoformat(timespec="seconds")
    return date


# ---------------------------------------------------------------------------------------- writing


def _flat(parameters: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested parameter dicts as dotted rows (``medfuzz.turns``) so every value gets its own cell."""
    rows: list[tuple[str, Any]] = []
    for name, value in parameters.items():
        if isinstance(value, Mapping) and value:
            rows += _flat(value, f"{prefix}{name}.")
        else:
            rows.append((f"{prefix}{name}", value))
    return rows


def _usage_table(card: RunCard) -> str:
    if not card.usage and not card.max_calls:
        return f"<p class=note>{html.escape(card.usage_note)}</p>"
    roles = list(dict.fromkeys([*card.usage, *card.max_calls]))
    columns = [c for c in ("calls", "errors", "input_tokens", "output_tokens")
               if any(c in card.usage.get(r, {}) for r in roles)]
    head = "".join(f"<th>{c.replace('_', ' ')}</th>" for c in columns)
    head += "<th>max calls (bound logged up front)</th>" if card.max_calls else ""
    rows = []
    for role in roles:
        cells = "".join(f"<td class=num>{display(card.usage.get(role, {}).get(c, 0))}</td>" for c in columns)
        if card.max_calls:
            cells += f"<td class=num>{display(card.max_calls.get(role, 0))}</td>"
        rows.append(f"<tr><th>{html.escape(role)}</th>{cells}</tr>")
    return (f"<div class=scroll><table><tr><th>role</th>{head}</tr>{''.join(rows)}</table></div>"
            f"<p class=note>{html.escape(card.usage_note)}</p>")


def _headline(card: RunCard, glance: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The card's metric rows, labelled: first the run's glance numbers (with their intervals) when it has
    them, then every other metric the log holds."""
    from medfuzz.report.labels import label

    if card.method == "baseline":
        m = card.metrics
        rows = [(label("baseline_acc"), (m.get("baseline_acc"), m.get("baseline_stderr"))),
                (label("baseline_llm_errors"), m.get("baseline_llm_errors"))]
        if "lenient_accuracy" in m:
            rows += [(label("lenient_accuracy"), (m["lenient_accuracy"], m.get("stderr (lenient_choice)"))),
                     (label("lenient_needed"), m.get("lenient_needed"))]
        return rows
    result = glance.get(str(card.source))
    shown = {n.metric for n in result.numbers} if result is not None else set()
    rows = [(label(n.metric), Shown(n.shown())) for n in result.numbers] if result is not None else []
    return rows + [(label(k) if " · " not in k else " · ".join([k.split(" · ")[0], label(k.split(" · ")[1])]), v)
                   for k, v in card.metrics.items() if not isinstance(v, dict) and k not in shown]


def _card_html(card: RunCard, out_dir: Path, glance: Mapping[str, Any]) -> str:
    facts = table(card.facts.items())
    metrics = table(_headline(card, glance), ("metric", "value"))
    nested = [(k, v) for k, v in card.metrics.items() if isinstance(v, dict)]
    for name, values in nested:
        metrics += f"<p class=note>{html.escape(name)}: " + ", ".join(
            f"{html.escape(str(k))} {display(v)}" for k, v in values.items()) + "</p>"
    rows = _flat(card.parameters)
    params = table(sorted(rows))
    source = shown_path(card.source, out_dir)
    banner = f"<p class=banner>{html.escape(card.problem)}</p>" if card.problem else ""
    return (f"<div class=run id={card.anchor}><h3>{html.escape(card.title)}</h3>{banner}"
            f"<div class=grid><div>{facts}</div><div>{metrics}</div></div>"
            f"<h4>Cost</h4>{_usage_table(card)}"
            + (f"<details><summary>Parameters ({len(rows)})</summary>{params}</details>" if params else "")
            + f"<p class=note>log: <code>{html.escape(str(source))}</code></p></div>")


def _file_html(path: Path, out_dir: Path) -> str:
    name = html.escape(path.name)
    link = html.escape(shown_path(path, out_dir))
    if path.suffix == ".png":
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return (f"<figure class=file><img src=\"data:image/png;base64,{data}\" alt=\"{name}\">"
                f"<figcaption>{name}</figcaption></figure>")
    if path.suffix == ".md":
        return f"<div class=\"md file\">{markdown_tables(path.read_text(encoding='utf-8'))}</div>"
    return f"<p class=file>File: <a href=\"{link}\">{name}</a></p>"


def _read_cards(logs: list[Path], problems: Problems, out_dir: Path) -> dict[str, list[RunCard]]:
    """The run card of each log; a log that should be a run and is not (an ``.eval`` that is not an Inspect log,
    a ``results_*.json`` that is not lm-eval's) is a problem."""
    cards: dict[str, list[RunCard]] = {key: [] for key in page_sections()}
    for path in logs:
        path = Path(path)
        before = len(problems)
        if path.suffix == ".eval" or (path.suffix == ".json" and not path.name.startswith("results_")):
            card = problems.guard(f"run card of {path.name}", inspect_card, path, default=None)
        elif path.name.startswith("results_") and path.suffix == ".json":
            card = problems.guard(f"run card of {path.name}", lm_eval_card, path, default=None)
        else:
            card = None
        if card is None:
            if len(problems) == before and (path.suffix == ".eval" or path.name.startswith("results_")):
                problems.add(shown_path(path, out_dir), "not readable as a run")
            continue
        card.anchor = f"run-{sum(map(len, cards.values())) + 1}"
        cards.setdefault(card.method, []).append(card)
    return cards


def _count(runs: int, files: int) -> str:
    """The nav's count of what a section shows: its run cards, else its tables and plots."""
    if runs:
        return f"{runs} run{'s' * (runs != 1)}"
    return f"{files} table{'s' * (files != 1)} and plots" if files else "empty"


def write_index(logs: list[Path], out_dir: Path, written: Mapping[str, list[Path]],
                problems: Problems | None = None, failed: Mapping[str, str] | None = None,
                page_files: list[Path] | None = None) -> Path | None:
    """Write ``out_dir/index.html`` over the runs in ``logs`` and the files in ``written`` (renderer name ->
    files), with ``summary.json`` and ``model-index.yaml`` beside it (``overview.write_files``); returns the
    page's path, or ``None`` (and writes nothing) when there is no run, no file and no problem to show.
    ``failed`` (section key -> message) are the sections whose renderer failed: each is shown as an error in its
    place. Every part of the page is drawn guarded: a part that raises is an error in its place and a problem
    (in ``problems``, which the page lists at the top), and the rest is still written."""
    import medfuzz.report.overview as overview

    out_dir = Path(out_dir)
    problems = Problems(echo=False) if problems is None else problems
    failed = dict(failed or {})
    cards = _read_cards(logs, problems, out_dir)
    models = problems.guard("Robustness at a glance", overview.build, logs, default=None)
    if models is None:
        failed["glance"] = problems[-1].error
        models = []
    glance = {source: result for card in models for result in card.results for source in result.sources
              if len(result.sources) == 1}
    sections, nav = [], []
    for key, (title, blurb) in [*page_sections().items(), ("other", ("Other Inspect runs", ""))]:
        runs, files = cards.get(key, []), list(written.get(key, []))
        if not runs and not files and key not in failed:
            continue
        anchor = re.sub(r"[^a-z0-9]+", "-", key)
        count = _count(len(runs), len(files)) if key not in failed else "failed"
        nav.append(f"<a href=\"#{anchor}\">{html.escape(title)} ({count})</a>")
        body = _failed_html(failed[key]) if key in failed else ""
        body += "".join(_guarded_html(problems, f"{title}: run card {card.source.name}", _card_html, card, out_dir,
                                      glance) for card in runs)
        if files:
            body += "<h3>Tables and plots</h3>" + "".join(
                _guarded_html(problems, f"{title}: {p.name}", _file_html, p, out_dir) for p in files)
        sections.append(f"<section id={anchor}><h2>{html.escape(title)}</h2>"
                        f"<p class=note>{html.escape(blurb)}</p>{body}</section>")
    if not sections and not problems:
        return None
    banners = [f"{card.title}: {card.problem}" for runs in cards.values() for card in runs if card.problem]
    shown = _shown_sources(models, out_dir)  # the logs as the page names them: relative, never absolute
    glance_html = (_failed_html(failed["glance"]) if "glance" in failed else
                   _guarded_html(problems, "Robustness at a glance", overview.section_html, shown, banners))
    first = (f"<section id=glance><h2>Robustness at a glance</h2><p class=note>One card per target model: each "
             "number with its 95 % Wilson interval [low, high] and its counts, or ± its standard error; "
             "significance at the run's own α with the valid permutation p-value.</p>"
             f"{glance_html}</section>")
    nav.insert(0, f"<a href=\"#glance\">Robustness at a glance ({len(models)} model{'s' * (len(models) != 1)})</a>")
    twins = problems.guard(f"{overview.SUMMARY} and {overview.MODEL_INDEX}", overview.write_files, shown, out_dir,
                           default=None) or []
    if page_files is not None:
        page_files.extend(twins)
    cards_files = ", ".join(p.name for p in twins[1:]) or overview.MODEL_INDEX
    listed = [p.line() for p in problems]
    if listed:
        nav.insert(0, f"<a href=\"#problems\">Problems ({len(listed)})</a>")
    page = html_page("medfuzz report", f"<h1>medfuzz report</h1><p class=note>{len(logs)} file(s) read; written "
                     f"{datetime.now().isoformat(timespec='seconds')}. Plots are embedded; the CSV, HTML and "
                     f"Markdown files, {overview.SUMMARY} and {html.escape(cards_files)} (a model card's "
                     "model-index block, one model each) sit beside this page.</p>"
                     f"<nav>{''.join(nav)}</nav>{_problems_html(listed)}{first}{''.join(sections)}")
    index = out_dir / INDEX
    write_text_atomically(index, page)
    return index


def _guarded_html(problems: Problems, where: str, draw: Callable[..., str], *args: Any) -> str:
    """``draw(*args)``, or the error in its place when it raises (recorded in ``problems``)."""
    drawn = problems.guard(where, draw, *args, default=None)
    return _failed_html(problems[-1].error) if drawn is None else drawn


def _failed_html(message: str) -> str:
    return f"<p class=\"banner failed\">This part of the report could not be drawn: {html.escape(message)}</p>"


def _problems_html(lines: list[str]) -> str:
    if not lines:
        return ""
    items = "".join(f"<li class=bad>{html.escape(line)}</li>" for line in lines)
    # a div, not a section: the page's sections are the methods (and readers cut the page at "</section>")
    return (f"<div id=problems class=problems><h2>Problems ({len(lines)})</h2><p class=note>What this report could "
            f"not draw or could not use; medfuzz report exits 1 while any is left.</p><ul>{items}</ul></div>")


def _shown_sources(models: list[Any], out_dir: Path) -> list[Any]:
    """The first screen's cards with their log paths as the page shows them (``shown_path``)."""
    from dataclasses import replace

    return [replace(card, results=[replace(r, sources=[shown_path(s, out_dir) for s in r.sources])
                                   for r in card.results]) for card in models]


def write_fallback_page(out_dir: Path, written: Mapping[str, list[Path]], problems: Problems) -> Path:
    """The page when ``write_index`` itself failed: the problems and links to every file the renderers wrote."""
    files = "".join(f"<li><a href=\"{html.escape(shown_path(p, out_dir))}\">{html.escape(p.name)}</a></li>"
                    for paths in written.values() for p in paths)
    page = html_page("medfuzz report", f"<h1>medfuzz report</h1>{_problems_html([p.line() for p in problems])}"
                                        f"<h2>Files written</h2><ul>{files}</ul>")
    index = Path(out_dir) / INDEX
    write_text_atomically(index, page)
    return index
