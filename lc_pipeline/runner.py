"""Materialize the graph from the command line, one run per partition, reusing finished work.

``lcp run``, ``lcp backfill``, ``lcp judge`` and ``lcp plan`` use this. What to run comes from Dagster: the
Definitions' asset graph in topological order, its assets grouped by partitions definition into steps (one
``dg.materialize`` per partition key), the assets of the config (each declares the configs it serves and when it
runs: assets/versions.py). Every run goes into the persistent Dagster instance (``DAGSTER_HOME``), so the UI shows
the same history afterwards. A partition is reused, not re-run, when its latest materialization's data version is
the one its declarations give now (code version, config fields, model settings, input files), its Parquet file is
on disk and nothing it reads ran in this process since.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import time
import urllib.request
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import dagster as dg
import polars as pl
from filelock import FileLock

from lc_pipeline import storage
from lc_pipeline.assets import versions
from lc_pipeline.assets.common import FINGERPRINT_KEY
from lc_pipeline.dagster_instance import add_missing_partitions
from lc_pipeline.definitions import Pipeline
from lc_pipeline.generate.backends import capabilities
from lc_pipeline.generate.registry import validate_model_slug
from lc_pipeline.interrupts import SIGNAL_NAMES, last_signal, recording_signals, signal_came_while_watching
from lc_pipeline.lake import built_by, check_lake_config, record_built_by
from lc_pipeline.partitions import (
    LENGTH_DIM,
    MODEL_DIM,
    SOURCE_DIM,
    length_model_key,
    validate_source_name,
)
from lc_pipeline.resources.parquet_io import partition_path
from lc_pipeline.settings import env


class StepFailed(RuntimeError):
    """A step of a run failed: the message names the step (its label holds the partition) and the cause; the full
    trace is in the Dagster run's log, not on the terminal."""


class Interrupted(Exception):
    """SIGINT or SIGTERM stopped a run; the message says what was saved."""


DATA_VERSION_TAG = "dagster/data_version"  # the tag a materialization's data version is recorded under

# Errors a step fails with when the process was interrupted (Dagster's own, and Python's).
INTERRUPT_ERRORS = {"DagsterExecutionInterruptedError", "KeyboardInterrupt"}


def step_error(result: dg.ExecuteInProcessResult):
    """The error of the run's first failed step (a SerializableErrorInfo), else the run's own failure error."""
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data is not None and event.step_failure_data.error:
            return event.step_failure_data.error
    for event in result.all_events:
        if event.is_run_failure and getattr(event.event_specific_data, "error", None) is not None:
            return event.event_specific_data.error
    return None


def error_chain(error) -> list:
    """A step's error (a SerializableErrorInfo) and its causes (else contexts), outermost first, at most ten."""
    chain: list = []
    while error is not None and len(chain) < 10:
        chain.append(error)
        error = error.cause or error.context
    return chain


def is_interrupt_error(error) -> bool:
    """Whether a step's error is the interrupt: its class, a cause or context of it, or a library's error that wraps
    it and names it only in its message (pydantic-core calling a serializer when the signal landed:
    "PydanticSerializationError: Error calling function `<lambda>`: DagsterExecutionInterruptedError")."""
    return any(e.cls_name in INTERRUPT_ERRORS or any(name in (e.message or "") for name in INTERRUPT_ERRORS)
               for e in error_chain(error))


def describe_error(error) -> str:
    """The user's error under Dagster's wrappers ("Error occurred while executing op ..."), as one or a few lines."""
    chain = error_chain(error)
    own = [e for e in chain if not e.cls_name.startswith("Dagster")] or chain[::-1]  # else Dagster's innermost
    inner = own[0]
    message = inner.message.strip()
    head, sep, rest = message.partition(": ")
    if sep and head.rsplit(".", 1)[-1] == inner.cls_name:  # "pkg.module.Class: text" -> "Class: text"
        message = rest
    return message if inner.cls_name == "Failure" else f"{inner.cls_name}: {message}"


def _raise_keyboard_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


class _QuietFailuresLogger(logging.Logger):
    """Dagster's console logger without its ERROR records (a failed step's or run's stack trace): ``lcp`` prints
    its own message for those; the event log (``lcp ui``) keeps them in full."""

    def __init__(self, name: str, level: int | str = logging.NOTSET) -> None:
        super().__init__(name, level)
        if name == "dagster":
            self.addFilter(lambda record: record.levelno < logging.ERROR)


class _DropInterruptTraces(logging.Filter):
    """Drops a record whose exception is the interrupt itself. Dagster raises it wherever the main thread is when
    the signal lands; a library that catches it there and logs it (SQLAlchemy closing a pooled connection: "Exception
    closing connection", asyncio writing to a socket: "Fatal write error") would print its stack trace under the
    one line :func:`interrupt_exit` prints for it."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (exc is not None and type(exc).__name__ in INTERRUPT_ERRORS)


@contextmanager
def watching_signals() -> Iterator[None]:
    """For the commands that run the graph in this process (demo, backfill, plan): SIGTERM interrupts as SIGINT does
    (a KeyboardInterrupt; Dagster turns both into an interrupted step), the signal that came is recorded (a wakeup
    fd: Dagster replaces the handlers while a run executes) so :func:`interrupt_exit` exits 130 or 143, and
    Dagster's console shows no failure traces, nor do the handlers of the root logger (or Python's last-resort
    handler) print the interrupt's trace when a library logs it (:class:`_DropInterruptTraces`). Main thread only;
    restored when the block ends."""
    with recording_signals():  # the signal that came, for interrupt_exit and the steps (lc_pipeline/interrupts.py)
        old_term = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        old_class = logging.getLoggerClass()
        logging.setLoggerClass(_QuietFailuresLogger)
        drop_interrupts = _DropInterruptTraces()
        handlers = [*logging.getLogger().handlers, *([logging.lastResort] if logging.lastResort else [])]
        for handler in handlers:
            handler.addFilter(drop_interrupts)
        try:
            yield
        finally:
            for handler in handlers:
                handler.removeFilter(drop_interrupts)
            logging.setLoggerClass(old_class)
            signal.signal(signal.SIGTERM, old_term)


def interrupt_exit(exc: BaseException, runner: Runner | None, resume: str, echo: Callable[[str], None]) -> None:
    """One line for an interrupted run (what was saved, how to resume), then exit 128 + the signal: 130 for
    SIGINT (Ctrl-C), 143 for SIGTERM. The trace of the interrupted step is in the Dagster log."""
    signum = last_signal() or signal.SIGINT
    saved = str(exc) if isinstance(exc, Interrupted) and str(exc) else (
        runner.saved_note() if runner is not None else "nothing was running")
    echo(f"Interrupted ({SIGNAL_NAMES.get(signum, signum)}): {saved}. Resume with `{resume}`: finished steps and "
         "stored answers are reused, only the rest runs.")
    raise SystemExit(128 + signum)


def readable_parquet(path) -> bool:
    """Whether ``path`` is a Parquet file whose footer (schema, row groups) reads: a truncated or overwritten
    partition is not "up to date" and is rebuilt (probe D16). Reads the footer only, not the data."""
    if not path.exists():
        return False
    if not storage.is_local(path):  # an object store: whole objects only (one PUT), as written
        return True
    try:
        pl.read_parquet_schema(path)
    except (OSError, pl.exceptions.PolarsError):
        return False
    return True


def asset_names_of(asset) -> set[str]:
    return {key.to_user_string() for key in getattr(asset, "keys", ())}


class Runner:
    def __init__(
        self,
        pipeline: Pipeline,
        instance: dg.DagsterInstance,
        echo: Callable[[str], None] = print,
        log_level: str = "WARNING",
    ):
        self.pipeline = pipeline
        # Dagster's console logger prints every engine event at DEBUG; the CLI shows its own
        # progress lines instead (the UI keeps the full event log either way).
        self.run_config = {"loggers": {"console": {"config": {"log_level": log_level}}}}
        self.config = pipeline.config
        with warnings.catch_warnings():  # Dagster's BetaWarning on the asset checks' execution_type, each time
            warnings.filterwarnings("ignore", category=dg.BetaWarning, message=".*execution_type")
            self.graph = pipeline.defs.resolve_asset_graph()  # what lcp runs: Dagster's own asset graph
        self.materialized: list[tuple[str, dict[str, str]]] = []  # (asset, partition dims) run by this process
        self._said_no_judge = False
        self.instance = instance
        self.echo = echo
        self.lake = pipeline.settings.lake_dir
        self.ran: list[str] = []
        self.reused: list[str] = []
        self.tags: dict[str, str] = {}  # added to every run this runner launches
        self.board: pl.DataFrame | None = None  # the leaderboard a one-model run made in its model's run
        self.current: tuple[str, list[str], dict[str, str]] | None = None  # the step running now (label, assets, dims)
        recovered = recover_dead_cli_runs(instance)
        if recovered:
            echo(f"  ! marked {len(recovered)} run(s) of killed lcp processes as failed and freed their slots")
        configure_gpu_pool(instance)

    # -- partitions -------------------------------------------------------------------
    def register_sources(self) -> list[str]:
        names = [validate_source_name(s.name) for s in self.config.sources]
        add_missing_partitions(self.instance, SOURCE_DIM, names)
        return names

    def register_models(self, slugs: list[str]) -> None:
        for s in slugs:
            validate_model_slug(s)
            self.pipeline.resources["models"].spec(s)  # unknown model -> clear error before any run
        add_missing_partitions(self.instance, MODEL_DIM, slugs)

    # -- what Dagster records ------------------------------------------------------------
    def node(self, asset: str):
        """The asset's node in the Definitions' asset graph (its code version, metadata, tags, partitions)."""
        return self.graph.get(dg.AssetKey(asset))

    def current_fingerprint(self, asset: str, dims: dict[str, str]) -> str:
        """The data version ``asset`` [``dims``] would record now (assets/versions.py: its declared code version,
        config fields and additions)."""
        return versions.current_fingerprint(self.node(asset), self.config, self.pipeline.resources["models"], dims)

    def recorded_fingerprint(self, asset: str, partition_key: str | None) -> str | None:
        """The data version the latest materialization of ``asset`` [``partition_key``] recorded (None: none; a
        materialization older than data versions: its ``lcp/fingerprint`` metadata)."""
        flt = dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset),
                                    asset_partitions=[partition_key] if partition_key else None)
        records = self.instance.fetch_materializations(flt, limit=1).records
        if not records:
            return None
        materialization = records[0].asset_materialization
        version = (materialization.tags or {}).get(DATA_VERSION_TAG)
        if version is not None:
            return version
        recorded = materialization.metadata.get(FINGERPRINT_KEY)
        return None if recorded is None else str(getattr(recorded, "value", recorded))

    def is_fresh(self, asset: str, partition_key: str | None, dims: dict[str, str]) -> bool:
        """Whether the latest materialization of ``asset`` [``partition_key``] recorded the current data version
        and its Parquet file reads."""
        if self.recorded_fingerprint(asset, partition_key) != self.current_fingerprint(asset, dims):
            return False
        return readable_parquet(partition_path(storage.lake_path(self.lake), asset, dims))

    def step(
        self,
        label: str,
        assets: list[str],
        partition_key: str | dg.MultiPartitionKey | None = None,
        dims: dict[str, str] | None = None,
        pooled: bool = True,
    ) -> bool:
        """Materialize ``assets`` for one partition, in one Dagster run (the caller decided it must run).

        ``pooled=False``: the generations asset outside the ``gpu`` pool (a model that calls no model). A step
        that needs a slot of the pool waits here for one, saying so (:meth:`wait_for_pool_slot`)."""
        pk = str(partition_key) if partition_key is not None else None
        self.echo(f"  > {label} ...")
        t0 = time.perf_counter()
        self.current = (label, assets, dims or {})
        graph = self.pipeline.assets if pooled or not self.pipeline.unpooled_assets else self.pipeline.unpooled_assets
        pools = {pool for a in graph if asset_names_of(a) & set(assets)
                 for pool in [getattr(getattr(a, "node_def", None), "pool", None)] if pool}
        for pool in sorted(pools):
            self.wait_for_pool_slot(pool, label)
        try:
            result = dg.materialize(
                graph,
                selection=assets,
                partition_key=pk,
                resources=self.pipeline.resources,
                instance=self.instance,
                run_config=self.run_config,
                # pid + host: a later `lcp` can tell this run died with its process (see recover_dead_cli_runs).
                tags={"lcp/command": "cli", "lcp/pid": str(os.getpid()), "lcp/host": socket.gethostname(),
                      **self.tags},
                raise_on_error=False,  # a failed step: our message below, its trace stays in the run's log
            )
        except (KeyboardInterrupt, dg.DagsterExecutionInterruptedError) as exc:
            raise Interrupted(self.saved_note()) from exc
        if not result.success:
            error = step_error(result)
            # The interrupt, also when the code the signal landed in caught it and raised an error of its own: a
            # step that fails after SIGINT / SIGTERM came is the interrupt's doing (exit 130 / 143, one line).
            if is_interrupt_error(error) or signal_came_while_watching():
                raise Interrupted(self.saved_note())
            cause = describe_error(error) if error is not None else "the run failed before any step ran"
            raise StepFailed(f"step {label} failed: {cause}\n  (full trace: run {result.run_id} in the Dagster log, "
                             f"`lcp ui` -> Runs)")
        self.current = None
        failed = [c for c in result.get_asset_check_evaluations() if not c.passed]
        if failed:
            raise RuntimeError(f"{label}: asset checks failed: {[c.check_name for c in failed]}")
        self.echo(f"  + {label}: done in {time.perf_counter() - t0:.1f}s (run {result.run_id[:8]})")
        self.ran.append(label)
        if signal_came_while_watching():  # an interrupt a callback swallowed: stop here, this step is saved
            raise Interrupted(self.saved_note())
        return True

    def wait_for_pool_slot(self, pool: str, label: str, poll_s: float = 1.0, say_every_s: float = 30.0) -> None:
        """Wait until ``pool`` has a free slot, here rather than inside Dagster's run (which waits without a word and
        ignores Ctrl-C): a line at once and then every ``say_every_s`` naming the step, the pool and the runs holding
        its slots; Ctrl-C / SIGTERM stop the wait, also when the interrupt they raise lands in a callback that drops
        it (a garbage-collection callback: "Exception ignored in ..."), which the next poll sees. (Another process
        can still take the freed slot first: then Dagster's own claim waits, as before.)"""
        storage_ = self.instance.event_log_storage
        waited, last_said = 0.0, None
        while True:
            if signal_came_while_watching():
                raise KeyboardInterrupt
            info = storage_.get_concurrency_info(pool)
            if info.slot_count == 0 or info.active_slot_count < info.slot_count:
                if last_said is not None:
                    self.echo(f"  . {label}: got a {pool!r} slot after {waited:.0f}s")
                return
            if last_said is None or waited - last_said >= say_every_s:
                holders = ", ".join(sorted(r[:8] for r in info.active_run_ids)) or "?"
                self.echo(f"  . {label}: waiting for a slot of the {pool!r} pool ({info.active_slot_count}/"
                          f"{info.slot_count} held by run(s) {holders}; {GPU_POOL_ENV} sets its size); "
                          f"waited {waited:.0f}s, Ctrl-C stops")
                last_said = waited
            time.sleep(poll_s)
            waited += poll_s

    def saved_note(self) -> str:
        """What an interrupted run leaves behind, in one sentence: the steps finished and, when it stopped in a
        generation step, how many answers of that partition are in its generation store (the next run reuses them
        and asks only for the rest)."""
        from lc_pipeline.generate.checkpoint import GenerationCheckpoint

        parts = [f"{len(self.ran)} step(s) finished and saved"]
        if self.current is not None:
            label, assets, dims = self.current
            parts.append(f"stopped in {label}")
            if "generations" in assets and dims:
                try:
                    stored = GenerationCheckpoint(self.pipeline.resources["lake"].checkpoint_dir("generations", dims)).load()
                    parts.append(f"{0 if stored is None else stored.height} answer(s) of that partition stored")
                except (OSError, ValueError) as exc:  # an unreadable store: say so, the interrupt still wins
                    parts.append(f"its generation store could not be read ({exc})")
        return "; ".join(parts)

    # -- the plan: Dagster's asset graph, grouped into steps -----------------------------------------------------
    def plan(self) -> list[Group]:
        """The config's assets that ``lcp run`` materializes (all but ``lcp/runs: manual``), in the asset graph's
        topological order, grouped into steps: assets sharing a partitions definition whose parents of another
        definition are all done before them run together, one ``dg.materialize`` per partition key (the sources
        per source; the construction inputs; the instances per length; generations, metric_scores and the judges
        per (length, model); the per-model tables; the leaderboard)."""
        level: dict[dg.AssetKey, int] = {}
        groups: dict[tuple[int, str], Group] = {}
        for key in self.graph.toposorted_asset_keys:
            node = self.graph.get(key)
            if not node.is_materializable or versions.runs(node) == "manual":
                continue
            pdef = node.partitions_def
            level[key] = max([level[p] + (self.graph.get(p).partitions_def != pdef) for p in node.parent_keys
                              if p in level], default=0)
            dims = partition_dims_of(pdef)
            group = groups.setdefault((level[key], ",".join(dims)), Group(level[key], dims, pdef))
            group.assets.append(key.to_user_string())
        return merged(sorted(groups.values(), key=lambda g: (g.level, -len(g.dims))), self.graph)

    def partition_keys(self, group: Group, models: list[str], lengths: list[str]) -> list[dict[str, str]]:
        """Each partition of ``group`` this run materializes, as {dimension: value} ([{}]: unpartitioned)."""
        values = {SOURCE_DIM: [s.name for s in self.config.sources], LENGTH_DIM: lengths, MODEL_DIM: models}
        out: list[dict[str, str]] = [{}]
        for dim in group.dims:
            out = [{**d, dim: v} for d in out for v in values[dim]]
        return out

    def key_of(self, group: Group, dims: dict[str, str]) -> str | None:
        if not dims:
            return None
        if len(dims) == 1:
            return next(iter(dims.values()))
        return str(dg.MultiPartitionKey(dims))

    # -- running it -------------------------------------------------------------------------------------------
    def run(self, models: list[str] | None = None, lengths: list[str] | None = None,
            leaderboard: bool = True, upstream_if_missing: bool = False) -> pl.DataFrame | None:
        """``lcp run``: every step of :meth:`plan` not already done, for the config and ``models`` (default: the
        config's; ``[]``: the benchmark only, nothing generated). ``lengths``: only these levels of the models'
        partitions (``lcp backfill --length``). The model-independent steps run first, then each model's steps
        (its vLLM engine or server closed when the model is done), then the leaderboard (``leaderboard=False``:
        not). ``upstream_if_missing`` (``lcp backfill``: only the model's partitions): the model-independent steps
        only when the lake lacks instances of a level, or holds another config's (instances placed in the lake with
        no record are used as they are). Returns the leaderboard (None when it did not run, or a model waits for
        lengths not scored yet)."""
        models = list(self.config.models) if models is None else list(models)
        self.check_lake()
        if models:
            self.register_models(models)  # an unknown model: a clear error before anything runs
        self.board, self.materialized = None, []  # what this run materializes (upstream_ran)
        groups = self.plan()
        before = [g for g in groups if MODEL_DIM not in g.dims and not self.after_models(g, groups)]
        per_model = [g for g in groups if MODEL_DIM in g.dims]
        after = [g for g in groups if g not in before and g not in per_model]
        self.echo(f"benchmark {self.config.name!r}: lengths {list(self.config.lengths)}, lake {self.lake}")
        stale = set(self.missing_instances())
        if stale or not upstream_if_missing:
            with self.releasing_engines():  # a vLLM model that made LV-Eval's facts is closed before any model runs
                self.register_sources()
                for group in before:
                    self.run_group(group, [], list(self.config.lengths), stale=stale)
                self.record_instances()
        if not models:
            return None
        missing = self.missing_instances()
        if missing:
            raise RuntimeError(f"instances for lengths {missing} are not built yet, or were built from other inputs "
                               f"(config, code or data changed); run `lcp run` first")
        complete = True
        ride = len(models) == 1 and leaderboard and self.rides_along(after, per_model)
        for slug in models:
            with self.releasing_engines():
                complete = self.run_model(slug, per_model, lengths or list(self.config.lengths),
                                          after if ride else []) and complete
        if not complete or not leaderboard:
            return None
        if ride and self.board is not None:
            return self.board
        with self.leaderboard_lock():
            for group in after:
                self.run_group(group, models, list(self.config.lengths))
            return self._read_leaderboard()

    def after_models(self, group: Group, groups: list[Group]) -> bool:
        """Whether an unpartitioned group comes after (reads) the model-partitioned ones (the leaderboard)."""
        first_model_level = min((g.level for g in groups if MODEL_DIM in g.dims), default=None)
        return first_model_level is not None and group.level > first_model_level

    def rides_along(self, after: list[Group], per_model: list[Group]) -> bool:
        """Whether the final tables can run in the model's last Dagster run (issue 29: one run fewer per backfill):
        when they only follow the model's tables (deps, read from the lake) and load none of them as an input."""
        if not after or not per_model:
            return False
        model_assets = {dg.AssetKey(a) for g in per_model for a in g.assets}
        for group in after:
            for asset in group.assets:
                definition = self.graph.assets_def_for_key(dg.AssetKey(asset))
                for name, key in definition.keys_by_input_name.items():
                    if key in model_assets and not definition.node_def.input_def_named(name).dagster_type.is_nothing:
                        return False
        return True

    def run_model(self, slug: str, groups: list[Group], lengths: list[str], riders: list[Group]) -> bool:
        """Every step of one model: False when its per-model tables wait for lengths not scored yet."""
        calls_a_model = capabilities(self.pipeline.resources["models"].spec(slug).backend).calls_a_model
        for i, group in enumerate(groups):
            if LENGTH_DIM not in group.dims:
                waiting = self.unscored_lengths(group, slug)
                if waiting:
                    self.echo(f"  - {self.label(group.assets, slug)}: waiting for lengths {waiting} "
                              f"(lcp backfill --model {slug} --length ...)")
                    return False
            extra = riders if i == len(groups) - 1 else []
            self.run_group(group, [slug], lengths, pooled=calls_a_model, riders=extra)
        return True

    def unscored_lengths(self, group: Group, slug: str) -> list[str]:
        """The config's lengths whose (length, model) partitions the group's assets read are not in the lake."""
        parents = {p.to_user_string() for a in group.assets for p in self.node(a).parent_keys
                   if LENGTH_DIM in partition_dims_of(self.graph.get(p).partitions_def)
                   and MODEL_DIM in partition_dims_of(self.graph.get(p).partitions_def)
                   and versions.runs(self.graph.get(p)) == "always"}
        root = storage.lake_path(self.lake)
        return [lv for lv in self.config.lengths if any(not partition_path(root, p, {LENGTH_DIM: lv, MODEL_DIM: slug})
                                                        .exists() for p in sorted(parents))]

    def selected(self, group: Group) -> list[str]:
        """The group's assets this config runs now: ``judged`` / ``cited`` ones only when a task of the instances
        asks for that judge (the LLM judge also needs one configured: else it says which tasks stay unjudged)."""
        out = []
        for asset in group.assets:
            runs = versions.runs(self.node(asset))
            if runs == "judged" and not self.judged_tasks():
                continue
            if runs == "cited" and not self.cited_tasks():
                continue
            out.append(asset)
        return out

    def judged_tasks(self) -> list[str]:
        from lc_pipeline.score.benchmark_scores import judged_tasks
        from lc_pipeline.tasks.catalog import catalog_for

        judged = judged_tasks(self._instance_tasks(), catalog_for(self.config))
        if judged and not self.pipeline.resources["judge"].resolved_model():
            if not self._said_no_judge:
                self.echo(f"  ! {', '.join(judged)}: scored by the LLM judge, none configured (set LCP_JUDGE_MODEL "
                          "and OPENAI_BASE_URL): their benchmark_scores cells are counted as unjudged")
                self._said_no_judge = True
            return []
        return list(judged)

    def cited_tasks(self) -> list[str]:
        from lc_pipeline.score.benchmark_scores import nli_tasks
        from lc_pipeline.tasks.catalog import catalog_for

        return list(nli_tasks(self._instance_tasks(), catalog_for(self.config)))

    def run_group(self, group: Group, models: list[str], lengths: list[str], pooled: bool = True,
                  stale: set[str] = frozenset(), riders: list[Group] = (), only: set[str] | None = None,
                  force: bool = False) -> list[str]:
        """One step per partition of ``group``: each runs unless every asset of it is fresh and nothing it reads
        ran in this process since; ``judged`` / ``cited`` / ``every_time`` assets run every time they apply.
        ``riders``: unpartitioned groups run in the same Dagster run, after (under the leaderboard lock).
        ``only``: just these assets of the group. The labels of the steps that ran."""
        assets = [a for a in self.selected(group) if only is None or a in only]
        if not assets:
            return []
        ran = []
        for dims in self.partition_keys(group, models, lengths):
            pk = self.key_of(group, dims)
            label = self.label(assets, pk)
            kept = [a for a in assets if versions.runs(self.node(a)) == "always"]  # the others run every time
            must = force or self.upstream_ran(assets, dims) or (
                "instances" in assets and dims.get(LENGTH_DIM) in stale)  # the lake's record (lake.built_by) wins
            fresh = not must and all(self.is_fresh(a, pk, dims) for a in kept)
            todo = [a for a in assets if a not in kept] if fresh else assets
            extra = [a for g in riders for a in self.selected(g)]
            if fresh and kept:
                self.echo(f"  = {self.label(kept, pk)}: up to date, reused")
                self.reused.append(label)
            if not todo:
                continue
            label = self.label(todo, pk)
            if extra:
                with self.leaderboard_lock():
                    self.step(f"{label} + {self.label(extra, None)}", todo + extra, pk, dims, pooled=pooled)
                    self.mark_ran(todo + extra, dims)
                    self.board = self._read_leaderboard()
            else:
                self.step(label, todo, pk, dims, pooled=pooled)
                self.mark_ran(todo, dims)
            ran.append(label)
        return ran

    def label(self, assets: list[str], pk: str | None) -> str:
        """A step's name on the terminal: its assets' ops (a multi-asset by its own name: ``sources``) and the
        partition key."""
        ops = dict.fromkeys(self.graph.assets_def_for_key(dg.AssetKey(a)).node_def.name for a in assets)
        return " + ".join(ops) + (f" [{pk}]" if pk else "")

    def mark_ran(self, assets: list[str], dims: dict[str, str]) -> None:
        self.materialized.extend((a, dict(dims)) for a in assets)

    def upstream_ran(self, assets: list[str], dims: dict[str, str]) -> bool:
        """Whether a parent of ``assets`` (outside them) was materialized in this process for a partition that
        meets ``dims`` (the same value on every dimension both have): its readers are stale, as Dagster says."""
        parents = {p.to_user_string() for a in assets for p in self.node(a).parent_keys} - set(assets)
        return any(a in parents and all(dims.get(k, v) == v for k, v in d.items()) for a, d in self.materialized)

    def record_instances(self) -> None:
        """The lake's record of the config that built each level (lake.built_by), where the reused partitions'
        is missing or older."""
        if "instances" not in {a for g in self.plan() for a in g.assets}:
            return
        for level in self.config.lengths:
            fp = self.current_fingerprint("instances", {LENGTH_DIM: level})
            if built_by(self.lake, level) != {"config": self.config.name, "fingerprint": fp}:
                record_built_by(self.lake, level, self.config.name, fp)

    def check_lake(self) -> None:
        """Refuse this config in a lake whose instances at one of its levels another config built and models were
        scored on (lake.check_lake_config names that config and how to proceed): before anything is built or run."""
        check_lake_config(self.lake, self.config)

    def missing_instances(self) -> list[str]:
        """The config's levels whose instances are not in the lake, or were built from other inputs: their
        recorded data version (the lake's record of the config that built them, lake.built_by, else the Dagster
        materialization's) is not this config's current one (another config's instances, changed data or code).
        ``lcp run``, ``lcp backfill`` and ``lcp plan`` build those first. Instances with no record at all (placed in
        the lake by hand or by another tool) are used as they are."""
        root = storage.lake_path(self.lake)
        out = []
        for lv in self.config.lengths:
            if not readable_parquet(partition_path(root, "instances", {LENGTH_DIM: lv})):
                out.append(lv)
                continue
            record = built_by(self.lake, lv)
            recorded = record.get("fingerprint") if record is not None else self.recorded_fingerprint("instances", lv)
            if recorded is not None and recorded != self.current_fingerprint("instances", {LENGTH_DIM: lv}):
                out.append(lv)
        return out

    def judge(self, slug: str, lengths: list[str] | None = None) -> list[str]:
        """``lcp judge``: the ``judged`` / ``cited`` assets of the plan (the LLM judge, the NLI citation judge) on
        ``slug``'s generations, then its per-model tables when a judge ran. The generations must be there
        (``lcp run`` first); replies are cached, so a rerun asks the judges nothing twice. The assets that ran ([]
        when no task of the instances is judged or no judge is configured, which is said)."""
        self.register_models([slug])
        self.check_lake()
        levels = lengths or list(self.config.lengths)
        root = storage.lake_path(self.lake)
        missing = [lv for lv in levels if not readable_parquet(partition_path(
            root, "generations", {LENGTH_DIM: lv, MODEL_DIM: slug}))]
        if missing:
            raise RuntimeError(f"model {slug!r} has no generations at lengths {missing}: run `lcp run --model "
                               f"{slug}` (or `lcp backfill --model {slug}`) first")
        groups = [g for g in self.plan() if MODEL_DIM in g.dims]
        self.materialized = []
        judging = {a for g in groups for a in g.assets if versions.runs(self.node(a)) in ("judged", "cited")}
        done: list[str] = []
        with self.releasing_engines():
            for group in groups:
                if LENGTH_DIM in group.dims:
                    if self.run_group(group, [slug], levels, only=judging):
                        done += [a for a in group.assets if a in judging and a in self.selected(group)]
                elif done:  # new verdicts: the per-model tables read them
                    self.run_group(group, [slug], levels, force=True)
        return done

    @contextmanager
    def releasing_engines(self) -> Iterator[None]:
        """Close the vLLM engines and servers this process holds when the block ends, however it ends."""
        try:
            yield
        finally:
            released = self.pipeline.resources["models"].release_engines()
            if released:
                self.echo(f"  - vLLM engine/server of {', '.join(released)} closed")

    def preflight(self) -> None:
        """What would fail only after generation, checked before any model is called (probe D17): LongScore's base
        and long lengths must differ (score/longscore.py refuses them after every partition is generated). The
        commands that spend model time call it first (lcp run, backfill, plan)."""
        cfg = self.config
        overlap = sorted(set(cfg.base_lengths) & set(cfg.long_lengths))
        if overlap and dg.AssetKey("long_scores") in self.graph.materializable_asset_keys:
            raise ValueError(f"config {cfg.name!r}: lengths {overlap} are both base_lengths and long_lengths; "
                             "LongScore compares the long lengths with the base ones, so each length is one or the "
                             "other (checked before any generation)")

    def _instance_tasks(self) -> pl.DataFrame:
        root = storage.lake_path(self.lake)
        paths = [partition_path(root, "instances", {LENGTH_DIM: lv}) for lv in self.config.lengths]
        frames = [storage.read_parquet(p, columns=["benchmark", "task"]) for p in paths if p.exists()]
        return pl.concat(frames).unique() if frames else pl.DataFrame(schema={"benchmark": pl.String,
                                                                             "task": pl.String})

    def leaderboard(self) -> pl.DataFrame:
        """Only the final, unpartitioned steps (the leaderboard): they read every model evaluated so far. One lcp
        process at a time: two backfills finishing together could otherwise write last the board that read the
        lake first, without the other model. Serialized, the later run sees both."""
        groups = self.plan()
        with self.leaderboard_lock():
            for group in groups:
                if not group.dims and self.after_models(group, groups):
                    self.run_group(group, [], [], force=True)
            return self._read_leaderboard()

    def leaderboard_lock(self) -> FileLock:
        """The lock every leaderboard run is made under (see :meth:`leaderboard`)."""
        lock = self.pipeline.settings.dagster_home / "locks" / "leaderboard.lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(lock)

    def _read_leaderboard(self) -> pl.DataFrame:
        return storage.read_parquet(partition_path(storage.lake_path(self.lake), "leaderboard", {}))


@dataclass
class Group:
    """Assets of one partitions definition that run together, one Dagster run per partition key."""

    level: int
    dims: tuple[str, ...]
    partitions_def: dg.PartitionsDefinition | None
    assets: list[str] = field(default_factory=list)


def partition_dims_of(pdef: dg.PartitionsDefinition | None) -> tuple[str, ...]:
    """The dimensions of a partitions definition: () unpartitioned; ("length", "model") for (length, model)."""
    if pdef is None:
        return ()
    if isinstance(pdef, dg.MultiPartitionsDefinition):
        return tuple(sorted(d.name for d in pdef.partitions_defs))
    return (getattr(pdef, "name", None) or LENGTH_DIM,)


def merged(groups: list[Group], graph) -> list[Group]:
    """``groups`` with each one moved into the next group of the same dimensions when nothing between them reads
    it (prior_knowledge joins long_scores and benchmark_scores in one step per model, as one Dagster run)."""
    out = list(groups)
    i = 0
    while i < len(out):
        a = out[i]
        later = [j for j in range(i + 1, len(out)) if out[j].dims == a.dims]
        if later:
            b, between = out[later[0]], out[i + 1:later[0]]
            readers = {c.to_user_string() for x in a.assets for c in graph.get(dg.AssetKey(x)).child_keys}
            if not readers & {x for g in between for x in g.assets}:
                b.assets[:0] = a.assets
                del out[i]
                continue
        i += 1
    return out

# ------------------------------------------------------------------------------ GPU pool

GPU_POOL = "gpu"  # the pool of the generations asset (assets/generation.py)
GPU_POOL_ENV = "LCP_GPU_POOL_SLOTS"


def gpu_pool_slots() -> int:
    """Slots of the ``gpu`` pool: ``$LCP_GPU_POOL_SLOTS``, else the NVIDIA GPUs this process can see, counted
    without importing torch (gpus.visible_gpus: CUDA_VISIBLE_DEVICES, the driver's /proc entries, nvidia-smi),
    else 1 (on a CPU, generation steps are CPU bound and gain nothing from running side by side)."""
    from lc_pipeline.gpus import visible_gpus

    raw = env(GPU_POOL_ENV)
    if raw:
        try:
            n = int(raw)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(f"{GPU_POOL_ENV}={raw!r}: expected a positive integer")
        return n
    return max(1, visible_gpus())


def configure_gpu_pool(instance: dg.DagsterInstance, slots: int | None = None) -> int:
    """Size the ``gpu`` pool in this instance (it lives in the instance's storage, not in YAML)."""
    slots = gpu_pool_slots() if slots is None else slots
    for attempt in range(2):
        info = instance.event_log_storage.get_concurrency_info(GPU_POOL)
        if info.slot_count == slots:
            break
        try:
            instance.event_log_storage.set_concurrency_slots(GPU_POOL, slots)
            break
        except Exception as exc:  # two lcp processes creating the pool at once: the other one won, re-read
            if attempt or "UNIQUE" not in str(exc).upper():
                raise
    return slots


def recover_dead_cli_runs(instance: dg.DagsterInstance) -> list[str]:
    """Runs that `lcp` started in-process on this host and whose process is gone (kill -9, OOM):
    mark them failed and free their pool slots, or the next generation step would wait forever
    for a slot the dead run still holds. Their finished generations are in the store and are reused."""
    from dagster import DagsterRunStatus, RunsFilter

    host = socket.gethostname()
    runs = instance.get_runs(
        filters=RunsFilter(statuses=[DagsterRunStatus.STARTING, DagsterRunStatus.STARTED], tags={"lcp/command": "cli"})
    )
    dead = []
    for run in runs:
        pid = run.tags.get("lcp/pid")
        if run.tags.get("lcp/host") != host or not pid or _alive(int(pid)):
            continue
        instance.report_run_failed(run, f"the lcp process {pid} that ran it is gone (killed?)")
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        dead.append(run.run_id)
    return dead


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ------------------------------------------------------------------------------ backfills over GraphQL


class BackfillError(RuntimeError):
    pass


def _graphql(url: str, query: str, variables: dict, timeout: float = 30.0) -> dict:
    req = urllib.request.Request(
        url.rstrip("/") + "/graphql",
        data=json.dumps({"query": query, "variables": variables}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        body = json.loads(resp.read())
    if body.get("errors"):
        raise BackfillError(f"GraphQL errors from {url}: {body['errors']}")
    return body["data"]


_LAUNCH = """
mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on UnauthorizedError { message }
    ... on InvalidSubsetError { message }
    ... on PartitionSetNotFoundError { message }
  }
}
"""

_STATUS = """
query Status($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    __typename
    ... on PartitionBackfill { id status numPartitions runs { runId status } }
    ... on PythonError { message }
  }
}
"""

TERMINAL_BACKFILL = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}


def launch_backfill(url: str, assets: tuple[str, ...], partition_names: list[str], title: str,
                    tags: dict[str, str]) -> str:
    """An asset backfill through the webserver's GraphQL API (what the UI's "Materialize" button
    does); the daemon executes it, one run per partition. Returns its id."""
    params = {
        "assetSelection": [{"path": [a]} for a in assets],
        "partitionNames": partition_names,
        "title": title,
        "tags": [{"key": k, "value": v} for k, v in tags.items()],
    }
    out = _graphql(url, _LAUNCH, {"params": params})["launchPartitionBackfill"]
    if out["__typename"] != "LaunchBackfillSuccess":
        raise BackfillError(f"backfill {title!r} was refused: {out['__typename']}: {out.get('message')}")
    return out["backfillId"]


def launch_model_backfill(url: str, model: str, lengths: list[str]) -> str:
    """Only ``model``'s (length, model) partitions of generations and metric_scores."""
    validate_model_slug(model)
    return launch_backfill(url, ("generations", "metric_scores"), [str(length_model_key(lv, model)) for lv in lengths],
                           f"new model {model}", {"lcp/backfill": model})


def wait_for_backfill(url: str, backfill_id: str, timeout_s: float = 3600, poll_s: float = 2.0,
                      echo: Callable[[str], None] = print) -> dict:
    """Poll until the backfill reaches a terminal status; returns its last status record."""
    deadline, last = time.monotonic() + timeout_s, None
    while True:
        out = _graphql(url, _STATUS, {"id": backfill_id})["partitionBackfillOrError"]
        if out["__typename"] != "PartitionBackfill":
            raise BackfillError(f"backfill {backfill_id}: {out['__typename']}: {out.get('message')}")
        state = (out["status"], tuple(sorted(r["status"] for r in out["runs"])))
        if state != last:
            echo(f"  backfill {backfill_id}: {out['status']}, runs {dict(_count(state[1]))}")
            last = state
        if out["status"] in TERMINAL_BACKFILL:
            return out
        if time.monotonic() > deadline:
            raise BackfillError(f"backfill {backfill_id} still {out['status']} after {timeout_s:.0f}s")
        time.sleep(poll_s)


def _count(statuses: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in statuses:
        out[s] = out.get(s, 0) + 1
    return out
