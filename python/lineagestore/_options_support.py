"""The rules behind ``LineageOptions`` (generated in ``_options_generated.py`` from the JVM declarations).

Each key has a kind and optional bounds, declared once in Scala (``io.lineagestore.config.ConfEntry``). The
functions here apply them exactly as the JVM does (``ConfKind.parse`` and ``ConfEntry.check``), so a value
that passes here also passes on the executors, and a bad one fails in Python before any query starts:

* ``size``: a 64-bit integer of bytes, as ``int`` or as text ``[+-]digits`` with an optional suffix of Spark's
  byte settings: ``b``, ``k``/``kb``, ``m``/``mb``, ``g``/``gb``, ``t``/``tb``, ``p``/``pb`` (case-insensitive,
  powers of 1024, blanks allowed around the number and before the suffix);
* ``duration``: a 64-bit integer of milliseconds, as ``int`` or as text ``[+-]digits`` with an optional suffix
  of Spark's time settings: ``us``, ``ms``, ``s``, ``m``/``min``, ``h``, ``d`` (microseconds truncated);
* ``int`` / ``long``: a 32-bit / 64-bit integer, as ``int`` or text ``[+-]digits``;
* ``string``: any text (a ``os.PathLike`` is taken as its path);
* ``choice``: one of ``choices``, compared trimmed and lower-cased.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from typing import Any, NamedTuple


class OptionSpec(NamedTuple):
    field: str  # the Python field name (snake_case)
    name: str  # the key's name after the prefix (camelCase, as the JVM declares it)
    kind: str  # size | duration | int | long | string | choice
    default: Any
    min: int | None
    max: int | None
    allowed: str  # what a value must be, in words (the JVM's text)
    choices: tuple[str, ...] = ()  # for kind "choice": the allowed words


_LONG = (-(2**63), 2**63 - 1)
_RANGE = {"size": _LONG, "duration": _LONG, "long": _LONG, "int": (-(2**31), 2**31 - 1)}
# Spark's suffixes (JavaUtils.byteSuffixes, timeSuffixes): the JVM's LineageConf uses the same tables.
_BYTES = {"": 1, "b": 1} | {
    f"{unit}{b}": 1 << (10 * (i + 1)) for i, unit in enumerate("kmgtp") for b in ("", "b")
}
_MICROS = {"": 1000, "us": 1, "ms": 1000, "s": 10**6, "m": 60 * 10**6, "min": 60 * 10**6}
_MICROS |= {"h": 3600 * 10**6, "d": 86400 * 10**6}
_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER_AND_SUFFIX = re.compile(r"([+-]?[0-9]+)\s*([a-z]*)")


def _parse(spec: OptionSpec, value: Any) -> Any:
    """The typed value, or None if ``value`` is not of the key's kind."""
    if spec.kind == "choice":
        word = value.strip().lower() if isinstance(value, str) else None
        return word if word in spec.choices else None
    if spec.kind == "string":
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        return value if isinstance(value, str) else None
    if isinstance(value, bool):  # an int subclass, but never meant as a number here
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        text = value.strip()
        if spec.kind in ("size", "duration"):
            m = _NUMBER_AND_SUFFIX.fullmatch(text.lower())
            units = _BYTES if spec.kind == "size" else _MICROS
            if not m or m.group(2) not in units or not _LONG[0] <= int(m.group(1)) <= _LONG[1]:
                return None
            number = int(m.group(1)) * units[m.group(2)]
            if (
                spec.kind == "duration"
            ):  # the JVM multiplies in microseconds (overflow-checked), then truncates
                if not _LONG[0] <= number <= _LONG[1]:
                    return None
                number = abs(number) // 1000 * (1 if number >= 0 else -1)
        elif _INTEGER.fullmatch(text):
            number = int(text)
        else:
            return None
    else:
        return None
    lo, hi = _RANGE[spec.kind]
    return number if lo <= number <= hi else None


def _bounds_problem(spec: OptionSpec, number: int) -> str | None:
    lo, hi = spec.min, spec.max
    if (lo is None or number >= lo) and (hi is None or number <= hi):
        return None
    if lo is not None and hi is not None:
        return f"must be between {lo} and {hi}"
    return f"must be at least {lo}" if lo is not None else f"must be at most {hi}"


def check_value(spec: OptionSpec, value: Any, prefix: str) -> Any:
    """``value`` converted to the key's type; ``ValueError`` naming the full key, the value and what is allowed."""
    typed = _parse(spec, value)
    key = prefix + spec.name
    if typed is None:
        raise ValueError(
            f"{key}={value!r} (LineageOptions.{spec.field}) is not valid: expected {spec.allowed} "
            f"(default {spec.default!r})"
        )
    if spec.kind not in ("string", "choice"):
        problem = _bounds_problem(spec, typed)
        if problem:
            raise ValueError(
                f"{key}={value!r} (LineageOptions.{spec.field}) is not allowed: {problem}; "
                f"expected {spec.allowed}"
            )
    return typed


def validate(options: Any, specs: tuple[OptionSpec, ...]) -> None:
    """``__post_init__`` of ``LineageOptions``: check every field and store its typed value."""
    from lineagestore._options_generated import PREFIX

    for spec in specs:
        typed = check_value(spec, getattr(options, spec.field), PREFIX)
        object.__setattr__(options, spec.field, typed)  # frozen: normalise once, here


def spark_conf(
    options: Any, specs: tuple[OptionSpec, ...], prefix: str, include_defaults: bool
) -> dict[str, str]:
    out = {}
    for spec in specs:
        value = getattr(options, spec.field)
        if include_defaults or value != spec.default:
            out[prefix + spec.name] = str(value)
    return out


def unknown_options_error(unknown: list[str], specs: tuple[OptionSpec, ...]) -> TypeError:
    listing = ", ".join(f"{s.field} ({s.name})" for s in specs)
    return TypeError(f"unknown lineagestore option(s) {', '.join(unknown)}; known options: {listing}")


def known_keywords(specs: tuple[OptionSpec, ...]) -> Any:
    """Class decorator for ``LineageOptions``: an unknown keyword raises ``TypeError`` listing the known
    options (as ``configure`` does) instead of the dataclass's bare "unexpected keyword argument"."""

    def wrap(cls: Any) -> Any:
        init = cls.__init__
        fields = {s.field for s in specs}

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            unknown = sorted(k for k in kwargs if k not in fields)
            if unknown:
                raise unknown_options_error(unknown, specs)
            init(self, *args, **kwargs)

        cls.__init__ = __init__
        return cls

    return wrap


def names(specs: tuple[OptionSpec, ...]) -> dict[str, OptionSpec]:
    """Every accepted keyword (the snake_case field and the JVM's camelCase name) -> its spec."""
    out = {}
    for spec in specs:
        out[spec.field] = spec
        out[spec.name] = spec
    return out


def merge(options: Any, settings: dict[str, Any]) -> Any:
    """``options`` (a LineageOptions or None) with ``settings`` (keywords by field or key name) applied.

    An unknown keyword raises ``TypeError`` listing the known names; a bad value raises ``ValueError``.
    """
    from lineagestore._options_generated import SPECS, LineageOptions

    if options is not None and not isinstance(options, LineageOptions):
        raise TypeError(
            f"options must be a lineagestore.LineageOptions, not {type(options).__name__}; "
            "pass individual settings as keyword arguments"
        )
    known = names(SPECS)
    unknown = sorted(k for k in settings if k not in known)
    if unknown:
        raise unknown_options_error(unknown, SPECS)
    by_field = {known[k].field: v for k, v in settings.items()}
    if len(by_field) != len(settings):
        raise TypeError(f"an option is given twice (as field and key name): {sorted(settings)}")
    return dataclasses.replace(options or LineageOptions(), **by_field)


def _edit_distance(a: str, b: str) -> int:
    """Levenshtein distance, as the JVM's ``LineageConf.nearestKey`` counts it."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j - 1] + (ca != cb), previous[j] + 1, current[j - 1] + 1))
        previous = current
    return previous[-1]


def nearest_key(key: str, specs: tuple[OptionSpec, ...], prefix: str) -> str | None:
    """The known key nearest to ``key`` if near enough to be a typo of it (the JVM's rule: ignoring case, at
    most a third of the name's letters differ, at least 2 allowed)."""
    name = key.removeprefix(prefix).lower()
    distance, best = min((_edit_distance(name, s.name.lower()), prefix + s.name) for s in specs)
    return best if distance <= max(2, len(name) // 3) else None


def check_raw_conf(conf: dict[str, Any], specs: tuple[OptionSpec, ...], prefix: str) -> None:
    """Every ``prefix`` key of ``conf`` (settings a builder already holds) is known and its value allowed;
    ``ValueError`` as the JVM's ``LineageConf.validate`` words it (the nearest key for a misspelt one)."""
    by_name = {prefix + s.name: s for s in specs}
    for key in sorted(k for k in conf if k.startswith(prefix)):
        spec = by_name.get(key)
        if spec is None:
            near = nearest_key(key, specs, prefix)
            hint = f" Did you mean {near}?" if near else ""
            raise ValueError(
                f"unknown configuration key {key}.{hint} Known keys: {', '.join(sorted(by_name))}."
            )
        check_value(spec, conf[key], prefix)
