"""The store stage: what stays between runs, written atomically.

- :mod:`.baselines`: the stored results (reference, current, best) and their envelope;
- :mod:`.history`, :mod:`.changelog`: the log of evaluated changes;
- :mod:`.calibration`: a profile's measured error rates;
- :mod:`.environment`, :mod:`.workload`: fingerprints of the machine and of the
  model files and task data a result was measured on;
- :mod:`.flips`: the flipped items beside a verdict;
- :mod:`.writes`: everything a finished run writes, in one atomic step.
"""
