"""Fleet simulator: synthetic vLLM fleets for the bundled sample and as ground truth for the tests,
run on the step-level engine of :mod:`app.engine`, and what they export.

- :mod:`~app.simulator.traffic`: arrival traces (diurnal, bursts, two paths) and scenario traces (x g, x m)
- :mod:`~app.simulator.metrics`: the Prometheus series a scrape would store
- :mod:`~app.simulator.records`: per-request records and their exact breach shares
- :mod:`~app.simulator.sample`: ``simulate_day``, ``run_scenario``, ``write_sample``
"""

from app.simulator.records import true_shares
from app.simulator.sample import PROMISES, SimResult, default_events, run_scenario, simulate_day, write_sample
from app.simulator.traffic import generate_trace, scale_context, scale_traffic, scenario_trace

__all__ = [
    "PROMISES", "SimResult", "default_events", "generate_trace", "run_scenario", "scale_context",
    "scale_traffic", "scenario_trace", "simulate_day", "true_shares", "write_sample",
]
