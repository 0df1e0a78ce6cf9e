"""`lcp models import FILE --model NAME --config CONFIG [--on-error reject]`: score predictions made elsewhere.

The config must run a benchmark as released (``released:``). Every line of FILE is
``{"_id": "<record id>", "prediction": "<text>"}`` (other fields ignored); the ids are checked against the
config's records: the lake's instances of every length when they are built, else the records its sources
hold (loaded as the instances asset loads them, narrowed to ``released.tasks`` and, by the config's level
rule where it reads the record alone, to the records that fall in a level).

A normalised copy goes into the lake (``imports/<NAME>/<sha16>/predictions.jsonl``, the folder named by its
content hash, with ``manifest.json`` and, when lines were rejected, ``rejected.jsonl``) and NAME is
registered with backend ``imported`` (lc_pipeline/generate/imported_backend.py) reading that copy. Then
``lcp backfill --model NAME --config CONFIG`` writes its generations and scores without calling a model.

Errors (a bad JSON line, a missing or non-string ``_id``/``prediction``, an unknown or repeated id) name
the file, the line and the field. ``--on-error reject`` counts and lists them instead (and keeps them in
``rejected.jsonl``); records left without a prediction are then listed too, and generating one of them is
an error naming it (never an empty answer scored as wrong).

FILE is read once, as bytes that are hashed, decoded and parsed (lc_pipeline/json_files.py): a regular file
of at most ``--max-bytes`` (a FIFO, a device or ``<(zcat …)`` is refused before it is read), strictly UTF-8
(a bad byte is named by its offset), split into lines on ``\n`` only; a line nested too deep, with a key
given twice or a lone surrogate is a bad line naming the field. With ``--on-error reject`` more than
``--max-rejected`` bad lines stop the import. A successful re-import of NAME replaces its earlier imports:
their folders under ``imports/<NAME>/`` are removed once the registry names the new one (and listed).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from lc_pipeline import json_files
from lc_pipeline.commands.options import config_option, lake_option, model_option

__all__ = ["config_record_ids", "import_predictions", "import_predictions_command", "imported_model_slugs",
           "instance_storage_exists"]

SHOWN = 10  # rejected lines / missing ids printed; the files hold all of them


class ImportProblem(ValueError):
    """The config or the lake cannot take the import; the message says which and why."""


def config_record_ids(config, lake_dir) -> tuple[set[str], str]:
    """The record ids the config runs, and where they were read ("instances" or "sources").

    The lake's instances are read only when this config built them from its current inputs (each level's
    recorded config and fingerprint, lake.built_by; issue 31, D5): another config's instances at the same level
    label, or instances built from older data, are not this config's records, which are then read from its
    sources. Instances without a record (placed by hand, or built before it was kept) are read as they are, as
    ``lcp backfill`` uses them. A lake whose instances another config built and scored models on is refused naming that config
    (lake.check_lake_config: the backfill could not run there).

    A record id naming two different items (e.g. the same ``_id`` in two sources) is an error: a
    prediction for it would be ambiguous.
    """
    import polars as pl

    from lc_pipeline import storage
    from lc_pipeline.fingerprints import instances_fingerprint
    from lc_pipeline.lake import LakeOfAnotherConfig, built_by, check_lake_config
    from lc_pipeline.lake_files import partition_path

    if config.released is None:
        raise ImportProblem(f"config {config.name!r} does not run a benchmark as released (no `released:` section): "
                            "imported predictions answer released records by their ids")
    try:
        check_lake_config(lake_dir, config)
    except LakeOfAnotherConfig as exc:
        raise ImportProblem(f"{exc} (nothing was imported)") from None
    lake = storage.lake_path(lake_dir)
    paths = [partition_path(lake, "instances", {"length": lv}) for lv in config.lengths]
    current = {"config": config.name, "fingerprint": instances_fingerprint(config)}
    records = [built_by(lake_dir, lv) for lv in config.lengths]
    if all(p.exists() for p in paths) and all(r is None or r == current for r in records):
        frame = pl.concat([storage.read_parquet(p, columns=["item_id", "record_id"]) for p in paths])
        where = "instances"
    else:
        frame = _source_records(config)
        where = "sources"
    frame = frame.filter(pl.col("record_id") != "").unique()
    ambiguous = frame.group_by("record_id").agg(pl.col("item_id").sort()).filter(pl.col("item_id").list.len() > 1)
    if ambiguous.height:
        rid, items = ambiguous.sort("record_id").row(0)
        raise ImportProblem(f"config {config.name!r}: record id {rid!r} names {len(items)} records ({items[:3]}): a "
                            "prediction by `_id` would be ambiguous; import one source's records per config")
    return set(frame["record_id"]), where


def _source_records(config):
    import polars as pl

    from lc_pipeline.construct.released import level_of, record_fields
    from lc_pipeline.sources.loader import load_source
    from lc_pipeline.tasks.catalog import catalog_for

    released = config.released
    wanted = set(released.tasks) or {t.name for t in catalog_for(config).tasks(released.benchmark)}
    items = pl.concat([load_source(s).items for s in config.sources], how="diagonal_relaxed")
    items = items.filter(pl.col("task").is_in(sorted(wanted)))
    if released.subset:
        from lc_pipeline.benchmarks.minilongbench.subset import subset_item_ids

        items = items.filter(pl.col("item_id").is_in(sorted(subset_item_ids(items, released.subset))))
    if released.level_by in ("record_length", "record_level"):  # read from the record alone (no prompt to count)
        keep = [item["item_id"] for item in items.iter_rows(named=True)
                if level_of(item, record_fields(item), 0, released, config.lengths) is not None]
        items = items.filter(pl.col("item_id").is_in(keep))
    return items.select("item_id", "record_id")


# The largest predictions file read (--max-bytes raises it): the file is read whole, once.
MAX_BYTES = 256 * 1024 * 1024
# With --on-error reject, more rejected lines than this stop the import, nothing written (issue 31 D32: a 1M-line
# file of unknown ids was "imported" with a 182 MB rejected.jsonl in the lake); --max-rejected raises it.
MAX_REJECTED = 1000


def import_predictions(file: Path, model: str, config, lake_dir, models_file, on_error: str = "fail", *,
                       max_bytes: int = MAX_BYTES, max_rejected: int = MAX_REJECTED):
    """Check ``file``, store its copy in the lake, register ``model``; returns (parsed, stored path, where the
    ids were read, earlier imports of ``model`` removed). Raises PredictionsError / ImportProblem /
    ModelSpecError with a message naming the cause; then nothing was written."""
    from lc_pipeline.generate.registry import ModelRegistry, validate_model_slug

    validate_model_slug(model)
    registry = ModelRegistry(models_file)
    # The registry's lock is held from the checks to the registration (issue 31 D4): another writer can neither
    # take the name in between nor lose this entry.
    with registry.locked():
        return _import_locked(file, model, config, lake_dir, registry, on_error, max_bytes, max_rejected)


def _import_locked(file: Path, model: str, config, lake_dir, registry, on_error: str, max_bytes: int,
                   max_rejected: int):
    from lc_pipeline import storage
    from lc_pipeline.generate import imported_backend as imp
    from lc_pipeline.generate.registry import ModelSpec

    if model in registry.names() and registry.get(model).backend != imp.BACKEND:
        raise ImportProblem(f"model {model!r} is already registered with backend {registry.get(model).backend!r}; "
                            "imported predictions need a name of their own")
    owner = lake_backend_of(lake_dir, model)
    if owner is not None:
        backend, where_found = owner
        raise ImportProblem(f"model {model!r} already has generations of backend {backend!r} in the lake ({where_found}); "
                            "importing under this name would replace them: choose another name for the imported "
                            "predictions (nothing was written)")
    known, where = config_record_ids(config, lake_dir)
    # Read once, from a regular file only, bounded (D12): what is hashed is what was parsed.
    raw = json_files.read_regular_file(file, max_bytes, what="predictions file", error=imp.PredictionsError,
                                       option="--max-bytes")
    text = json_files.decode_utf8(raw, str(file), imp.PredictionsError)
    parsed = imp.parse_predictions(text, str(file), known, on_error, max_rejected)
    if not parsed.predictions:
        raise imp.PredictionsError(f"{file}: every line was rejected ({len(parsed.rejected)}); nothing to import, "
                                   f"e.g. {parsed.rejected[0].message(str(file))}")
    data = parsed.normalised()
    sha = parsed.sha256()
    folder = storage.lake_path(lake_dir) / "imports" / model / sha[:16]
    manifest = {
        "model": model, "config": config.name, "source_file": str(file.resolve()),
        "source_sha256": _sha256(raw), "predictions_sha256": sha, "records_read_from": where,
        "records": len(known), "accepted": len(parsed.predictions), "rejected": len(parsed.rejected),
        "rejected_lines": [r.line for r in parsed.rejected], "missing": parsed.missing,
    }
    storage.write_bytes_atomic(folder / imp.PREDICTIONS_FILE, data)
    if parsed.rejected:
        storage.write_bytes_atomic(folder / imp.REJECTED_FILE, "".join(
            json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in parsed.rejected).encode())
    storage.write_bytes_atomic(folder / imp.MANIFEST_FILE, json.dumps(manifest, indent=1).encode())
    spec = ModelSpec(slug=model, backend=imp.BACKEND, model_id=storage.url(folder / imp.PREDICTIONS_FILE),
                     gguf_file=None, max_model_len=imp.NO_WINDOW, batch_size=1, chat_template=False,
                     tokenizer=f"tiktoken:{config.tokenizer}")
    registry.add(spec, overwrite=True)  # a re-import replaces this imported model's copy (checked above)
    return parsed, folder, where, _remove_earlier_imports(folder)


def _remove_earlier_imports(kept: Path) -> list[Path]:
    """The model's earlier imports (the other folders of ``imports/<model>/``), removed once the registry names
    ``kept`` (issue 31 D32: every re-import added a folder and none was removed). The registry only ever names
    the latest import, and rows already generated from an earlier one are in the generations table, which
    does not read it: a changed file has a new fingerprint, so those rows are regenerated from ``kept``."""
    import shutil

    removed = []
    for other in sorted(kept.parent.iterdir()):
        if other != kept and other.is_dir() and not other.is_symlink():
            shutil.rmtree(other)
            removed.append(other)
    return removed


def lake_backend_of(lake_dir, model: str) -> tuple[str, Path] | None:
    """The first backend other than ``imported`` that wrote generations of ``model`` in the lake (its generations
    partitions, then its generation stores under ``_checkpoints``) and the file or folder that says so; None when
    there is none (issue 31 D6: an import under another backend's name replaced its rows)."""
    import polars as pl

    from lc_pipeline import storage
    from lc_pipeline.generate import imported_backend as imp
    from lc_pipeline.generate.checkpoint import GenerationCheckpoint
    from lc_pipeline.lake_files import LENGTH_DIM, MODEL_DIM

    root = storage.lake_path(lake_dir)
    found: list[tuple[pl.DataFrame | None, Path]] = []
    for path in sorted((root / "generations").glob(f"{LENGTH_DIM}=*/{MODEL_DIM}={model}/{storage.FILE_NAME}"), key=str):
        try:
            found.append((storage.read_parquet(path, columns=["backend"]), path))
        except Exception as exc:  # noqa: BLE001  (unreadable: whose rows they are is unknown, so refused)
            raise ImportProblem(f"model {model!r}: the lake's generations file {path} cannot be read ({exc}); whose "
                                "rows it holds is unknown, so nothing was imported under this name") from None
    for store in sorted((root / "_checkpoints" / "generations").glob(f"{LENGTH_DIM}=*/{MODEL_DIM}={model}"), key=str):
        found.append((GenerationCheckpoint(store).load(), store))
    for rows, where in found:
        if rows is None or "backend" not in rows.columns:
            continue
        others = sorted(set(rows["backend"].drop_nulls().unique()) - {imp.BACKEND})
        if others:
            return others[0], where
    return None


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


# The keys of dagster.yaml that put the instance's storage somewhere else than SQLite files in DAGSTER_HOME.
STORAGE_KEYS = ("storage", "run_storage", "event_log_storage", "schedule_storage")


def instance_storage_exists(dagster_home: Path) -> bool:
    """Whether a Dagster process may already hold this instance open (a UI, a daemon, an earlier ``lcp`` run):
    its dagster.yaml names a storage of its own (Postgres, another folder: assumed so), or the default SQLite
    run storage (``history/runs.db``) has been created. When it has not, no UI can list partitions yet, and
    ``lcp models import`` leaves the model's partition to the ``lcp backfill`` or ``lcp ui`` that creates
    the storage (both add it), sparing the import Dagster's imports and instance (issue 29)."""
    import yaml

    settings_file = dagster_home / "dagster.yaml"
    if settings_file.exists():
        try:
            settings = yaml.safe_load(settings_file.read_text(encoding="utf-8"))
        except yaml.YAMLError:
            return True  # Dagster reports its own file's error when it opens the instance
        if isinstance(settings, dict) and any(key in settings for key in STORAGE_KEYS):
            return True
    return (dagster_home / "history" / "runs.db").exists()


def imported_model_slugs(models_file: Path) -> list[str]:
    """The models of ``models_file`` registered with backend ``imported`` (their partitions may wait for
    ``lcp ui`` or ``lcp backfill``, see :func:`instance_storage_exists`)."""
    from lc_pipeline.generate import imported_backend as imp
    from lc_pipeline.generate.registry import ModelRegistry

    registry = ModelRegistry(models_file)
    return [slug for slug in registry.names() if registry.get(slug).backend == imp.BACKEND]


@click.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@model_option("The name to register the predictions under (a model slug).")
@lake_option
@config_option
@click.option("--on-error", type=click.Choice(["fail", "reject"]), default="fail", show_default=True,
              help="fail: the first bad line stops the import; reject: bad lines are counted, listed and kept in "
                   "rejected.jsonl beside the stored copy, and records without a prediction are listed.")
@click.option("--max-bytes", type=click.IntRange(min=1), default=MAX_BYTES, show_default=True,
              help="The largest FILE read (it is read whole, once).")
@click.option("--max-rejected", type=click.IntRange(min=0), default=MAX_REJECTED, show_default=True,
              help="With --on-error reject, more rejected lines than this stop the import, nothing written.")
def import_predictions_command(file: Path, model: str, config: str | None, on_error: str, max_bytes: int,
                               max_rejected: int) -> None:
    """Import predictions made elsewhere ({"_id", "prediction"} per line) as model MODEL (backend imported)."""
    from lc_pipeline.config import load_config
    from lc_pipeline.generate.imported_backend import PredictionsError
    from lc_pipeline.generate.registry import ModelSpecError
    from lc_pipeline.settings import cli_settings

    s = cli_settings(config)
    try:
        cfg = load_config(s.config)
        parsed, folder, where, replaced = import_predictions(file, model, cfg, s.lake_dir, s.models_file, on_error,
                                                             max_bytes=max_bytes, max_rejected=max_rejected)
    except (PredictionsError, ImportProblem, ModelSpecError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    if instance_storage_exists(s.dagster_home):  # else lcp backfill / lcp ui add it when they create the storage
        from lc_pipeline.dagster_instance import add_missing_partitions, open_instance
        from lc_pipeline.partitions import MODEL_DIM

        with open_instance() as instance:
            add_missing_partitions(instance, MODEL_DIM, [model])
    click.echo(f"{model}: {len(parsed.predictions)} predictions imported from {file} (records of config "
               f"{cfg.name!r} read from its {where}); stored in {folder}")
    if replaced:
        click.echo(f"replaced {model}'s earlier import(s), removed: {', '.join(p.name for p in replaced)}")
    if parsed.rejected:
        click.echo(f"{len(parsed.rejected)} line(s) rejected (all in {folder / 'rejected.jsonl'}):", err=True)
        for r in parsed.rejected[:SHOWN]:
            click.echo(f"  {r.message(str(file))}", err=True)
    if parsed.missing:
        click.echo(f"{len(parsed.missing)} record(s) of the config have no prediction (listed in "
                   f"{folder / 'manifest.json'}), e.g. {parsed.missing[:SHOWN]}; generating them is an error: "
                   "narrow released.tasks or import a complete file", err=True)
    click.echo(f"registered {model} (backend imported) in {s.models_file}; next: lcp backfill --model {model}"
               + (f" --config {config}" if config else ""))
