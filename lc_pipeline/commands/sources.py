"""`lcp sources validate PATH...`: every record of each file checked as a run would load it; nothing is written.

    lcp sources validate ../data/longbench/ ../data/loong/loong.jsonl [--kind K] [--format table|json] [--reasons 5]

The logic is :func:`lc_pipeline.sources.loader.check_paths`: a folder is listed as a run lists it (its own files,
compressed ones included; subfolders and unknown extensions are printed as skipped), the files of one argument are
loaded together by the run's loader (so an id repeated across files is caught), and the loader's notes are printed
(``fields ignored: all_clases`` shows a misspelled field). Exit 1 when a record is rejected, a file cannot be read,
or a folder holds nothing to read.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from lc_pipeline.commands.output import print_table

COLUMNS = ["file", "status", "kind", "format", "records", "accepted", "rejected"]


def validate_sources(paths: tuple[Path, ...], kind: str | None, fmt: str, reasons: int) -> int:
    """Print the checks of ``paths``; return the exit status (0 clean, 1 anything rejected or unreadable)."""
    from lc_pipeline.sources.loader import check_paths

    try:
        checks = check_paths(paths, kind)
    except ValueError as exc:  # an unknown --kind
        raise click.UsageError(str(exc)) from exc
    if fmt == "json":
        rows = [{"file": c.file, "status": c.status, "kind": c.kind, "format": c.format, "records": c.records,
                 "accepted": c.accepted, "rejected": c.rejected, "reasons": c.shown_reasons(reasons),
                 "notes": c.notes} for c in checks]
        click.echo(json.dumps(rows, indent=1, ensure_ascii=False))
    else:
        print_table(COLUMNS, [(c.file, c.status, c.kind, c.format, c.records, c.accepted, c.rejected) for c in checks])
        for c in checks:
            for line in [*(f"note: {c.file}: {n}" for n in c.notes), *c.shown_reasons(reasons)]:
                click.echo(f"  {line}" if c.status != "skipped" else f"  {c.file}: skipped ({line})")
            if c.status == "read" and len(c.reasons) > reasons:
                click.echo(f"  ... {len(c.reasons) - reasons} more rejected records of {c.file} (--reasons)")
    failed = [c for c in checks if c.failed]
    if failed:
        click.echo(f"{len(failed)} of {len(checks)} entries failed the check (rejected records, unreadable files, "
                   "folders with nothing to read)", err=True)
    return 1 if failed else 0
