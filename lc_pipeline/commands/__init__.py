"""`lcp` sub-commands that live outside cli.py (one module per command family); cli.py registers them."""
