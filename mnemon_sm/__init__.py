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
    InvalidConfig,
    InvalidInput,
    LockTimeout,
    MnemonError,
    NoMatch,
    ReadOnly,
    RequestRejected,
    SpecError,
    StorageError,
)
from .hot.rules import Receipt
from .root import Context, HotMemory, HotSnapshot, MemoryRoot

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
    "InvalidConfig",
    "InvalidInput",
    "LockTimeout",
    "MemoryRoot",
    "MnemonError",
    "NoMatch",
    "ReadOnly",
    "Receipt",
    "RequestRejected",
    "SpecError",
    "StorageError",
]
