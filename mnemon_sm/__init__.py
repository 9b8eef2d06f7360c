"""mnemon_sm: tiered memory for LLM agents, every workflow an explicit state machine.

Public surface: :class:`MemoryRoot` (open a storage root), :class:`Config`, the receipt and
snapshot values, and the error classes. Everything else is internal.
"""

from .aio import AsyncMemoryRoot
from .config import Config
from .errors import (
    AmbiguousMatch,
    Busy,
    CapacityExceeded,
    CorruptStore,
    DuplicateEntry,
    EmbeddingFailed,
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
    UnknownHistoryEntry,
    UnknownInsight,
    UnknownSpace,
    WorkerCancelled,
    WorkerFailed,
    WorkerTimeout,
)
from .hot.history import HistoryItem
from .hot.rules import Receipt
from .lifecycle.api import AgentLifecycle, AsyncDriver
from .longterm.api import LongTermMemory
from .longterm.catalog import Space
from .maintenance.values import MaintenanceBlock
from .root import Context, HotMemory, HotSnapshot, MemoryRoot
from .workers.port import ToolBox, WorkerRequest, Workers
from .workers.runner import Cancellation

__version__ = "0.1.0"

__all__ = [
    "AgentLifecycle",
    "AmbiguousMatch",
    "AsyncDriver",
    "AsyncMemoryRoot",
    "Busy",
    "Cancellation",
    "CapacityExceeded",
    "Config",
    "Context",
    "CorruptStore",
    "DuplicateEntry",
    "EmbeddingFailed",
    "HistoryItem",
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
    "UnknownHistoryEntry",
    "UnknownInsight",
    "UnknownSpace",
    "WorkerCancelled",
    "WorkerFailed",
    "WorkerRequest",
    "WorkerTimeout",
    "Workers",
]
