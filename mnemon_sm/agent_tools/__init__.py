"""Memory tools for the host's main agent: definitions in every model API's format, and one
dispatcher (``MemoryRoot.tools``). See :mod:`mnemon_sm.agent_tools.toolset`."""

from mnemon_sm.agent_tools.toolset import MUTATING_TOOLS, TOOL_NAMES, AgentTools, ToolDefinition

__all__ = ["MUTATING_TOOLS", "TOOL_NAMES", "AgentTools", "ToolDefinition"]
