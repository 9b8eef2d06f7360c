"""Ready-made LLM workers: :class:`OpenAIWorkers` (the ``[openai]`` extra) and
:class:`AnthropicWorkers` (the ``[anthropic]`` extra), and their ``async def run`` twins
:class:`AsyncOpenAIWorkers` and :class:`AsyncAnthropicWorkers`.

All run the same provider-free tool-call loop (:mod:`mnemon_sm.adapters.llm.loop`) and import
their SDK only when built, so this package imports without either SDK.
"""

from mnemon_sm.adapters.llm.anthropic_workers import AnthropicWorkers, AsyncAnthropicWorkers
from mnemon_sm.adapters.llm.openai_workers import AsyncOpenAIWorkers, OpenAIWorkers

__all__ = ["AnthropicWorkers", "AsyncAnthropicWorkers", "AsyncOpenAIWorkers", "OpenAIWorkers"]
