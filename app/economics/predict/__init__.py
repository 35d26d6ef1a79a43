"""The predictions: the twin calibrated at the observed fleet size (:mod:`~.calibration`), the analysis
of a fleet and the grid of scenarios it predicts, with intervals and flags (:mod:`~.scenarios`)."""
