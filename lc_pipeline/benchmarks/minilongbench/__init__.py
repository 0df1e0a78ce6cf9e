"""MiniLongBench (MilkThink-Lab/MiniLongBench): the benchmark's own package."""
