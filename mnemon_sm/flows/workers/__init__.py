"""Delegation to LLM workers: requests, personas, and the runner that bounds a run."""
