"""The serving scenario set: the contest's own measurement, ``sglang.bench_serving``
against one running SGLang server per configuration, at concurrency 1, 8 and
unlimited (``patchgate guard --scenarios serving``, or ``Profile.scenarios``).

- :mod:`.scenarios`: the three scenarios (one fixed dataset, three concurrencies);
- :mod:`.server`: the server's command line and lifecycle (free port, readiness,
  process-group shutdown, the end of its log on failure);
- :mod:`.bench`: the bench_serving command line, a run, its JSONL result;
- :mod:`.client` and :mod:`.runner`: one long-lived process that runs the benchmark
  commands one after another (their imports paid once);
- :mod:`.configurations`: one server per configuration, timed rounds, profiles;
- :mod:`.phase`: the scenario set itself (``ServingSet``): the paired decision
  (:func:`patchgate.latency.looks.run`), TTFT/ITL metrics, ``--explain``;
"""
