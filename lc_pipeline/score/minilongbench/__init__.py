"""The config's ``minilongbench:`` section (:mod:`.options`), read by the core's config loader; MiniLongBench itself
is the benchmark package :mod:`lc_pipeline.benchmarks.minilongbench`."""
