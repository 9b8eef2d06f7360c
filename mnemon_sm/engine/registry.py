"""The registry of flow contexts: the names specs use for the classes that hold their callbacks.

Theory of operation
-------------------
A spec names its context class by a registered name (``context: HotMutationFlow``), never by
a module path, so moving or renaming a module cannot break a YAML file. A context class joins
the registry with a decorator in its own module::

    @flow_context("HotMutationFlow")
    class HotMutationFlow: ...

The name is, by convention, the class's name when it registered, so a reader of a spec or a
diagram finds the class by searching for it; but it is a name in its own right: moving the
class to another module, or renaming it, leaves the name (and every spec) as it is.

The engine sits below the flows and never imports them. The registry is filled as a side
effect of importing the flow packages (``mnemon_sm.flows.*``); ``import mnemon_sm``, which
Python runs before any of its submodules, imports every one of them, so any caller of the
library, the command line and the tests see every context registered. A spec whose context is
not registered (yet) fails to load with a ``SpecError`` that names the context and says where
it should come from.

One name belongs to one class: a second class registering a taken name is a ``SpecError``
at import time. A class with the same module and qualified name as the registered one
replaces it (its module was executed again, as ``importlib.reload`` does), and registering
the very same class again does nothing. ``mnemon-sm specs check`` reports a registered name
that no spec uses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from mnemon_sm.errors import SpecError

__all__ = ["CONTEXT_NAME", "context_class", "flow_context", "qualified_name", "registered"]

#: A registered name: an identifier (a dotted path or ``module:Class`` is not one).
CONTEXT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_T = TypeVar("_T", bound=type[Any])
_contexts: dict[str, type[Any]] = {}


def qualified_name(cls: type[Any]) -> str:
    """``module.QualifiedName`` of a class, for messages."""
    return f"{cls.__module__}.{cls.__qualname__}"


def flow_context(name: str) -> Callable[[_T], _T]:
    """Class decorator: register the class as the flow context called ``name``."""
    if not CONTEXT_NAME.match(name):
        raise SpecError(f"flow context name {name!r} is not an identifier")

    def register(cls: _T) -> _T:
        taken = _contexts.get(name)
        if taken is not None and qualified_name(taken) != qualified_name(cls):
            raise SpecError(
                f"flow context {name!r} is registered twice: by {qualified_name(taken)} "
                f"and by {qualified_name(cls)}"
            )
        _contexts[name] = cls
        return cls

    return register


def context_class(name: str, *, flow: str) -> type[Any]:
    """The class registered as ``name``, for the spec of ``flow`` (raises ``SpecError``)."""
    found = _contexts.get(name)
    if found is None:
        known = ", ".join(sorted(_contexts)) or "none"
        raise SpecError(
            f"{flow}: flow context {name!r} is not registered; the class that holds this "
            f"flow's callbacks registers it with @flow_context({name!r}) when its module under "
            f"the mnemon_sm.flows package is imported (`import mnemon_sm` imports them all). "
            f"Registered: {known}"
        )
    return found


def registered() -> Mapping[str, type[Any]]:
    """Every registered name with its class (a read-only view)."""
    return MappingProxyType(_contexts)
