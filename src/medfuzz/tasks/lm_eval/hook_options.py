"""The one reader of every medfuzz lm-eval hook's options: known names only, the closest known name otherwise.

lm-eval calls a ``custom_dataset`` hook with one mapping: the task YAML's ``metadata`` (``version``; lm-eval
adds ``config_source``), ``--metadata`` and, merged in by ``simple_evaluate``, every ``--model_args`` entry.
One ``--metadata`` reaches every task of a run, so a name is known when *some* medfuzz hook uses it (``turns``
reaches the TCES hook in a ``tces_medqa_drugs,medfuzz_medqa`` run); a name may be aimed at one task family or
benchmark by a prefix (``tces_sampler``, ``medguard_seed``, ``medqa_data``: any key of ``benchmarks.registry``;
the prefixed value wins), and a prefixed name must be one that family uses. ``--model_args`` names are left to
the model: the reader finds them in lm-eval's ``simple_evaluate`` call that is building the task (its
``model_args`` argument), which is where lm-eval merges them. A name meant for a non-medfuzz task of the same run
(lm-eval's ``--metadata`` is shared) goes in ``ignore_options`` (comma list). Everything else stops the run
before any model call with one ``ConfigError`` that names every unknown option and the closest known name.

Each family (one per method, from the method registry ``medfuzz.records.methods``) lists the names it uses and
the names it refuses with a reason (a parameter that exists in Inspect but has no effect here).

Secrets are refused by every hook, in ``--metadata`` and ``--model_args`` alike (``secret_name``: ``api_key``,
``key``, ``auth_token``, ``token``, ``header``, ``password``, ...): ``simple_evaluate`` writes ``model_args``
verbatim into ``results_*.json`` (``config.model_args``) and merges it with ``--metadata`` into every task's
``metadata``, which is written there too, and no hook can redact what lm-eval writes. Nothing is lost by
refusing: lm-eval's API models ignore an ``api_key`` argument (``local-completions``, ``local-chat-completions``
and ``openai-*`` read ``OPENAI_API_KEY``) and medfuzz's attack path reads the variable named by ``api_key_env``.

The method parameters themselves come from the config dataclasses (``dataclasses.fields``), so a new
``MedFuzzConfig`` field is known here without an edit, and a new method's family with its registration.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any

from medfuzz.benchmarks import registry
from medfuzz.models.failures import secret_name
from medfuzz.options import ConfigError, did_you_mean
from medfuzz.records.keys import MODEL_LABEL  # the report's name of the model: no hook reads it
from medfuzz.records.methods import METHODS

LM_EVAL_KEYS = frozenset({"version", "config_source"})  # what lm-eval itself puts into a task's metadata
IGNORE = "ignore_options"

SECRET_REASON = ("a secret, refused: lm-eval writes --model_args and --metadata verbatim into results_*.json "
                 "(config.model_args and every task's metadata). Set the key in an environment variable "
                 "instead: OPENAI_API_KEY for local-completions, local-chat-completions and openai-* (lm-eval's "
                 "API models read it and ignore an api_key argument), HF_TOKEN for Hugging Face; medfuzz's "
                 "attack path reads the variable named by api_key_env (default OPENAI_API_KEY). A tokenizer "
                 "endpoint that needs auth_token: use tokenizer_backend=huggingface with a local tokenizer")


def refuse_secret_model_args(model_args: str | Mapping[str, Any], where: str = "--model_args") -> None:
    """Stop with the hooks' refusal before anything runs when lm-eval model arguments name a secret (for a
    command that builds an lm-eval run, e.g. ``medfuzz run --lm-eval MODEL:ARGS``, so it fails at start-up
    rather than after the Inspect half); the value is never shown."""
    names = [str(k) for k in model_args] if isinstance(model_args, Mapping) else \
        [part.split("=", 1)[0].strip() for part in model_args.split(",") if "=" in part]
    secrets = [name for name in names if secret_option(name)]
    if secrets:
        raise ConfigError(f"{where}: " + "; ".join(f"{name}: {SECRET_REASON}" for name in secrets))


def command_line_secrets(argv: Sequence[str]) -> list[str]:
    """The values of secret-named entries in an lm-eval command line's ``--model_args`` (``k=v,...`` or JSON)
    and ``--metadata`` (JSON), and of the variable an ``api_key_env`` names: lm-eval logs the arguments
    ("Initializing ... with arguments") before a hook can refuse them, and a provider may echo the key in an
    error body lm-eval logs, so the CLI redacts them from its logs (``models.failures.redact_log_records``)."""
    found: list[str] = []
    argv = [part for arg in argv for part in (arg.split("=", 1) if arg.startswith("--") and "=" in arg else [arg])]
    for flag, value in itertools.pairwise(argv):
        if flag not in ("--model_args", "--metadata"):
            continue
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
        if isinstance(parsed, dict):
            found += [str(v) for k, v in parsed.items() if secret_option(str(k)) and v not in (None, "")]
            found += [os.environ[str(v)] for k, v in parsed.items()
                      if _split(str(k))[1] == "api_key_env" and os.environ.get(str(v))]
    return found


def families() -> dict[str, tuple[frozenset[str], dict[str, str]]]:
    """``{family prefix: (names it uses, {name it refuses: why})}``, one family per registered method with lm-eval
    hooks (``records.methods``: ``lm_eval_family``, ``lm_eval_options``, ``lm_eval_refused``)."""
    return _families(tuple((m.lm_eval_family, m.lm_eval_options, tuple(m.lm_eval_refused.items()))
                           for m in METHODS.values() if m.lm_eval_family and m.lm_eval_options))


@cache
def _families(specs: tuple[Any, ...]) -> dict[str, tuple[frozenset[str], dict[str, str]]]:
    """``families`` for one state of the registry (cached: every option of a hook call asks)."""
    return {family: (frozenset(options()) - {name for name, _ in refused}, dict(refused))
            for family, options, refused in specs}


def known_names() -> frozenset[str]:
    """Every name some medfuzz hook uses (what a plain name must be)."""
    return frozenset().union(*(known for known, _ in families().values()))


def refusal(name: str, family: str | None = None) -> str | None:
    """Why ``name`` is refused (by ``family``, else by any family that uses no such name), if it is."""
    if family is not None:
        return families()[family][1].get(name)
    for _, refused in families().values():
        if name in refused:
            return refused[name]
    return None


def _frame(function: str, module: str) -> Any:
    """The innermost running call of lm-eval's ``module.function`` above this hook (None outside one): lm-eval
    does not pass a ``custom_dataset`` hook its run's settings, only the merged metadata."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == function and frame.f_globals.get("__name__") == module:
            return frame
        frame = frame.f_back  # type: ignore[assignment]
    return None


def model_arg_names() -> frozenset[str]:
    """The ``--model_args`` names lm-eval merged into the options: the ``model_args`` of the ``simple_evaluate``
    call that is building this task (empty outside one: then nothing was merged)."""
    frame = _frame("simple_evaluate", "lm_eval.evaluator")
    return frozenset(_parse_model_args(frame.f_locals.get("model_args"))) if frame is not None else frozenset()


def metadata_names() -> frozenset[str]:
    """The names the user gave in lm-eval's ``--metadata`` on its command line (read from the CLI's parsed
    arguments, since lm-eval merges ``--model_args`` into the metadata before a hook sees it): a name given in
    both ``--model_args`` and ``--metadata`` is then an option too. Empty outside lm-eval's CLI."""
    frame = _frame("_execute", "lm_eval._cli.run")
    value = getattr(frame.f_locals.get("args"), "metadata", None) if frame is not None else None
    if isinstance(value, str) and value.strip():
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            from lm_eval.utils import simple_parse_args_string

            value = simple_parse_args_string(value)
    return frozenset(str(k) for k in value) if isinstance(value, Mapping) else frozenset()


def evaluate_metadata() -> dict[str, Any]:
    """``simple_evaluate(metadata=...)`` of the call building this task. lm-eval hands it to the tasks only when
    it builds the ``TaskManager`` itself; with the caller's own ``TaskManager(include_path=...)`` it is dropped
    without a word, so the hooks read it here (``TaskManager(metadata=...)`` wins over it)."""
    frame = _frame("simple_evaluate", "lm_eval.evaluator")
    value = frame.f_locals.get("metadata") if frame is not None else None
    return dict(value) if isinstance(value, Mapping) else {}


def lm_eval_doc_limit() -> int | None:
    """lm-eval's ``--limit`` when it counts docs (an integer; a fraction needs every doc to count from), read
    from the ``simple_evaluate`` call that is building this task, since lm-eval does not pass it to a dataset
    hook and cuts the built dataset afterwards to its first N docs. ``None`` outside such a call, without a
    limit, with a fractional limit or with ``--samples`` (which picks docs by index)."""
    frame = _frame("simple_evaluate", "lm_eval.evaluator")
    if frame is None:
        return None
    limit, samples = frame.f_locals.get("limit"), frame.f_locals.get("samples")
    if samples is None and limit is not None and float(limit) >= 1 and float(limit).is_integer():
        return int(limit)
    return None


def _parse_model_args(model_args: Any) -> Iterable[str]:
    if isinstance(model_args, Mapping):
        return [str(k) for k in model_args]
    if isinstance(model_args, str) and model_args.strip():
        from lm_eval.utils import simple_parse_args_string

        return list(simple_parse_args_string(model_args))
    return []


def secret_option(name: str) -> bool:
    """Whether an option carries a secret, as named or after its family/benchmark prefix (``medfuzz_token``)."""
    return secret_name(name) or secret_name(_split(name)[1])


def _split(name: str) -> tuple[str | None, str]:
    """(prefix, rest) for ``<family or benchmark>_<rest>``, else (None, name)."""
    for prefix in (*families(), *registry.BENCHMARKS):  # the benchmarks: benchmarks.registry
        if name.startswith(f"{prefix}_") and len(name) > len(prefix) + 1:
            return prefix, name[len(prefix) + 1:]
    return None, name


def _ignored(raw: Mapping[str, Any]) -> set[str]:
    value = raw.get(IGNORE) or ""
    names = value.split(",") if isinstance(value, str) else list(value)
    return {str(n).strip() for n in names if str(n).strip()}


def _suggest(name: str, candidates: Iterable[str]) -> str:
    return did_you_mean(name, candidates)


def read_options(raw: Mapping[str, Any], family: str, *, task: str, benchmark: str | None = None) -> dict[str, Any]:
    """The options of one hook call: every name checked (see the module docstring), prefixes folded (the plain
    value, then ``<benchmark>_<name>``, then ``<family>_<name>``, later wins), only known names returned."""
    raw = {**evaluate_metadata(), **raw}
    model_args = model_arg_names() - metadata_names()
    ignored = _ignored(raw)
    known, _ = families()[family]
    everything = known_names()
    unknown: list[str] = []
    reasons: list[str] = []
    plain: dict[str, Any] = {}
    by_benchmark: dict[str, Any] = {}
    by_family: dict[str, Any] = {}
    for name, value in raw.items():
        if secret_option(name):  # from --model_args and in ignore_options too: lm-eval writes them
            reasons.append(f"{name}: {SECRET_REASON}")
            continue
        if name in LM_EVAL_KEYS or name in (IGNORE, MODEL_LABEL) or name in ignored or name in model_args:
            continue
        prefix, rest = _split(name)
        if prefix in families():
            if rest in families()[prefix][0]:
                if prefix == family:
                    by_family[rest] = value
            elif (why := refusal(rest, prefix)) is not None:
                reasons.append(f"{name}: {why}")
            else:
                unknown.append(f"{name!r}{_suggest(rest, families()[prefix][0]) or _suggest(name, everything)}")
            continue
        if prefix is not None:  # a benchmark: any name some hook uses
            if rest in everything:
                if prefix == benchmark:
                    by_benchmark[rest] = value
            else:
                unknown.append(f"{name!r}{_suggest(rest, everything)}")
            continue
        if name in everything:
            if name in known:
                plain[name] = value
        elif (why := refusal(name, family) or refusal(name)) is not None:
            reasons.append(f"{name}: {why}")
        else:
            unknown.append(f"{name!r}{_suggest(name, everything)}")
    if unknown or reasons:
        parts = []
        if unknown:
            parts.append(f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} in --metadata. "
                         f"Known for {family} tasks: {', '.join(sorted(known))}. (--model_args names are left "
                         f"to the model; a name meant for another task of this run goes in {IGNORE})")
        parts += reasons
        raise ConfigError(f"{task}: " + "; ".join(parts))
    return {**plain, **{k: v for k, v in by_benchmark.items() if k in known}, **by_family}
