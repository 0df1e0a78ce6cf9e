"""HELMET (princeton-nlp/HELMET): the benchmark's own package."""
