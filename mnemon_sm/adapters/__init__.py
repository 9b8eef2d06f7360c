"""Adapters: every port implemented for the real world (files, locks, clock, the long-term
stores, the embedder, the built-in workers). An adapter depends on the ports it implements, never
on a flow.
"""
