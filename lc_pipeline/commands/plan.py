"""`lcp plan`: what a run will cost, before it runs (nothing is generated).

    lcp plan [--config C] [--model M ...] [--tokens-per-second X] [--format table|json] [--requests]

Per model and benchmark x length: instances, prompt tokens in the model's tokenizer (the backend's own render +
fit path, so the counts are what the generations rows will say), truncations and ``skip`` policy skips at the
model's window, max new tokens, requests already in the generation store (reused, free), and estimates of time
(from the model's earlier generations in the lake, or ``--tokens-per-second``) and cost (the registry entry's
``price_per_million_input_tokens`` / ``_output_tokens``). See :mod:`lc_pipeline.generate.planning`.

Instances come from the lake when every length partition of the config is there and fresh; otherwise the
construction part of the graph runs first (sources, retrieval, instances: no generation), said on stderr.

``--format json`` prints one document::

    {"format": 1, "config": ..., "lake": ..., "instances_from": "lake" | "built",
     "models": [{"model", "backend", "max_model_len", "truncation",
                 "tokenizer": {"name", "kind": "model"|"tiktoken", "exact", "note"},
                 "throughput": {"basis": "lake"|"given", "rows", "tokens_per_second", "prefill_tokens_per_second",
                                "decode_tokens_per_second", "completion_share", "fit_r2", "description"} | null,
                 "prices_per_million_tokens": {"input", "output"},
                 "cells": [{"benchmark", "length", ...planning.SUMMARY_FIELDS}],
                 "totals": {...the same sums...}, "notes": [...],
                 "requests": [...one per generation row, with --requests (planning.REQUEST_SCHEMA)]}]}
"""

from __future__ import annotations

import json

import click

from lc_pipeline.commands.options import (
    apply_selection,
    config_option,
    format_option,
    lake_option,
    models_option,
    selection_options,
)
from lc_pipeline.commands.output import print_table

TABLE_COLUMNS = ("benchmark", "length", "instances", "prompt_tokens", "max_prompt_tokens", "truncated", "skipped",
                 "max_new_tokens", "reused", "to_generate", "estimated_seconds", "estimated_cost")


def _instances(runner, echo) -> tuple[dict, str]:
    """Each length's instances from the lake, built first when a partition is missing or stale (the same rule as
    ``lcp run`` and ``lcp backfill``: Runner.missing_instances; a lake of another config is refused as they
    refuse it)."""
    import polars as pl

    from lc_pipeline import storage
    from lc_pipeline.resources.parquet_io import partition_path

    cfg = runner.config
    runner.check_lake()
    stale = runner.missing_instances()
    source = "lake"
    if stale:
        echo(f"instances for lengths {stale} are not in the lake or are stale: building them first "
             "(sources, retrieval, instances; nothing is generated)")
        runner.run(models=[])  # the benchmark only
        source = "built"
    root = storage.lake_path(runner.lake)
    out = {}
    for lv in cfg.lengths:
        path = partition_path(root, "instances", {"length": lv})
        out[lv] = storage.read_parquet(path) if path.exists() else pl.DataFrame()
    return out, source


def _lake_generations(lake, slug: str, notes: list[str] | None = None):
    """Every generation of ``slug`` in the lake (any config's lengths): its generations partitions and its
    generation stores (which also hold rows of runs killed before their partition was written); None if none.
    ``slug`` "*": every model's (the ``backend`` / ``model_id`` columns tell them apart).

    A file that cannot be read (a truncated partition, a corrupt store part) is left out, with a note in
    ``notes`` naming it and the error: it breaks only the estimate that would have used it (probe D15)."""
    import polars as pl

    from lc_pipeline import storage
    from lc_pipeline.generate.checkpoint import GenerationCheckpoint
    from lc_pipeline.lake_files import FILE_NAME, LENGTH_DIM, MODEL_DIM, read_partition

    def unreadable(path, exc: Exception) -> None:
        if notes is not None:
            notes.append(f"{path}: unreadable, left out of the time estimate ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''})")

    root = storage.lake_path(lake)
    frames = []
    for path in sorted((root / "generations").glob(f"{LENGTH_DIM}=*/{MODEL_DIM}={slug}/{FILE_NAME}"), key=str):
        dims = dict(part.split("=", 1) for part in (path.parent.parent.name, path.parent.name))
        try:
            frames.append(read_partition(path, dims))
        except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
            unreadable(path, exc)
    stores = root / "_checkpoints" / "generations"
    if stores.exists():
        for level_dir in sorted(stores.glob("length=*")):
            for store_dir in sorted(level_dir.glob(f"model={slug}"), key=str):
                try:
                    rows = GenerationCheckpoint(store_dir).load()
                except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
                    unreadable(store_dir, exc)
                    continue
                if rows is not None:
                    frames.append(rows)
    frames = [f for f in frames if not f.is_empty()]
    if not frames:
        return None
    return pl.concat(frames, how="diagonal_relaxed").unique("cache_key", keep="first", maintain_order=True)


def _same_weights_rate(lake, spec, model_id: str, budgets, notes: list[str] | None = None):
    """The measured rate of the lake's other models with ``spec``'s backend and weights (``model_id`` as the
    generator reports it, and its GGUF file), e.g. a second registration of the same model with another window;
    None when there are none. A new slug then still gets a time estimate, said to come from those models."""
    import dataclasses

    import polars as pl

    from lc_pipeline.generate.planning import measure_throughput

    rows = _lake_generations(lake, "*", notes)
    if rows is None or not {"backend", "model_id"} <= set(rows.columns):
        return None
    same = rows.filter((pl.col("backend") == spec.backend) & (pl.col("model_id") == model_id))
    measured = measure_throughput(same, budgets, spec, model_id) if not same.is_empty() else None
    if measured is None:
        return None
    return dataclasses.replace(measured, source=f"other models with the same backend and weights ({model_id})")


def _lake_budgets(instances: dict):
    import polars as pl

    frames = [df.select("instance_id", "max_new_tokens") for df in instances.values()
              if not df.is_empty() and "max_new_tokens" in df.columns]
    return pl.concat(frames) if frames else None


@click.command("plan")
@lake_option
@config_option
@models_option
@click.option("--tokens-per-second", type=float, default=None,
              help="The run's throughput (prompt + completion tokens per second, requests in flight included) "
                   "instead of the one measured from the model's earlier generations in the lake.")
@format_option("table", "json")
@click.option("--requests", "with_requests", is_flag=True, help="json: also one entry per request (generation row).")
@selection_options
def plan(config: str | None, models: tuple[str, ...], tokens_per_second: float | None, fmt: str,
         with_requests: bool, tasks: str | None, limit: int | None) -> None:
    """Count what a run of the config would generate for each model, and estimate its time and cost."""
    from lc_pipeline.runner import interrupt_exit, watching_signals

    apply_selection(tasks, limit)

    with watching_signals():  # Ctrl-C / SIGTERM: one line, exit 130 / 143
        try:
            _plan(config, models, tokens_per_second, fmt, with_requests)
        except KeyboardInterrupt as exc:
            interrupt_exit(exc, None, "lcp plan" + (f" --config {config}" if config else ""),
                           lambda m: click.echo(m, err=True))


def _plan(config: str | None, models: tuple[str, ...], tokens_per_second: float | None, fmt: str,
          with_requests: bool) -> None:
    import dagster as dg

    from lc_pipeline.dagster_instance import open_instance
    from lc_pipeline.definitions import build_pipeline
    from lc_pipeline.generate.checkpoint import GenerationCheckpoint
    from lc_pipeline.generate.partition import plan_partition
    from lc_pipeline.generate.planning import (
        REQUEST_SCHEMA,
        count_requests,
        given_throughput,
        measure_throughput,
        plan_json,
        request_fitter,
        stored_keys,
        summarize,
    )
    from lc_pipeline.partitions import MODEL_DIM
    from lc_pipeline.runner import Runner
    from lc_pipeline.settings import cli_settings
    from lc_pipeline.tasks.catalog import catalog_for

    def echo(message: str) -> None:
        click.echo(message, err=True)

    s = cli_settings(config)
    try:
        given = given_throughput(tokens_per_second) if tokens_per_second is not None else None
        pipeline = build_pipeline(s)
        resource = pipeline.resources["models"]
        slugs = list(models) or list(pipeline.config.models)
        specs = {slug: resource.spec(slug) for slug in slugs}  # an unknown model fails before anything runs
    except (KeyError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    from lc_pipeline.runner import Interrupted, interrupt_exit

    runner = Runner(pipeline, open_instance(), echo=echo)
    try:
        runner.preflight()  # what a run would refuse after generating (D17) is refused by its plan too
        instances, source = _instances(runner, echo)
    except (RuntimeError, ValueError, OSError) as exc:  # StepFailed: the step, its partition and the cause
        raise click.ClickException(str(exc)) from None
    except (KeyboardInterrupt, Interrupted, dg.DagsterExecutionInterruptedError) as exc:
        interrupt_exit(exc, runner, "lcp plan" + (f" --config {config}" if config else ""), echo)
    import polars as pl

    cfg, lake = pipeline.config, pipeline.resources["lake"]
    catalog, overrides = catalog_for(cfg), resource.policies()
    plans, failed = [], []
    for slug, spec in specs.items():
        notes: list[str] = []
        try:
            generator = resource.generator(slug)
            fit, tokenizer = request_fitter(spec, generator)
            frames = []
            for level, rows in instances.items():
                if rows.is_empty():
                    continue
                partition = plan_partition(rows, spec, generator, overrides, catalog)
                store = GenerationCheckpoint(lake.checkpoint_dir("generations", {"length": level, MODEL_DIM: slug}))
                frames.append(count_requests(partition, rows, level, spec, fit, stored_keys(store.load())))
        except (KeyError, ValueError, OSError, ImportError, pl.exceptions.PolarsError) as exc:
            # this model only: the others are still planned (probe D15)
            echo(f"Error: model {slug!r}: {exc}")
            failed.append(slug)
            continue
        requests = pl.concat(frames) if frames else pl.DataFrame(schema=REQUEST_SCHEMA)
        throughput = given
        if throughput is None:
            measured = _lake_generations(s.lake_dir, slug, notes)
            throughput = (measure_throughput(measured, _lake_budgets(instances), spec, generator.model_id)
                          if measured is not None else None)
            if throughput is None:  # a new slug: the rate of the models run with the same backend and weights
                throughput = _same_weights_rate(s.lake_dir, spec, generator.model_id, _lake_budgets(instances),
                                                notes)
        plans.append(summarize(spec, requests, tokenizer, throughput, list(cfg.lengths)))
        plans[-1].notes.extend(notes)

    if fmt == "json":
        meta = {"config": cfg.name, "lake": str(s.lake_dir), "instances_from": source}
        click.echo(json.dumps(plan_json(plans, meta, with_requests), indent=1))
        if failed:
            raise click.ClickException(f"not planned: {', '.join(failed)} (the error of each is above)")
        return
    for p in plans:
        click.echo(f"\nPlan for {p.model} ({p.backend}, window {p.max_model_len} tokens; counted in "
                   f"{p.tokenizer.name}{'' if p.tokenizer.exact else ', approximate'}) on config {cfg.name!r}")
        def shown(cell: dict, key: str):
            value = cell.get(key)
            return f"{value:.0f}" if key == "estimated_seconds" and value is not None else value

        rows = [tuple(shown(c, k) for k in TABLE_COLUMNS) for c in p.cells]
        rows.append(("total", "", *(shown(p.totals, k) for k in TABLE_COLUMNS[2:])))
        print_table(list(TABLE_COLUMNS), rows)
        for note in p.notes:
            click.echo(f"  - {note}")
    if failed:
        raise click.ClickException(f"not planned: {', '.join(failed)} (the error of each is above)")
