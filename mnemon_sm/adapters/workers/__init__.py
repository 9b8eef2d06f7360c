"""The built-in deterministic workers: a ``Workers`` adapter with no LLM and no network."""
