"""The latency stage: scenario sets, timing, and the paired decision.

- :mod:`.sets`: the scenario-set protocol; :mod:`.static` (the six scenarios on the
  run's engines) and :mod:`.serving` (bench_serving against servers);
- :mod:`.scenarios`: the static scenarios and their token batches;
- :mod:`.measure`: configurations timed side by side, rounds interleaved;
- :mod:`.looks`: measure, look, measure more, confirm in fresh processes;
- :mod:`.decide`: the decision of each look (pure);
- :mod:`.explain`: why a scenario got slower (``--explain``).
"""
