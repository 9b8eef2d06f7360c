"""The test kit a host's own tests can use: fakes of every port, fault injection, the port
contract and (with Hypothesis installed) strategies.

- :mod:`.memory`: in-memory fakes of every port recording each call (:func:`.memory.memory_ports`);
  :mod:`.calls` holds the shared call log (the audit log's calls kept apart), :mod:`.longterm`
  the long-term store and worker fakes, :mod:`.embed` test embedders.
- :mod:`.faults`: fault injection for any port bundle (fail a call, crash before or after it;
  the audit log's calls are not numbered).
- :mod:`.wrap`: wrappers of any port: record a real adapter's calls, make chosen file calls fail.
- :mod:`.contract`: the checks every ``LongTermStore`` adapter must pass.
- :mod:`.snapshot`: what a root holds (its audit log apart), for "changed nothing on disk"
  assertions, in a directory or in the in-memory fake.
- :mod:`.maintenance`: seeded roots and scripted workers for capacity-maintenance tests.
- :mod:`.fake_mnemon`: a fake ``mnemon`` executable over the embedded store.
- :mod:`.loopback`: a loopback HTTP server speaking the OpenAI and Anthropic wire protocols
  with a scripted model, for the LLM workers (:class:`.loopback.LoopbackModel`).
- :mod:`.coverage`: which spec transitions a run took.
- :mod:`.flows`: a root's flow contexts by flow name.
- :mod:`.strategies`: Hypothesis strategies (the only module that needs Hypothesis).
"""
