"""The one strict cattrs converter every JSON, YAML and TOML boundary goes through.

cattrs' default primitive hooks are lax (``"7"`` becomes 7, ``None`` becomes ``"None"``,
``"false"`` becomes True). Here every primitive must already have its exact type, numbers must
be finite, unknown keys are errors, and failures come back as one readable list of
``message @ $.path`` lines, so callers can wrap them in their own typed error
(``CorruptStore`` for files on disk, ``InvalidConfig`` for settings, ``SpecError`` for specs).
A path names the keys as the data spells them: a class read with camelCase keys
(:func:`register_camel_case`) is reported as ``$.selectedMemoryBodyIds``, not by its Python
attribute name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.cols import (
    is_mapping,
    is_sequence,
    list_structure_factory,
    mapping_structure_factory,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

__all__ = [
    "StructureFailed",
    "camel_case",
    "converter",
    "register_camel_case",
    "string_tuple",
    "structure",
]

T = TypeVar("T")


class StructureFailed(Exception):
    """Raised by :func:`structure`: ``problems`` lists one readable line per failure."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _strict_str(value: Any, _: type) -> str:
    if type(value) is not str:
        raise TypeError(f"expected a string, got {type(value).__name__}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("expected valid Unicode text (a lone surrogate)") from None
    return value


def _strict_int(value: Any, _: type) -> int:
    if type(value) is not int:
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    return value


def _strict_bool(value: Any, _: type) -> bool:
    if type(value) is not bool:
        raise TypeError(f"expected true or false, got {type(value).__name__}")
    return value


def _strict_float(value: Any, _: type) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):
        raise TypeError(f"expected a finite number, got {value!r}")
    return float(value)


def _exact(kind: type, name: str, factory: Any) -> Any:
    """Wrap a cattrs collection hook factory so only ``kind`` itself is accepted (cattrs
    would turn ``{}`` or ``""`` into an empty list, or a list of pairs into a dict)."""

    def make(t: Any, conv: cattrs.Converter) -> Any:
        base = factory(t, conv)

        def hook(value: Any, target: Any) -> Any:
            if type(value) is not kind:
                raise TypeError(f"expected {name}, got {type(value).__name__}")
            return base(value, target)

        return hook

    return make


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(str, _strict_str)
    conv.register_structure_hook(int, _strict_int)
    conv.register_structure_hook(bool, _strict_bool)
    conv.register_structure_hook(float, _strict_float)
    conv.register_structure_hook_factory(
        is_sequence, _exact(list, "an array", list_structure_factory)
    )
    conv.register_structure_hook_factory(
        is_mapping, _exact(dict, "an object", mapping_structure_factory)
    )
    return conv


converter = _make_converter()


def string_tuple(values: Iterable[str]) -> tuple[str, ...]:
    """The attrs converter of every ``tuple[str, ...]`` field: the converter structures JSON
    arrays as lists, and values stay hashable and comparable as tuples. A bare string is
    refused (``TypeError``): taken as an iterable it would become its characters."""
    if isinstance(values, str | bytes):
        raise TypeError(f"expected a list of strings, not {type(values).__name__}")
    return tuple(values)


_CAMEL = re.compile(r"_([a-z0-9])")


def camel_case(name: str) -> str:
    """``idle_review_ms`` -> ``idleReviewMs``."""
    return _CAMEL.sub(lambda m: m.group(1).upper(), name)


# The key each attribute of a camelCase class is read from, for error paths.
_KEYS: dict[type[Any], dict[str, str]] = {}


def register_camel_case(cls: type[Any]) -> None:
    """Make ``converter`` read and write ``cls`` with camelCase keys (the on-disk spelling)."""
    _KEYS[cls] = {a.name: camel_case(a.name) for a in attrs.fields(cls)}
    renames: dict[str, Any] = {
        a.name: override(rename=camel_case(a.name)) for a in attrs.fields(cls)
    }
    converter.register_structure_hook(
        cls, make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=True, **renames)
    )
    converter.register_unstructure_hook(cls, make_dict_unstructure_fn(cls, converter, **renames))


# cattrs' message for a value outside a Literal, said plainly.
_LITERAL = re.compile(r"not in literal typing\.Literal\[([^\]]*)\]")


def _format_exception(exc: BaseException, _type: type | None) -> str:
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return f"unknown field(s): {', '.join(sorted(exc.extra_fields))}"
    return _LITERAL.sub(r"is not one of \1", str(exc)) or type(exc).__name__


def _problems(exc: BaseException, path: str) -> list[str]:
    """cattrs' :func:`~cattrs.v.transform_error`, with each attribute named by the key it is
    read from (a camelCase class's ``selectedMemoryBodyIds``, not ``selected_memory_body_ids``)."""
    without: list[Exception]
    if isinstance(exc, cattrs.IterableValidationError):
        items, without = exc.group_exceptions()
        indexed = [(sub, f"{path}[{note.index!r}]") for sub, note in items]
    elif isinstance(exc, cattrs.ClassValidationError):
        fields, without = exc.group_exceptions()
        keys = _KEYS.get(exc.cl, {})
        indexed = [(sub, f"{path}.{keys.get(note.name, note.name)}") for sub, note in fields]
    else:
        return [f"{_format_exception(exc, None)} @ {path}"]
    problems: list[str] = []
    for sub, at in indexed:
        if isinstance(sub, cattrs.IterableValidationError | cattrs.ClassValidationError):
            problems.extend(_problems(sub, at))
        else:
            problems.append(f"{_format_exception(sub, None)} @ {at}")
    problems.extend(f"{_format_exception(sub, None)} @ {path}" for sub in without)
    return problems


def structure(data: Any, cls: type[T], *, root: str = "$") -> T:
    """Structure ``data`` into ``cls`` strictly, or raise :class:`StructureFailed`."""
    if attrs.has(cls) and type(data) is not dict:
        raise StructureFailed([f"expected an object, got {type(data).__name__} @ {root}"])
    try:
        return converter.structure(data, cls)
    except (cattrs.BaseValidationError, ValueError, TypeError, AttributeError) as exc:
        if isinstance(exc, cattrs.BaseValidationError):
            problems = _problems(exc, root)
        else:
            problems = [f"{exc} @ {root}"]
        raise StructureFailed(problems) from exc
