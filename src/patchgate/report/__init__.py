"""The report stage: what people see of a run.

- :mod:`.render`: a verdict as terminal text, and as a results table row;
- :mod:`.markdown`: a verdict as the PR comment and job summary, caveats first
  (:mod:`.caveats`), and :mod:`.timing`: how long it took, per phase;
- :mod:`.badges`, :mod:`.plot`: status badges and the trend plot of a profile;
- :mod:`.console`: step lines, progress bars and phase timings while a run works;
- :mod:`.commands`: the ``report``, ``table``, ``badges`` and ``plot`` commands.
"""
