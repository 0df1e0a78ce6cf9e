"""LV-Eval (infinigence/LVEval): the benchmark's own package."""
