"""Flows: each spec's context (callbacks, pure rules, values) and the facade of its tier."""
