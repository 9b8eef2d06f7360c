"""A small host whose memory workers are a Claude model (``pip install
'mnemon-sm[anthropic]'``).

With ``ANTHROPIC_API_KEY`` set it uses a real endpoint: ``ANTHROPIC_BASE_URL`` (default
Anthropic's API) and ``ANTHROPIC_MODEL`` (default ``claude-sonnet-4-5``). Without a key it
starts the loopback server with a scripted model, so it runs offline:

    python examples/anthropic_host.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _demo import demo, scripted_model

from mnemon_sm import AnthropicWorkers
from mnemon_sm.testing.loopback import LoopbackModel


def main() -> None:
    key = os.environ.get("ANTHROPIC_API_KEY")
    if key:
        workers = AnthropicWorkers(
            model=os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5"),
            base_url=os.environ.get("ANTHROPIC_BASE_URL"),
            api_key=key,
        )
        print(f"online: {workers.model} at {workers.client.base_url}")
        demo(workers)
        return
    with LoopbackModel(scripted_model) as server:
        print(f"offline: a scripted model on the loopback server at {server.url}")
        demo(AnthropicWorkers(model="scripted", base_url=server.anthropic_url, api_key="unused"))
        print(f"{len(server.requests)} Messages API calls served")


if __name__ == "__main__":
    main()
