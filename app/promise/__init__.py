"""The promise: breach shares with their bounds per path and window, budgets and burn-rate alerts
(:mod:`~app.promise.shares`), the promise report of ``headroom report`` (:mod:`~app.promise.report`) and
the promise as Prometheus recording and alerting rules (:mod:`~app.promise.rules`)."""
