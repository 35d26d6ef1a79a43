"""A live Prometheus-compatible store: reached and read raw (:mod:`~app.live.client`), or its windows
computed by the store with PromQL and pulled as a dataset (:mod:`~app.live.pushdown`)."""
