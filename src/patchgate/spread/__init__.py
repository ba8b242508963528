"""Past one machine: work spread over the nodes of a Ray cluster (``--ray ADDRESS``).

- :mod:`.cluster`: connecting, the nodes that may time (``bench_slot``), their hardware
  class;
- :mod:`.runs`: whole runs (a calibration's verdicts) spread one per node at a time.

Spread the work, never the pairs: a run's configurations are compared on one node; runs
and their samples carry the node's hardware class, and two classes are never mixed in
one comparison.
"""
