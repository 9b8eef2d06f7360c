"""mnemon_sm: tiered memory for LLM agents, every workflow an explicit state machine.

Public surface: :class:`MemoryRoot` (open a storage root) and :class:`AsyncMemoryRoot`,
:class:`Config`, every value a public method returns (each with ``to_json()``), the main
agent's memory tools (:class:`AgentTools`), the worker port and the ready-made workers
(built-in, fallback, OpenAI and Anthropic), the event hub (:class:`Events`,
:class:`MemoryEvent`) and the error classes. Everything else is internal.
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
from mnemon_sm.aio import AsyncAgentTools, AsyncMemoryRoot
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
    MigrationMismatch,
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
from mnemon_sm.flows.audit import AuditRecord
from mnemon_sm.flows.documents.api import Documents
from mnemon_sm.flows.documents.model import DocumentRecord
from mnemon_sm.flows.documents.values import DocumentResult
from mnemon_sm.flows.documents.values import SearchHit as DocumentHit
from mnemon_sm.flows.hot.api import Context, HotMemory, HotSnapshot, Preview
from mnemon_sm.flows.hot.history import HistoryItem
from mnemon_sm.flows.hot.maintenance_values import MaintenanceBlock
from mnemon_sm.flows.hot.rules import Receipt
from mnemon_sm.flows.lifecycle.api import AgentLifecycle, AsyncDriver
from mnemon_sm.flows.lifecycle.scoring import Score
from mnemon_sm.flows.lifecycle.state import LifecycleReset
from mnemon_sm.flows.long_term.api import LongTermMemory
from mnemon_sm.flows.long_term.catalog import Space
from mnemon_sm.flows.long_term.recall import AgentAnswer, RecallAnswer
from mnemon_sm.flows.long_term.service import MergeReceipt, RelatedItem, SearchHit, SearchResult
from mnemon_sm.flows.long_term.upkeep import ImportReceipt
from mnemon_sm.flows.long_term.write import WriteReceipt
from mnemon_sm.flows.migration import MigrationReport
from mnemon_sm.migrate import migrate
from mnemon_sm.observe import Events, MemoryEvent
from mnemon_sm.ports.long_term.values import SpaceStatus
from mnemon_sm.ports.workers import Cancellation, ToolBox, ToolDefinition, WorkerRequest, Workers
from mnemon_sm.root import MemoryRoot

__version__ = "0.1.0"

__all__ = [
    "AgentAnswer",
    "AgentLifecycle",
    "AgentTools",
    "AmbiguousMatch",
    "AnthropicWorkers",
    "AsyncAgentTools",
    "AsyncAnthropicWorkers",
    "AsyncDriver",
    "AsyncMemoryRoot",
    "AsyncOpenAIWorkers",
    "AuditRecord",
    "BuiltinWorkers",
    "Busy",
    "Cancellation",
    "CapacityExceeded",
    "Config",
    "Context",
    "CorruptStore",
    "DocumentHit",
    "DocumentRecord",
    "DocumentResult",
    "Documents",
    "DuplicateEntry",
    "EmbeddingFailed",
    "Events",
    "FallbackWorkers",
    "HistoryItem",
    "HotMemory",
    "HotSnapshot",
    "IllegalEvent",
    "ImportReceipt",
    "InactiveSpace",
    "InvalidConfig",
    "InvalidInput",
    "LifecycleReset",
    "LockTimeout",
    "LongTermMemory",
    "MaintenanceBlock",
    "MaintenanceRejected",
    "MemoryEvent",
    "MemoryRoot",
    "MergeReceipt",
    "MigrationMismatch",
    "MigrationReport",
    "MnemonError",
    "NoMatch",
    "OpenAIWorkers",
    "Preview",
    "ReadOnly",
    "RecallAnswer",
    "Receipt",
    "RelatedItem",
    "RequestRejected",
    "RevisionConflict",
    "Score",
    "SearchHit",
    "SearchResult",
    "Space",
    "SpaceStatus",
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
    "WriteReceipt",
    "migrate",
]
