"""100-LongBench (uservan/100-LongBench): the benchmark's own package."""
