"""Benchmarks of the Chat Template Explorer engine (issues 5, 9, 14 and 16 point 8).

One command prints the whole table::

    python -m bench            # full run, 3 runs per figure (an estimated 15-20 min on 2 quiet cores: P5's
                               # empty-cache batches and P6 at 160k characters dominate)
    python -m bench --quick    # one run per figure on a subset (≤ 60 s)

Figures (each: median over repeated runs, with the spread min–max over those runs, and peak memory); with
``--oracle`` (llama.cpp's oracle binary, ``../shared/tools/oracle``) the analysis figures are compared with
llama.cpp's own analysis, and P2 with llama.cpp's own parse of the same output, timed in the same run:

* **P1** analysis time per template over ``../shared/templates`` (median / p90 / max): cold with an empty
  disk cache (fresh process, fresh ``CTE_CACHE_DIR``: compile included), cold process with a warm disk cache
  (source never seen by the process, compiled code on disk), warm ``reapply`` (new overrides, no renders),
  warm full ``analyze()`` re-run with new overrides, warm with every memo cleared, and warm cycling through
  the corpus;
* **P2** full-parse throughput (MB/s) on long outputs for a JSON_NATIVE, a TAG_WITH_JSON, a TAG_WITH_TAGGED
  and Mistral's ``[TOOL_CALLS]`` template;
* **P3** streaming in ~4-character steps through :class:`core.chat.stream.StreamingParser` vs one full parse,
  at 8 and 128 KB (ratio, and the slowest 1 % of steps in CPU time);
* **P4** ``python -m core analyze T`` as a fresh process (wall and CPU time);
* **P5** corpus batch: wall time of 1,000 analyses on 2 worker processes (templates cycled), warm and empty
  disk cache;
* **P6** streaming 1 character per feed on hostile outputs (:mod:`bench.hostile`) per route, at 20k and 160k
  characters: the slowest 1 % of feeds in CPU time of the feeding thread, each feed's cost the median over
  ``--repeats`` passes of the same stream (each pass's own p99 is shown for the 'calls' kind).

Modules: :mod:`bench.run` (command line, table), :mod:`bench.stats`, :mod:`bench.outputs` (long model
outputs), :mod:`bench.hostile` (hostile outputs), :mod:`bench.child` (measurements that need a fresh process).
"""
