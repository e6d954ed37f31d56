"""Dataclasses to JSON and back, guided by their type hints.

A settings value crosses a process boundary as one JSON object (``loomfuzz
fuzz`` writes its options once; the fuzz target reads them), so the reader
must rebuild exactly the typed value the writer had, and say clearly what is
wrong when the file is not that.  The supported types are the ones settings
use: ``str``, ``int``, ``float``, ``bool``, ``pathlib.Path``, ``Enum``
subclasses (by value), ``Optional[T]`` / ``T | None``, ``tuple[T, ...]``,
``tuple[A, B]``, ``list[T]``, ``dict[str, T]`` and nested dataclasses.

:func:`to_json` / :func:`from_json` convert values; :func:`dump` /
:func:`load` write and read a file.  A mismatch raises
:class:`TypedJsonError` whose message names the field path
(``options.stats.interval: expected float, got 'x'``).  Unknown keys are
errors (a typo must not silently become the default); missing keys take the
field's default, or are errors when the field has none.

Only the standard library is imported.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, Union

__all__ = ["TypedJsonError", "dump", "from_json", "load", "to_json"]

T = TypeVar("T")


class TypedJsonError(ValueError):
    """The JSON does not fit the type; the message is one line naming the field."""


def to_json(value: Any) -> Any:
    """``value`` (a dataclass instance, or anything inside one) as JSON data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (tuple, list)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypedJsonError(f"cannot write a {type(value).__name__} as JSON")


def _describe(data: Any) -> str:
    text = json.dumps(data) if not isinstance(data, str) else repr(data)
    return text if len(text) <= 60 else text[:57] + "..."


def _fail(where: str, expected: str, data: Any) -> TypedJsonError:
    return TypedJsonError(f"{where}: expected {expected}, got {_describe(data)}")


def from_json(kind: Any, data: Any, where: str = "value") -> Any:
    """The value of type ``kind`` that ``data`` (JSON data) describes."""
    origin = typing.get_origin(kind)
    if origin is Union or origin is types.UnionType:
        members = typing.get_args(kind)
        if data is None and type(None) in members:
            return None
        others = [m for m in members if m is not type(None)]
        if len(others) == 1:
            return from_json(others[0], data, where)
        for member in others:  # the first member that fits
            try:
                return from_json(member, data, where)
            except TypedJsonError:
                continue
        raise _fail(where, " or ".join(getattr(m, "__name__", str(m)) for m in others), data)
    if dataclasses.is_dataclass(kind):
        return _dataclass(kind, data, where)
    if origin in (tuple, list):
        if not isinstance(data, list):
            raise _fail(where, "a list", data)
        args = typing.get_args(kind)
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(data):
                raise _fail(where, f"a list of {len(args)} items", data)
            return tuple(from_json(a, d, f"{where}[{i}]") for i, (a, d) in enumerate(zip(args, data)))
        item = args[0] if args else Any
        items = [from_json(item, d, f"{where}[{i}]") for i, d in enumerate(data)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(data, dict):
            raise _fail(where, "an object", data)
        _, value_kind = typing.get_args(kind) or (str, Any)
        return {k: from_json(value_kind, v, f"{where}.{k}") for k, v in data.items()}
    if kind is Any:
        return data
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        try:
            return kind(data)
        except ValueError:
            raise _fail(where, " or ".join(repr(m.value) for m in kind), data) from None
    if kind is Path:
        if not isinstance(data, str):
            raise _fail(where, "a path (string)", data)
        return Path(data)
    if kind is bool:
        if not isinstance(data, bool):
            raise _fail(where, "true or false", data)
        return data
    if kind is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise _fail(where, "a whole number", data)
        return data
    if kind is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise _fail(where, "a number", data)
        return float(data)
    if kind is str:
        if not isinstance(data, str):
            raise _fail(where, "a string", data)
        return data
    raise TypedJsonError(f"{where}: type {kind!r} is not supported by typed_json")


def _dataclass(kind: type[T], data: Any, where: str) -> T:
    if not isinstance(data, dict):
        raise _fail(where, f"an object ({kind.__name__})", data)
    hints = typing.get_type_hints(kind)
    fields = {f.name: f for f in dataclasses.fields(kind) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise TypedJsonError(f"{where}: unknown field {unknown[0]!r} (known: {', '.join(fields)})")
    values = {}
    for name, field in fields.items():
        if name in data:
            values[name] = from_json(hints[name], data[name], f"{where}.{name}")
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise TypedJsonError(f"{where}: missing field {name!r}")
    try:
        return kind(**values)
    except (TypeError, ValueError) as error:  # the dataclass' own checks (__post_init__)
        raise TypedJsonError(f"{where}: {error}") from None


def dump(value: Any, path: str | os.PathLike) -> None:
    """Write ``value`` to ``path`` as indented JSON (replaced whole: a reader
    never sees half a file)."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(to_json(value), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def load(kind: type[T], path: str | os.PathLike) -> T:
    """Read a ``kind`` from the JSON file ``path``; :class:`TypedJsonError`
    (one line naming the file, and the line or the field) when it cannot."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise TypedJsonError(f"{path}: cannot read: {error.strerror or error}") from None
    try:
        data = json.loads(text)
    except ValueError as error:
        line = getattr(error, "lineno", None)
        where = f"{path}:{line}" if line else str(path)
        raise TypedJsonError(f"{where}: not JSON: {getattr(error, 'msg', error)}") from None
    try:
        return from_json(kind, data, kind.__name__)
    except TypedJsonError as error:
        raise TypedJsonError(f"{path}: {error}") from None
