"""Headroom economics, in layers (each imports only those before it):

- :mod:`~app.economics.model`: the replica model and the demand, fitted from the operator's metrics
- :mod:`~app.economics.run`: the twin replaying the demand through N' replicas, locally or on Ray
- :mod:`~app.economics.predict`: the twin calibrated at the observed N; the analysis and the scenario grid
- :mod:`~app.economics.check`: the empirical curve and queueing formulas beside the predictions
- :mod:`~app.economics.decide`: prices, the decision document, policy rows, one scenario run, saved sets
"""
