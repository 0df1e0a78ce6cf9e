"""LongBench v1 and LongBench-E (THUDM/LongBench): the benchmark's own package."""
