"""Printing result rows for the `lcp` commands: an aligned table, CSV or JSON."""

from __future__ import annotations

import json
import sys

import click


def print_table(columns: list[str], rows: list[tuple], fmt: str = "table") -> None:
    """``rows`` under ``columns`` as an aligned table (floats to 4 places, None as n/a), CSV or JSON."""
    if fmt == "json":
        click.echo(json.dumps([dict(zip(columns, r)) for r in rows], default=str, indent=1))
        return
    if fmt == "csv":
        import csv

        w = csv.writer(sys.stdout)
        w.writerow(columns)
        w.writerows(rows)
        return

    def cell(v) -> str:
        if v is None:
            return "n/a"
        return f"{v:.4f}" if isinstance(v, float) else str(v)

    cells = [[cell(v) for v in r] for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    line = "+".join("-" * (w + 2) for w in widths)
    click.echo(" | ".join(c.ljust(w) for c, w in zip(columns, widths)))
    click.echo(line)
    for r in cells:
        click.echo(" | ".join(v.ljust(w) for v, w in zip(r, widths)))
    click.echo(f"({len(rows)} rows)")
