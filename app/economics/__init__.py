"""Headroom economics: the replica capacity model, the scenario replay, the empirical curve and the money."""
