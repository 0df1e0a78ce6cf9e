"""Materialize the graph from the command line, one run per partition, reusing finished work.

``lcp demo`` and ``lcp backfill`` use this. Every run goes into the persistent Dagster
instance (``DAGSTER_HOME``), so the UI shows the same history afterwards. A partition is
reused, not re-run, when its latest materialization carries the current stage fingerprint
(:mod:`lc_pipeline.fingerprints`) and its Parquet file is on disk.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import dagster as dg
import polars as pl
from filelock import FileLock

from lc_pipeline import storage
from lc_pipeline.assets.common import FINGERPRINT_KEY
from lc_pipeline.assets.lveval import facts_fingerprint
from lc_pipeline.definitions import Pipeline
from lc_pipeline.fingerprints import stage_fingerprint
from lc_pipeline.generate.registry import validate_model_slug
from lc_pipeline.lake import built_by, check_lake_config, record_built_by
from lc_pipeline.partitions import MODEL_DIM, SOURCE_DIM, length_model_key, validate_source_name
from lc_pipeline.resources.parquet_io import partition_path
from lc_pipeline.settings import env


class StepFailed(RuntimeError):
    """A step of a run failed: the message names the step (its label holds the partition) and the cause; the full
    trace is in the Dagster run's log, not on the terminal."""


class Interrupted(Exception):
    """SIGINT or SIGTERM stopped a run; the message says what was saved."""


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


def describe_error(error) -> str:
    """The user's error under Dagster's wrappers ("Error occurred while executing op ..."), as one or a few lines."""
    chain, seen = [], 0
    while error is not None and seen < 10:
        chain.append(error)
        error, seen = error.cause or error.context, seen + 1
    own = [e for e in chain if not e.cls_name.startswith("Dagster")] or chain[::-1]  # else Dagster's innermost
    inner = own[0]
    message = inner.message.strip()
    head, sep, rest = message.partition(": ")
    if sep and head.rsplit(".", 1)[-1] == inner.cls_name:  # "pkg.module.Class: text" -> "Class: text"
        message = rest
    return message if inner.cls_name == "Failure" else f"{inner.cls_name}: {message}"


_SIGNALS = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}
_received: dict[str, int | None] = {"fd": None, "last": None}


def _raise_keyboard_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


class _QuietFailuresLogger(logging.Logger):
    """Dagster's console logger without its ERROR records (a failed step's or run's stack trace): ``lcp`` prints
    its own message for those; the event log (``lcp ui``) keeps them in full."""

    def __init__(self, name: str, level: int | str = logging.NOTSET) -> None:
        super().__init__(name, level)
        if name == "dagster":
            self.addFilter(lambda record: record.levelno < logging.ERROR)


@contextmanager
def watching_signals() -> Iterator[None]:
    """For the commands that run the graph in this process (demo, backfill, plan): SIGTERM interrupts as SIGINT does
    (a KeyboardInterrupt; Dagster turns both into an interrupted step), the signal that came is recorded (a wakeup
    fd: Dagster replaces the handlers while a run executes) so :func:`interrupt_exit` exits 130 or 143, and
    Dagster's console shows no failure traces. Main thread only; restored when the block ends."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    old_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    old_term = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    old_class = logging.getLoggerClass()
    logging.setLoggerClass(_QuietFailuresLogger)
    _received.update(fd=read_fd, last=None)
    try:
        yield
    finally:
        logging.setLoggerClass(old_class)
        signal.signal(signal.SIGTERM, old_term)
        signal.set_wakeup_fd(old_fd)
        _received.update(fd=None)
        os.close(read_fd)
        os.close(write_fd)


def last_signal() -> int | None:
    """SIGINT or SIGTERM, whichever came last inside :func:`watching_signals` (None: neither)."""
    fd = _received["fd"]
    if fd is not None:
        try:
            data = os.read(fd, 4096)
        except BlockingIOError:
            data = b""
        got = [b for b in data if b in _SIGNALS]
        if got:
            _received["last"] = got[-1]
    return _received["last"]


def interrupt_exit(exc: BaseException, runner: Runner | None, resume: str, echo: Callable[[str], None]) -> None:
    """One line for an interrupted run (what was saved, how to resume), then exit 128 + the signal: 130 for
    SIGINT (Ctrl-C), 143 for SIGTERM. The trace of the interrupted step is in the Dagster log."""
    signum = last_signal() or signal.SIGINT
    saved = str(exc) if isinstance(exc, Interrupted) and str(exc) else (
        runner.saved_note() if runner is not None else "nothing was running")
    echo(f"Interrupted ({_SIGNALS.get(signum, signum)}): {saved}. Resume with `{resume}`: finished steps and "
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
        self.instance = instance
        self.echo = echo
        self.lake = pipeline.settings.lake_dir
        self.ran: list[str] = []
        self.reused: list[str] = []
        self.tags: dict[str, str] = {}  # added to every run this runner launches
        self.board: pl.DataFrame | None = None  # the leaderboard a backfill_model made in its model's run
        self.current: tuple[str, list[str], dict[str, str]] | None = None  # the step running now (label, assets, dims)
        recovered = recover_dead_cli_runs(instance)
        if recovered:
            echo(f"  ! marked {len(recovered)} run(s) of killed lcp processes as failed and freed their slots")
        configure_gpu_pool(instance)

    # -- partitions -------------------------------------------------------------------
    def register_sources(self) -> list[str]:
        names = [validate_source_name(s.name) for s in self.config.sources]
        self._add_dynamic(SOURCE_DIM, names)
        return names

    def register_models(self, slugs: list[str]) -> None:
        for s in slugs:
            validate_model_slug(s)
            self.pipeline.resources["models"].spec(s)  # unknown model -> clear error before any run
        self._add_dynamic(MODEL_DIM, slugs)

    def _add_dynamic(self, name: str, keys: list[str]) -> None:
        new = [k for k in keys if not self.instance.has_dynamic_partition(name, k)]
        if new:
            self.instance.add_dynamic_partitions(name, new)

    # -- freshness --------------------------------------------------------------------
    def is_fresh(self, asset: str, partition_key: str | None, dims: dict[str, str], fingerprint: str) -> bool:
        flt = dg.AssetRecordsFilter(
            asset_key=dg.AssetKey(asset), asset_partitions=[partition_key] if partition_key else None
        )
        records = self.instance.fetch_materializations(flt, limit=1).records
        if not records:
            return False
        meta = records[0].asset_materialization.metadata
        recorded = meta.get(FINGERPRINT_KEY)
        if recorded is None or getattr(recorded, "value", recorded) != fingerprint:
            return False
        path = partition_path(storage.lake_path(self.lake), asset, dims)
        return readable_parquet(path)

    def step(
        self,
        label: str,
        assets: list[str],
        fingerprints: dict[str, str],
        partition_key: str | dg.MultiPartitionKey | None = None,
        dims: dict[str, str] | None = None,
        force: bool = False,
        pooled: bool = True,
    ) -> bool:
        """Materialize ``assets`` for one partition unless all of them are fresh. True if it ran.

        ``pooled=False``: the generations asset outside the ``gpu`` pool (a model that calls no model). A step
        that needs a slot of the pool waits here for one, saying so (:meth:`wait_for_pool_slot`)."""
        pk = str(partition_key) if partition_key is not None else None
        if not force and all(self.is_fresh(a, pk, dims or {}, fingerprints[a]) for a in assets):
            self.echo(f"  = {label}: up to date, reused")
            self.reused.append(label)
            return False
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
            if error is not None and error.cls_name in INTERRUPT_ERRORS:
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
        return True

    def wait_for_pool_slot(self, pool: str, label: str, poll_s: float = 1.0, say_every_s: float = 30.0) -> None:
        """Wait until ``pool`` has a free slot, here rather than inside Dagster's run (which waits without a word and
        ignores Ctrl-C): a line at once and then every ``say_every_s`` naming the step, the pool and the runs holding
        its slots; Ctrl-C / SIGTERM stop the wait. (Another process can still take the freed slot first: then
        Dagster's own claim waits, as before.)"""
        storage_ = self.instance.event_log_storage
        waited, last_said = 0.0, None
        while True:
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

    # -- stages ------------------------------------------------------------------------
    def build_benchmark(self) -> None:
        """Sources, retrieval and instances for every configured length (a vLLM model that made LV-Eval's facts
        is closed before any model is evaluated)."""
        with self.releasing_engines():
            self._build_benchmark()

    def _build_benchmark(self) -> None:
        cfg = self.config
        self.check_lake()
        self.echo(f"benchmark {cfg.name!r}: lengths {list(cfg.lengths)}, lake {self.lake}")
        for name in self.register_sources():
            fps = {a: stage_fingerprint(a, cfg) for a in ("source_documents", "source_items", "rejected_records")}
            self.step(f"sources [{name}]", list(fps), fps, name, {SOURCE_DIM: name})
        for asset in ("passages", "passage_index", "hard_negatives"):
            if self.has(asset):  # a benchmark run as released has no construction inputs
                self.step(asset, [asset], {asset: stage_fingerprint(asset, cfg)})
        for asset in ("confusing_facts", "replacement_rules"):  # LV-Eval CFI / KPR inputs (empty when unused)
            if self.has(asset):
                self.step(asset, [asset], {asset: facts_fingerprint(asset, cfg, self.pipeline.resources["models"])})
        stale = set(self.missing_instances())  # the lake's own record wins over the Dagster instance's
        fp = {"instances": stage_fingerprint("instances", cfg)}  # one per config: it hashes the input files
        for level in cfg.lengths:
            self.step(f"instances [{level}]", ["instances"], fp, level, {"length": level}, force=level in stale)
            record = built_by(self.lake, level)
            if record != {"config": cfg.name, "fingerprint": fp["instances"]}:
                record_built_by(self.lake, level, cfg.name, fp["instances"])

    def check_lake(self) -> None:
        """Refuse this config in a lake whose instances at one of its levels another config built and models were
        scored on (lake.check_lake_config names that config and how to proceed): before anything is built or run."""
        check_lake_config(self.lake, self.config)

    def missing_instances(self) -> list[str]:
        """The config's levels whose instances are not in the lake, or were built from other inputs: their
        recorded fingerprint (the lake's record of the config that built them, lake.built_by, else the Dagster
        materialization's) is not this config's current one (another config's instances, changed data or code;
        lc_pipeline.fingerprints). ``lcp demo``, ``lcp backfill`` and ``lcp plan`` build those first. Instances
        with no record at all (placed in the lake by hand or by another tool) are used as they are."""
        fp = stage_fingerprint("instances", self.config)
        root = storage.lake_path(self.lake)
        out = []
        for lv in self.config.lengths:
            if not readable_parquet(partition_path(root, "instances", {"length": lv})):
                out.append(lv)
                continue
            record = built_by(self.lake, lv)
            recorded = record.get("fingerprint") if record is not None else self.recorded_fingerprint("instances", lv)
            if recorded is not None and recorded != fp:
                out.append(lv)
        return out

    def recorded_fingerprint(self, asset: str, partition_key: str | None) -> str | None:
        """The fingerprint the latest materialization of ``asset`` [``partition_key``] recorded (None: none)."""
        flt = dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset),
                                    asset_partitions=[partition_key] if partition_key else None)
        records = self.instance.fetch_materializations(flt, limit=1).records
        if not records:
            return None
        recorded = records[0].asset_materialization.metadata.get(FINGERPRINT_KEY)
        return None if recorded is None else str(getattr(recorded, "value", recorded))

    def evaluate_model(self, slug: str, lengths: list[str] | None = None) -> bool:
        """Only this model's partitions: generations + metric_scores per length, then its long_scores
        (False when that last step waits for lengths not scored yet).

        Its partitions share one generator (ModelsResource caches it in this process): a vLLM model starts one
        engine or server for all of them, closed here when the model is done, also after an error or Ctrl-C.
        """
        with self.releasing_engines():
            return self._evaluate_model(slug, lengths)

    def backfill_model(self, slug: str, lengths: list[str] | None = None) -> pl.DataFrame | None:
        """``lcp backfill``: :meth:`evaluate_model`, then the leaderboard (None while the model waits for lengths).

        In a benchmark run as released, the leaderboard reads every model's benchmark_scores from the lake (no
        input of its own), so when this model's benchmark_scores runs, the leaderboard runs in the same Dagster
        run, after it, under the leaderboard lock (one run fewer per backfill, issue 29); when they are reused,
        the leaderboard runs alone as in :meth:`leaderboard`."""
        with self.releasing_engines():
            complete = self._evaluate_model(slug, lengths, leaderboard_in_model_run=not self.has("long_scores"))
        if not complete:
            return None
        return self.board if self.board is not None else self.leaderboard()

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
        commands that spend model time call it first (lcp demo, backfill, plan)."""
        cfg = self.config
        overlap = sorted(set(cfg.base_lengths) & set(cfg.long_lengths))
        if overlap and self.has("long_scores"):
            raise ValueError(f"config {cfg.name!r}: lengths {overlap} are both base_lengths and long_lengths; "
                             "LongScore compares the long lengths with the base ones, so each length is one or the "
                             "other (checked before any generation)")

    def _evaluate_model(self, slug: str, lengths: list[str] | None, leaderboard_in_model_run: bool = False) -> bool:
        cfg = self.config
        self.register_models([slug])
        self.check_lake()
        missing = self.missing_instances()
        if missing:
            raise RuntimeError(f"instances for lengths {missing} are not built yet, or were built from other inputs "
                               f"(config, code or data changed); run `lcp demo` (or build) first")
        spec_fp = self.pipeline.resources["models"].spec(slug).fingerprint()
        fps = {a: stage_fingerprint(a, cfg, spec_fp)
               for a in ("generations", "metric_scores", "prior_knowledge", "long_scores", "lveval_ablation",
                         "benchmark_scores")}
        calls_a_model = self.pipeline.resources["models"].spec(slug).backend != "imported"  # imported: a lookup
        for level in lengths or cfg.lengths:
            key = length_model_key(level, slug)
            dims = {"length": level, MODEL_DIM: slug}
            self.step(f"generations + metric_scores [{level}|{slug}]", ["generations", "metric_scores"],
                      fps, key, dims, pooled=calls_a_model)
        # LongScore and the ablation read every length: with some still unscored (a backfill of
        # one length), they wait for the backfill that completes the set instead of failing.
        unscored = [lv for lv in cfg.lengths if not partition_path(
            storage.lake_path(self.lake), "metric_scores", {"length": lv, MODEL_DIM: slug}).exists()]
        if unscored:
            self.echo(f"  - prior_knowledge + long_scores + lveval_ablation + benchmark_scores [{slug}]: waiting for "
                      f"lengths {unscored} (lcp backfill {slug} --length ...)")
            return False
        judged = self.judge_headline_tasks(slug, lengths or cfg.lengths)
        judged = self.score_citations(slug, lengths or cfg.lengths) or judged
        per_model = [a for a in ("prior_knowledge", "long_scores", "lveval_ablation", "benchmark_scores") if self.has(a)]
        per_model_fps, dims = {a: fps[a] for a in per_model}, {MODEL_DIM: slug}
        if leaderboard_in_model_run and (judged or not all(self.is_fresh(a, slug, dims, per_model_fps[a])
                                                           for a in per_model)):
            with self.leaderboard_lock():
                self.step(f"{' + '.join(per_model)} [{slug}] + leaderboard", [*per_model, "leaderboard"],
                          {**per_model_fps, "leaderboard": ""}, slug, dims, force=True)
                self.board = self._read_leaderboard()
            return True
        self.step(f"{' + '.join(per_model)} [{slug}]", per_model, per_model_fps, slug,
                  dims, force=judged)  # new verdicts: the tables read them
        return True

    def judge_headline_tasks(self, slug: str, lengths) -> bool:
        """Loong's (and any task file's ``source: judge``) table cells are the judge's verdicts: with a judge
        configured ($LCP_JUDGE_MODEL, $OPENAI_BASE_URL), judge ``slug``'s partitions first (replies are cached:
        a rerun asks nothing twice); without one, say which tasks stay unjudged (benchmark_scores counts them)."""
        from lc_pipeline.score.benchmark_scores import judged_tasks
        from lc_pipeline.tasks.catalog import catalog_for

        judged = judged_tasks(self._instance_tasks(), catalog_for(self.config))
        if not judged:
            return False
        if not self.pipeline.resources["judge"].resolved_model():
            self.echo(f"  ! {', '.join(judged)}: scored by the LLM judge, none configured (set LCP_JUDGE_MODEL and "
                      "OPENAI_BASE_URL): their benchmark_scores cells are counted as unjudged")
            return False
        for level in lengths:
            self.step(f"judge_scores [{level}|{slug}]", ["judge_scores"], {"judge_scores": ""},
                      length_model_key(level, slug), {"length": level, MODEL_DIM: slug}, force=True)
        return True

    def judge_model(self, slug: str, lengths: list[str] | None = None) -> list[str]:
        """``lcp judge``: the LLM judge and the NLI citation judge on ``slug``'s generations (the steps
        :meth:`evaluate_model` runs after generation), then its per-model tables and the leaderboard when a judge
        gave verdicts. The generations must be there (``lcp run`` / ``lcp backfill`` first); replies are cached, so a
        rerun asks the judges nothing twice. The steps that ran, by name ([] when no task of the instances is
        judged or no judge is configured, which is said)."""
        self.register_models([slug])
        self.check_lake()
        levels = lengths or list(self.config.lengths)
        root = storage.lake_path(self.lake)
        missing = [lv for lv in levels if not readable_parquet(partition_path(
            root, "generations", {"length": lv, MODEL_DIM: slug}))]
        if missing:
            raise RuntimeError(f"model {slug!r} has no generations at lengths {missing}: run `lcp run --model "
                               f"{slug}` (or `lcp backfill --model {slug}`) first")
        with self.releasing_engines():
            judged = self.judge_headline_tasks(slug, levels)
            cited = self.score_citations(slug, levels)
        steps = [name for name, ran in (("judge_scores", judged), ("citation_scores", cited)) if ran]
        if steps:
            spec_fp = self.pipeline.resources["models"].spec(slug).fingerprint()
            per_model = [a for a in ("prior_knowledge", "long_scores", "lveval_ablation", "benchmark_scores")
                         if self.has(a)]
            self.step(f"{' + '.join(per_model)} [{slug}]", per_model,
                      {a: stage_fingerprint(a, self.config, spec_fp) for a in per_model}, slug, {MODEL_DIM: slug},
                      force=True)  # new verdicts: the tables read them
        return steps

    def _instance_tasks(self) -> pl.DataFrame:
        root = storage.lake_path(self.lake)
        paths = [partition_path(root, "instances", {"length": lv}) for lv in self.config.lengths]
        frames = [storage.read_parquet(p, columns=["benchmark", "task"]) for p in paths if p.exists()]
        return pl.concat(frames).unique() if frames else pl.DataFrame(schema={"benchmark": pl.String,
                                                                             "task": pl.String})

    def score_citations(self, slug: str, lengths) -> bool:
        """HELMET Cite's citation recall and precision (ALCE, helmet.md §3) are NLI-judged: when a task of the
        instances declares them, materialize ``slug``'s citation_scores partitions before its benchmark_scores
        (verdicts are cached: a rerun asks the NLI judge nothing twice). The asset fails naming what to set when
        no NLI judge is configured (the nli resource, $LCP_NLI_BACKEND, or the config's ``nli:``)."""
        from lc_pipeline.score.benchmark_scores import nli_tasks
        from lc_pipeline.tasks.catalog import catalog_for

        if not self.has("citation_scores"):
            return False
        cited = nli_tasks(self._instance_tasks(), catalog_for(self.config))
        if not cited:
            return False
        for level in lengths:
            self.step(f"citation_scores [{level}|{slug}]", ["citation_scores"], {"citation_scores": ""},
                      length_model_key(level, slug), {"length": level, MODEL_DIM: slug}, force=True)
        return True

    def has(self, asset: str) -> bool:
        """Whether the pipeline's graph has ``asset`` (a benchmark run as released has no LongScore assets)."""
        return any(key.to_user_string() == asset for a in self.pipeline.assets for key in a.keys)

    def leaderboard(self) -> pl.DataFrame:
        # Always re-run: it is cheap and must reflect every model evaluated so far. One lcp process
        # at a time: two backfills finishing together could otherwise write last the board that read
        # the lake first, without the other model. Serialized, the later run sees both long_scores.
        with self.leaderboard_lock():
            self.step("leaderboard", ["leaderboard"], {"leaderboard": ""}, force=True)
            return self._read_leaderboard()

    def leaderboard_lock(self) -> FileLock:
        """The lock every leaderboard run is made under (see :meth:`leaderboard`)."""
        lock = self.pipeline.settings.dagster_home / "locks" / "leaderboard.lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(lock)

    def _read_leaderboard(self) -> pl.DataFrame:
        return storage.read_parquet(partition_path(storage.lake_path(self.lake), "leaderboard", {}))

    def demo(self, models: list[str] | None = None) -> pl.DataFrame:
        self.build_benchmark()
        for slug in models or list(self.config.models):
            self.evaluate_model(slug)
        return self.leaderboard()


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
