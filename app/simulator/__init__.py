"""Fleet simulator: synthetic vLLM fleets for the bundled sample and as ground truth for the tests.

- :mod:`~app.simulator.trace`: arrival traces (diurnal, bursts, two paths) and scenario traces (x g, x m)
- :mod:`~app.simulator.engine`: one vLLM-V1-like engine, event-driven — the step-level engine
- :mod:`~app.simulator.twin_engine`: the same engine and fleet loop compiled (numba), bit-identical,
  in the economics replay's configuration (no noise, restarts or step-level metrics)
- :mod:`~app.simulator.fleet`: replicas behind a router, restarts
- :mod:`~app.simulator.metrics`: the Prometheus series a scrape would store
- :mod:`~app.simulator.records`: per-request records and their exact breach shares
- :mod:`~app.simulator.sample`: ``simulate_day``, ``run_scenario``, ``write_sample``
"""

from app.simulator.config import EngineConfig, Events, FleetConfig, Restart, ScrapeGap, StepTime
from app.simulator.records import true_shares
from app.simulator.sample import PROMISES, SimResult, default_events, run_scenario, simulate_day, write_sample
from app.simulator.trace import (
    Trace,
    TrafficSpec,
    generate_trace,
    scale_context,
    scale_traffic,
    scenario_trace,
)

__all__ = [
    "PROMISES", "EngineConfig", "Events", "FleetConfig", "Restart", "ScrapeGap", "SimResult", "StepTime",
    "Trace", "TrafficSpec", "default_events", "generate_trace", "run_scenario", "scale_context",
    "scale_traffic", "scenario_trace", "simulate_day", "true_shares", "write_sample",
]
