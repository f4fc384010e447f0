"""Benchmarks of the Chat Template Explorer engine (issue 5).

One command prints the whole table::

    python -m bench            # full run, 3 runs per figure (~2.5-3.5 min on 2 cores)
    python -m bench --quick    # one run per figure, no empty-cache P5 (~1 min)

Figures (each: median over repeated runs, with the spread min–max over those runs, and peak memory):

* **P1** analysis time per template over ``../shared/templates`` (median / p90 / max): cold with an empty
  disk cache (fresh process, fresh ``CTE_CACHE_DIR``: compile included), cold process with a warm disk cache
  (source never seen by the process, compiled code on disk), warm ``reapply`` (new overrides, no renders)
  and warm full ``analyze()`` re-run with new overrides;
* **P2** full-parse throughput (MB/s) on long outputs for a JSON_NATIVE, a TAG_WITH_JSON and a
  TAG_WITH_TAGGED template;
* **P3** streaming in ~4-character steps through :class:`core.chat.stream.StreamingParser` vs one full parse,
  at 2, 8 and 32 KB (ratio);
* **P5** corpus batch: wall time of 1,000 analyses on 2 worker processes (templates cycled).

Modules: :mod:`bench.run` (command line, table), :mod:`bench.stats`, :mod:`bench.outputs` (long model
outputs), :mod:`bench.child` (measurements that need a fresh process).
"""
