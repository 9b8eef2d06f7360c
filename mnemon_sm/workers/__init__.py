"""Deprecated location of the built-in workers; use ``mnemon_sm.BuiltinWorkers``.

The built-in workers moved to :mod:`mnemon_sm.adapters.workers`; ``mnemon_sm.workers.builtin``
keeps working, with a ``DeprecationWarning``, until the next minor release.
"""
