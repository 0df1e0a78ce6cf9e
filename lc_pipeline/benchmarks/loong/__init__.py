"""Loong (MozerWang/Loong): the benchmark's own package."""
