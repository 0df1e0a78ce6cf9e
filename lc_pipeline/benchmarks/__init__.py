"""One package per published benchmark: its protocol, sources, builders, metrics and the authors' files it reads."""
