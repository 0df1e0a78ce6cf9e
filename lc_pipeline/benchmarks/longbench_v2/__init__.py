"""LongBench v2 (THUDM/LongBench): the benchmark's own package."""
