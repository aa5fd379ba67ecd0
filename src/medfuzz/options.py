"""Method parameters from wherever they arrive: Python values, Inspect ``-T`` values, lm-eval ``--metadata``.

Each method has one frozen dataclass of parameters (``MedFuzzConfig``, ``TCESConfig``, ``MedGuardConfig``);
its field defaults are the only place a default is written. ``options_from(cls, raw)`` turns a mapping of raw
values into that dataclass: strings (lm-eval metadata and ``-T`` values may arrive as text) are converted
by the field's annotation, unknown names are rejected with the closest known name, and the dataclass's own
``__post_init__`` checks ranges. Every error names the parameter, so a bad run stops before its first call.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import types
import typing
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import yaml

from medfuzz.errors import MedfuzzError

T = TypeVar("T")
C = TypeVar("C", bound="MethodConfig")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_NONE = {"", "none", "null"}


class ConfigError(MedfuzzError, ValueError):
    """A method parameter with an unknown name, a value of the wrong type or a value out of range."""



def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The known name closest to a misspelt one (difflib's default cutoff), for "did you mean" hints: the one
    matcher every option check uses."""
    close = difflib.get_close_matches(name, sorted(candidates), n=1)
    return close[0] if close else None


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` or ""."""
    close = closest(name, candidates)
    return f" (did you mean {close!r}?)" if close else ""

def as_bool(value: Any, name: str = "value") -> bool:
    """``True``/``False`` from a bool, a 0/1 number or the usual words (lm-eval metadata arrives as text)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ConfigError(f"{name}={value!r} is not a boolean (use true or false)")


def _convert(name: str, value: Any, annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        empty = value is None or (isinstance(value, str) and value.strip().lower() in _NONE)
        if empty and len(args) < len(typing.get_args(annotation)):
            return None
        return _convert(name, value, args[0]) if len(args) == 1 else value
    if value is None:
        raise ConfigError(f"{name} must not be empty")
    if origin is tuple:  # ``tuple[str, ...]``: a comma list on a command line or in metadata
        parts = value.split(",") if isinstance(value, str) else list(value)
        return tuple(str(part).strip() for part in parts if str(part).strip())
    if annotation is bool:
        return as_bool(value, name)
    if annotation is int:
        if isinstance(value, bool):
            raise ConfigError(f"{name}={value!r} is not an integer")
        try:
            number = float(value) if isinstance(value, str) else value
            if isinstance(number, float) and not number.is_integer():
                raise ValueError
            return int(number)
        except (TypeError, ValueError):
            raise ConfigError(f"{name}={value!r} is not an integer") from None
    if annotation is float:
        if isinstance(value, bool):
            raise ConfigError(f"{name}={value!r} is not a number")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name}={value!r} is not a number") from None
    if annotation is str:
        if isinstance(value, Mapping):  # a mapping where text is expected (``columns``): as JSON, which it reads
            return json.dumps(value)
        if isinstance(value, list | tuple):  # Inspect's CLI reads an unquoted ``-T name=a,b`` as ['a', 'b']
            return ",".join(str(part) for part in value)
        return str(value)
    return value


def options_from(cls: type[T], raw: Mapping[str, Any], *, ignore_unknown: bool = False,
                 ignore: Collection[str] = ()) -> T:
    """``cls(**converted raw)``. ``ignore_unknown``: drop names ``cls`` does not have (lm-eval merges
    ``--model_args`` into the metadata); else they are an error. ``ignore``: names always dropped."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    label = getattr(cls, "LABEL", cls.__name__)
    values: dict[str, Any] = {}
    for name, value in raw.items():
        if name in ignore:
            continue
        if name not in fields:
            if ignore_unknown:
                continue
            raise unknown_name(label, name, fields)
        values[name] = _convert(name, value, hints[name])
    try:
        return cls(**values)
    except ConfigError:
        raise
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{label}: {err}") from None


def check(condition: bool, message: str) -> None:
    """Raise ``ConfigError(message)`` unless ``condition`` (for the configs' range checks)."""
    if not condition:
        raise ConfigError(message)


def one_of(name: str, value: Any, choices: Collection[str]) -> str:
    """``value`` when it is one of ``choices``; else a ``ConfigError`` naming the parameter, the choices and the
    closest one (``prompt_style='cott' is not one of basic, cot; did you mean 'cot'?``)."""
    if value in choices:
        return str(value)
    close = closest(str(value), choices)
    hint = f"; did you mean {close!r}?" if close else ""
    raise ConfigError(f"{name}={value!r} is not one of {', '.join(choices)}{hint}")


def unknown_name(label: str, name: str, known: Collection[str], more: Collection[str] = ()) -> ConfigError:
    """The error for a parameter name nobody takes: the closest of ``known`` (else of ``more``, the names other
    parts of the run take), else the known names."""
    close = closest(name, known) or closest(name, more)
    hint = f"; did you mean {close!r}?" if close else f"; known: {', '.join(sorted(known))}"
    return ConfigError(f"unknown {label} parameter {name!r}{hint}")


def parameter_table(cls: type, docs: Mapping[str, str] | None = None) -> str:
    """A Markdown table of a config's parameters and defaults (for the docs pages)."""
    hints = typing.get_type_hints(cls)
    docs = docs or getattr(cls, "DOCS", {})
    rows = ["| parameter | type | default | meaning |", "|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        kind = getattr(hints[f.name], "__name__", str(hints[f.name])).replace("typing.", "")
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        # a bare "|" (``int | None``, "a | b" in a description) would split the Markdown cell
        cells = [f"`{f.name}`", kind, f"`{default!r}`", docs.get(f.name, "")]
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows)


class MethodConfig:
    """Base of the per-method parameter dataclasses: ``LABEL`` names the method in errors, ``DOCS`` explains each
    parameter (the docs pages' tables are generated from it by ``parameter_table``)."""

    LABEL: ClassVar[str] = "method"
    DOCS: ClassVar[dict[str, str]] = {}

    @classmethod
    def from_options(cls: type[C], ignore_unknown: bool = False, **raw: Any) -> C:
        """The config from raw values (strings converted by annotation); see ``options_from``."""
        return options_from(cls, raw, ignore_unknown=ignore_unknown)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The parameter names (the dataclass's init fields), in order."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.init)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]


def cli_value(text: str) -> Any:
    """A ``-T`` value as Inspect's CLI reads it (a YAML scalar: ``8`` int, ``-20.5`` float, ``none`` string)."""
    return yaml.safe_load(text)


# ------------------------------------------------------------------------------------------------ command lines

FLAG = "medfuzz_flag"  # the dataclass field metadata key of a field's ``Flag``


@dataclass(frozen=True)
class Flag:
    """How one field of a dataclass is given on a command line, declared on the field (``flag(...)``), so that the
    dataclass owns the option's name, default and help and the parser re-declares nothing (``add_flags``, then
    ``flag_values``). The option is ``--field-name`` unless ``name`` says otherwise; an ``int`` field is checked
    by argparse and a ``bool`` field is ``--name/--no-name`` (or one ``switch``). ``parse`` turns the text given
    (the list of texts, with ``many``) into the field's value; an option with ``parse`` that is not given leaves
    the field's default."""

    help: str
    name: str | None = None  # the option's name, when not the field's
    short: str | None = None  # a one-letter alias (``-T``)
    required: bool = False
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    many: bool = False  # the option may be given several times; ``parse`` gets the list
    parse: Callable[[Any], Any] | None = None
    switch: bool = False  # a bool field given as one word that flips its default (``--dry-run``, ``--no-report``)


def flag(help: str, **how: Any) -> dict[str, Flag]:
    """A field's metadata: ``field(default=..., metadata=flag("what it is", ...))``."""
    return {FLAG: Flag(help, **how)}


def _flagged(cls: type) -> list[tuple[dataclasses.Field, Flag]]:
    return [(f, f.metadata[FLAG]) for f in dataclasses.fields(cls) if FLAG in f.metadata]


def _default(f: dataclasses.Field) -> Any:
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]


def add_flags(parser: argparse.ArgumentParser, cls: type) -> None:
    """One argparse option per field of ``cls`` that has a ``Flag``, in the fields' order."""
    hints = typing.get_type_hints(cls)
    for f, spec in _flagged(cls):
        kind = hints[f.name]
        how: dict[str, Any] = {"dest": f.name, "help": spec.help.replace("%", "%%")}  # argparse formats help
        if spec.required:
            how["required"] = True
        else:
            how["default"] = None if spec.parse is not None else _default(f)
        if kind is bool:
            flips = "store_false" if _default(f) else "store_true"
            how["action"] = flips if spec.switch else argparse.BooleanOptionalAction
        elif spec.many:
            how["action"] = "append"
        elif kind is int or int in typing.get_args(kind):
            how["type"] = int
        how.update((name, getattr(spec, name)) for name in ("choices", "metavar") if getattr(spec, name))
        names = [spec.name or f"--{f.name.replace('_', '-')}", *([spec.short] if spec.short else [])]
        parser.add_argument(*names, **how)


def flag_values(cls: type, arguments: argparse.Namespace) -> dict[str, Any]:
    """The field values ``add_flags``'s options were given, parsed, for ``cls(**values)``; an option with a
    ``parse`` that was not given is left out (the field's default applies)."""
    values: dict[str, Any] = {}
    for f, spec in _flagged(cls):
        value = getattr(arguments, f.name)
        if spec.parse is None:
            values[f.name] = value
        elif value is not None:
            values[f.name] = spec.parse(value)
    return values
