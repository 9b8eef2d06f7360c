"""Context of ``specs/memory_spaces.yaml``: listing, creating, updating and deleting spaces.

Each operation is one step, the entry action of its state, which ends by settling the result
or refusing with the operation's typed error (each an internal event of the spec). Every step
reads or changes the catalog under its lock, and reading it registers the stores found on disk
(a catalog write), which is why even listing is a state of its own rather than a check.

The only validator is pure: a read-only root refuses a change before any port is called. The
request's fields are checked by the step itself (the catalog checks them before it takes its
lock), so a bad field is refused from the state with the error it has always had, and the
order of the errors (an unknown space before a bad name, say) is the catalog's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mnemon_sm.engine.flow import Machine
from mnemon_sm.engine.registry import flow_context
from mnemon_sm.errors import MnemonError
from mnemon_sm.flows.long_term.write import WritingContext

__all__ = ["SpacesFlow"]


@flow_context("SpacesFlow")
class SpacesFlow(WritingContext):
    FLOW = "memory_spaces"

    def list_spaces(self, machine: Machine) -> None:
        """Entry of ``listing``."""
        try:
            with self.service.mutex:
                spaces = self.service.spaces()
        except MnemonError as exc:
            return self.refuse(machine, "listing_failed", exc)
        self.settle(machine, "spaces_listed", spaces)

    def create_space(self, machine: Machine, request: Mapping[str, Any]) -> None:
        """Entry of ``creating`` (entered only by ``create``, whose request it gets)."""
        try:
            with self.service.mutex:
                space = self.service.create_space(
                    request["name"], request["description"], active=request["active"]
                )
        except MnemonError as exc:
            return self.refuse(machine, "creation_refused", exc)
        self.settle(machine, "space_created", space)

    def update_space(self, machine: Machine, request: Mapping[str, Any]) -> None:
        """Entry of ``updating`` (entered only by ``update``, whose request it gets)."""
        try:
            with self.service.mutex:
                space = self.service.update_space(
                    request["space"],
                    name=request["name"],
                    description=request["description"],
                    active=request["active"],
                )
        except MnemonError as exc:
            return self.refuse(machine, "update_refused", exc)
        self.settle(machine, "space_updated", space)

    def delete_space(self, machine: Machine, request: Mapping[str, Any]) -> None:
        """Entry of ``deleting`` (entered only by ``delete``, whose request it gets)."""
        try:
            with self.service.mutex:
                self.service.delete_space(request["space"])
        except MnemonError as exc:
            return self.refuse(machine, "deletion_refused", exc)
        self.settle(machine, "space_deleted")
