"""Cross-checks beside the predictions, never the estimator: the empirical load-response curve
(:mod:`~.curve`, :mod:`~.crosscheck`) and the queueing formulas as thinking tools (:mod:`~.queueing`)."""
