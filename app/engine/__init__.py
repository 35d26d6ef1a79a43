"""The step-level engine: one vLLM-V1-like replica, fleets of them behind a router, and fleet policies.

- :mod:`~app.engine.config`: engine limits, the step-time model, the fleet, events
- :mod:`~app.engine.trace`: what a trace is (requests by arrival, their paths, what they share)
- :mod:`~app.engine.prefix`: vLLM's automatic prefix caching as the engines model it, the block keys
- :mod:`~app.engine.replica`: one engine replica, event-driven — the Python reference
- :mod:`~app.engine.fleet`: replicas behind a router, restarts (the Python reference)
- :mod:`~app.engine.policy`, :mod:`~app.engine.policy_fleet`: autoscaler, admission, retries, and the
  Python fleet loop that runs them
- :mod:`~app.engine.twin_engine`, :mod:`~app.engine.twin_policy`: the same engine and fleet loops
  compiled (numba), bit-identical on the economics replay's configuration
- :mod:`~app.engine.outcomes`: a run's per-request outcomes as arrays
- :mod:`~app.engine.stretch`, :mod:`~app.engine.metrics_catalog`: stretch arithmetic, vLLM's metric names
  and buckets
"""
