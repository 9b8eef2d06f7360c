"""The call log every fake of :mod:`mnemon_sm.testing` records into: one frozen :class:`Call` per
port call, in order, shared by the fakes of one bundle."""

from __future__ import annotations

from collections.abc import Callable

import attrs

__all__ = ["Call", "CallLog"]


@attrs.frozen
class Call:
    """One port call: which port, which method, its arguments and the state it ran in."""

    port: str
    method: str
    args: tuple[object, ...]
    state: str | None = None

    @property
    def name(self) -> str:
        return f"{self.port}.{self.method}"


@attrs.define
class CallLog:
    """Calls shared by the fakes of one bundle. ``probe`` tags each call with a state."""

    calls: list[Call] = attrs.Factory(list)
    probe: Callable[[], str | None] | None = None

    def record(self, port: str, method: str, *args: object) -> None:
        state = self.probe() if self.probe is not None else None
        self.calls.append(Call(port, method, args, state))

    def names(self) -> list[str]:
        return [c.name for c in self.calls]

    def clear(self) -> None:
        self.calls.clear()
