"""mnemon_sm: tiered memory for LLM agents, every workflow an explicit state machine.

Public surface: :class:`MemoryRoot` (open a storage root), :class:`Config`, the receipt and
snapshot values, the main agent's memory tools (:class:`AgentTools`), the worker port and the
ready-made workers (built-in, fallback, OpenAI and Anthropic) and the error classes.
Everything else is internal.
"""

from mnemon_sm.adapters.llm import (
    AnthropicWorkers,
    AsyncAnthropicWorkers,
    AsyncOpenAIWorkers,
    OpenAIWorkers,
)
from mnemon_sm.adapters.workers.builtin import BuiltinWorkers
from mnemon_sm.adapters.workers.fallback import FallbackWorkers
from mnemon_sm.agent_tools import AgentTools
from mnemon_sm.aio import AsyncMemoryRoot
from mnemon_sm.config import Config
from mnemon_sm.errors import (
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
from mnemon_sm.flows.hot.api import Context, HotMemory, HotSnapshot
from mnemon_sm.flows.hot.history import HistoryItem
from mnemon_sm.flows.hot.maintenance_values import MaintenanceBlock
from mnemon_sm.flows.hot.rules import Receipt
from mnemon_sm.flows.lifecycle.api import AgentLifecycle, AsyncDriver
from mnemon_sm.flows.long_term.api import LongTermMemory
from mnemon_sm.flows.long_term.catalog import Space
from mnemon_sm.ports.workers import Cancellation, ToolBox, ToolDefinition, WorkerRequest, Workers
from mnemon_sm.root import MemoryRoot

__version__ = "0.1.0"

__all__ = [
    "AgentLifecycle",
    "AgentTools",
    "AmbiguousMatch",
    "AnthropicWorkers",
    "AsyncAnthropicWorkers",
    "AsyncDriver",
    "AsyncMemoryRoot",
    "AsyncOpenAIWorkers",
    "BuiltinWorkers",
    "Busy",
    "Cancellation",
    "CapacityExceeded",
    "Config",
    "Context",
    "CorruptStore",
    "DuplicateEntry",
    "EmbeddingFailed",
    "FallbackWorkers",
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
    "OpenAIWorkers",
    "ReadOnly",
    "Receipt",
    "RequestRejected",
    "RevisionConflict",
    "Space",
    "SpecError",
    "StorageError",
    "ToolBox",
    "ToolDefinition",
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
