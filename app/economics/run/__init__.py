"""The twin run on the model: the replay of the demand through N' modelled replicas (:mod:`~.replay`),
the compiled engines compiled once per machine (:mod:`~.compiled`), and where the runs go — local
processes (:mod:`~.executors`) or a Ray cluster (:mod:`~.ray_executor`)."""
