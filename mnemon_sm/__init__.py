"""mnemon_sm: tiered memory for LLM agents, every workflow an explicit state machine.

Public surface: :class:`MemoryRoot` (open a storage root), :class:`Config`, the receipt and
snapshot values, and the error classes. Everything else is internal.
"""

from .config import Config
from .errors import (
    AmbiguousMatch,
    CapacityExceeded,
    CorruptStore,
    DuplicateEntry,
    IllegalEvent,
    InactiveSpace,
    InvalidConfig,
    InvalidInput,
    LockTimeout,
    MaintenanceRejected,
    MnemonError,
    NoMatch,
    ReadOnly,
    RequestRejected,
    RevisionConflict,
    SpecError,
    StorageError,
    ToolRefused,
    UnknownInsight,
    UnknownSpace,
    WorkerFailed,
)
from .hot.rules import Receipt
from .longterm.api import LongTermMemory
from .longterm.catalog import Space
from .maintenance.values import MaintenanceBlock
from .root import Context, HotMemory, HotSnapshot, MemoryRoot
from .workers.port import ToolBox, WorkerRequest, Workers

__version__ = "0.1.0"

__all__ = [
    "AmbiguousMatch",
    "CapacityExceeded",
    "Config",
    "Context",
    "CorruptStore",
    "DuplicateEntry",
    "HotMemory",
    "HotSnapshot",
    "IllegalEvent",
    "InactiveSpace",
    "InvalidConfig",
    "InvalidInput",
    "LockTimeout",
    "LongTermMemory",
    "MaintenanceBlock",
    "MaintenanceRejected",
    "MemoryRoot",
    "MnemonError",
    "NoMatch",
    "ReadOnly",
    "Receipt",
    "RequestRejected",
    "RevisionConflict",
    "Space",
    "SpecError",
    "StorageError",
    "ToolBox",
    "ToolRefused",
    "UnknownInsight",
    "UnknownSpace",
    "WorkerFailed",
    "WorkerRequest",
    "Workers",
]
