"""Tools beside the gate run: ``calibrate`` (measured error rates, with the planted
patches of :mod:`.planted`), ``--attribute`` (:mod:`.attribution`), ``fidelity`` (the
gate's latencies against SGLang's own benchmarks, with :mod:`.bench_offline`)."""
