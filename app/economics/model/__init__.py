"""What is fitted from the operator's metrics: one replica's model (:mod:`~.capacity`: step time, KV
capacity, engine limits, each with its source) and the demand replayed (:mod:`~.demand`)."""
