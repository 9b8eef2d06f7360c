"""A small host whose memory workers are an OpenAI-compatible model (``pip install
'mnemon-sm[openai]'``).

With ``OPENAI_API_KEY`` set it uses a real endpoint: ``OPENAI_BASE_URL`` (any Chat
Completions server; default OpenAI's API) and ``OPENAI_MODEL`` (default ``gpt-4.1-mini``).
Without a key it starts the loopback server with a scripted model, so it runs offline:

    python examples/openai_host.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _demo import demo, scripted_model

from mnemon_sm import OpenAIWorkers
from mnemon_sm.testing.loopback import LoopbackModel


def main() -> None:
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        workers = OpenAIWorkers(
            model=os.environ.get("OPENAI_MODEL", "gpt-4.1-mini"),
            base_url=os.environ.get("OPENAI_BASE_URL"),
            api_key=key,
        )
        print(f"online: {workers.model} at {workers.client.base_url}")
        demo(workers)
        return
    with LoopbackModel(scripted_model) as server:
        print(f"offline: a scripted model on the loopback server at {server.url}")
        demo(OpenAIWorkers(model="scripted", base_url=server.openai_url, api_key="unused"))
        print(f"{len(server.requests)} Chat Completions calls served")


if __name__ == "__main__":
    main()
