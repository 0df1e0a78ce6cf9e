"""Every `lcp` line in the code blocks of README.md and docs/*.md runs, and does what the page around it says
(issue 32, acceptance 4). tests/unit/test_docs_commands.py resolves every line, inline prose spans included, against
the CLI without running it; this module runs the code-block lines (the inline spans stay resolve-only: they name a
command mid-sentence, often without its arguments).

A page is read as a reader follows it: its lines run in page order, in a sandbox project of that page (each config
the page names gets its own project, as the docs ask: one lake per config). A test for one line first runs the
page's earlier lines it has not run yet, so `pytest -k` on a single line works. The sandbox of the demo config is a
copy of the session's CLI demo project (tests/built_lakes.py: built and evaluated once, so lines that read results
have a lake); another config starts from an empty project. Each line runs in process (click's CliRunner) in the
sandbox's folder, with its environment, and the environment is put back after it (a shell runs each command in a
process of its own).

What a line runs with where the page leaves it to the reader or names what this machine has not got is declared
in the tables below, each with its reason: SUBSTITUTIONS (a word of the line), CONFIG_STAND_INS and
MODEL_STAND_INS (a config or model the line names), USER_FILES (a file the reader brings). Lines that cannot run
here are in CANNOT_RUN, each naming the test that runs the same command; the test checks that the named test
exists and its file holds the command's words.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import os
import re
import shlex
import shutil
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import built_lakes
import polars as pl
import pytest
import yaml
from click.testing import CliRunner
from conftest import REPO
from doc_commands import Example, block_examples
from shared_files import OFFICIAL, SHARED_DATA, skip_unless

from lc_pipeline.cli import main

pytestmark = [pytest.mark.slow, skip_unless(SHARED_DATA / "longbench", "the shared LongBench records")]

LINES = block_examples()

# ---------------------------------------------------------------------------------------------------------------
# The tables
# ---------------------------------------------------------------------------------------------------------------

# A word of a doc line -> (what runs here, why). ``{root}`` is the sandbox's folder, ``{llama_server}`` the /v1 URL
# of the llama.cpp server this module starts for the page that needs one.
SUBSTITUTIONS: dict[str, tuple[str, str]] = {
    "/models/my-model": ("{root}/my-model",
                         "the reader's own model folder: here one holding SmolLM2's GGUF under the file name the "
                         "line gives"),
    "http://127.0.0.1:8081/v1": ("{llama_server}",
                                 "the llama-cpp-python server the page starts on port 8081: here started by this "
                                 "module on a free loopback port (same model, alias and settings)"),
}

# --config NAME -> (the sandbox file it runs with, why)
CONFIG_STAND_INS: dict[str, tuple[str, str]] = {
    "demo": (built_lakes.CONFIG_FILE,
             "the packaged demo (240 entities, three levels x three depths) takes many minutes on 2 cores; the "
             "sandbox's config is the same demo corpus and the same steps at two short levels, already built and "
             "evaluated with SmolLM2 (tests/built_lakes.py CLI_DEMO_CONFIG)"),
}

# A model a run / plan / backfill / compare line names -> (the model that runs, why). ``reference`` is LongBench's
# reference predictions (the shared records' ``reference_prediction``), imported into the sandbox on first use.
MODEL_STAND_INS: dict[str, tuple[str, str]] = {
    "qwen-0.5b": ("smollm2-135m",
                  "the Qwen weights are not on this machine (no network); the built-in SmolLM2 stands in for the "
                  "transformers model, already evaluated in the sandbox, so the run reuses its partitions"),
    "qwen-7b": ("reference", "a vLLM engine needs a CUDA GPU: LongBench's reference predictions, imported, stand in"),
    "qwen-7b-api": ("reference", "no server at 127.0.0.1:8000 serves Qwen here: LongBench's reference predictions, "
                                 "imported, stand in (every record answered, nothing generated)"),
    "my-model": ("reference", "the reader's own model: LongBench's reference predictions, imported, stand in"),
    "my-api-model": ("smollm2-135m", "the reader's own API model: SmolLM2 stands in (its token counts are real)"),
}

# A file the line reads that the reader brings -> (how this module writes it in the sandbox, why).
USER_FILES: dict[str, tuple[Callable[[Path], None], str]] = {}


def user_file(name: str, reason: str):
    def register(write: Callable[[Path], None]):
        USER_FILES[name] = (write, reason)
        return write
    return register


@user_file("preds.jsonl", "predictions made elsewhere: the shared LongBench records' reference predictions")
def _predictions(path: Path) -> None:
    path.write_text("".join(json.dumps({"_id": r["_id"], "prediction": r["reference_prediction"]}) + "\n"
                            for r in longbench_records()))


@user_file("scores.csv", "scores computed elsewhere: the 100-LongBench paper's Table 7 (8 models, base and 8k-128k)")
def _paper_scores(path: Path) -> None:
    table7 = {"llama-3.1-8B": (44.065, [36.64625, 35.48, 36.29, 38.7625, 34.68375]),
              "llama-3.1-70B": (67.52375, [65.15625, 60.33, 54.72875, 49.50125, 33.03375]),
              "llama-3.2-1B": (28.7525, [25.9425, 21.67625, 20.21125, 18.7025, 15.70625]),
              "Qwen2.5-7B": (57.42625, [50.43375, 46.715, 45.9575, 36.93875, 18.95625])}
    rows = [("avg", model, "base", base) for model, (base, _) in table7.items()]
    rows += [("avg", model, level, score) for model, (_, scores) in table7.items()
             for level, score in zip(["8k", "16k", "32k", "64k", "128k"], scores)]
    pl.DataFrame(rows, schema=["task", "model", "length", "score"], orient="row").write_csv(path)


@user_file("train.parquet", "a training score matrix: the shared MiniLongBench matrix (20 LLMs), on the first 40 "
                            "samples of each of its 21 tasks (the whole matrix takes minutes to fit on 2 cores)")
def _train_scores(path: Path) -> None:
    matrix = pl.read_parquet(SHARED_DATA / "minilongbench" / "scores_train_models.parquet")
    first = (matrix.select("task", "task_sample", "global_sample").unique().sort("task", "task_sample")
             .group_by("task", maintain_order=True).head(40).select("global_sample"))
    matrix.join(first, on="global_sample").write_parquet(path)


@user_file("pca10.parquet", "the samples' embeddings: the authors' released 10-dim PCA of every LongBench sample")
def _embeddings(path: Path) -> None:
    shutil.copyfile(SHARED_DATA / "minilongbench" / "sample_pca10.parquet", path)


def _subset_scores(path: Path) -> pl.DataFrame:
    subset = pl.read_parquet(path.parent / "mlb" / "subset.parquet").select("global_sample")
    matrix = pl.read_parquet(SHARED_DATA / "minilongbench" / "scores_train_models.parquet")
    models = sorted(set(matrix["model"]))[:2]
    return matrix.filter(pl.col("model").is_in(models)).join(subset, on="global_sample")


@user_file("new_models_on_subset.parquet", "new models' scores on the fitted subset: two models of the shared "
                                           "matrix, on the samples mlb/ kept")
def _new_models(path: Path) -> None:
    _subset_scores(path).select("model", "global_sample", "score").write_parquet(path)


@user_file("partial.csv", "a model scored on part of the subset: one model of the shared matrix, two categories")
def _partial(path: Path) -> None:
    scores = _subset_scores(path)
    model = scores["model"][0]
    categories = sorted(set(scores["category"]))[:2]
    scores.filter(pl.col("model") == model, pl.col("category").is_in(categories)).select(
        "model", "global_sample", "score").write_csv(path)


@user_file("my-config.yaml", "the reader's own config: the sandbox's (tests/built_lakes.py CLI_DEMO_CONFIG)")
def _own_config(path: Path) -> None:
    path.write_text(yaml.safe_dump(built_lakes.CLI_DEMO_CONFIG))


@dataclass(frozen=True)
class CannotRun:
    """A doc line that does not run here: ``line`` is a regular expression searched in the line's text (``lcp``
    left out) of ``page``; ``covered_by`` the test (``path::function``) that runs the same command, whose file holds
    each of ``words``; ``instead``: what runs in its place, so that the page's next lines find what it makes."""

    page: str
    line: str
    reason: str
    covered_by: str
    words: tuple[str, ...]
    instead: tuple[str, ...] | None = None


CANNOT_RUN = [
    CannotRun("getting-started.md", r"^ui$",
              "`lcp ui` execs `dagster dev` (a web server and a daemon) in place of the process",
              "tests/integration/test_ui.py::test_ui_serves_asset_graph_with_lineage", ('"ui"',)),
    CannotRun("judges.md", r"judge --config loong --model smollm2-135m",
              "Loong's documents are not in the shared data, and the judge needs SmolLM2's Loong answers and a "
              "judge server; the test runs `lcp judge` on Loong items with invented documents, imported answers "
              "and llama-cpp-python's server as the judge",
              "tests/integration/test_lcp_judge.py::"
              "test_lcp_judge_fills_the_judged_cells_a_run_without_a_judge_left_and_a_rerun_asks_nothing",
              ('"judge"', "loong")),
    CannotRun("published.md", r"^run --config longbench$",
              "the config's model is SmolLM2: 136 LongBench prompts of up to 8k tokens take most of an hour on 2 "
              "cores; in its place the run evaluates LongBench's reference predictions (imported)",
              "tests/asset/test_run_selection_longbench.py::"
              "test_lcp_run_with_tasks_and_limit_builds_generates_and_scores_just_those",
              ('"run"', '"--config"', '"longbench"'), instead=("run", "--config", "longbench", "--model", "reference")),
    CannotRun("published.md", r"compare smollm2-135m my-model --config longbench$",
              "SmolLM2 has no LongBench scores here (its run above does not run); the test compares two models "
              "on one lake",
              "tests/integration/test_compare_cli.py::test_compare_prints_scores_difference_interval_and_p_value_the_"
              "same_twice", ('"compare"',)),
    CannotRun("construct.md", r"run --config longbench100-demo$",
              "the packaged 100-LongBench demo builds and generates five tasks at 2k and 4k with SmolLM2: many "
              "minutes on 2 cores; the test builds the same config in process",
              "tests/asset/test_longbench100_asset.py::test_prior_knowledge_is_an_auditable_table",
              ("longbench100-demo",)),
    CannotRun("construct.md", r"run --config lveval-demo$",
              "the packaged LV-Eval demo builds four variants at 1k and 2k and generates them with SmolLM2: many "
              "minutes on 2 cores; the test builds the same config (made smaller) in process",
              "tests/asset/test_lveval_asset.py::test_every_plain_instance_has_its_cfi_kpr_and_cfi_kpr_rows",
              ("lveval-demo",)),
    CannotRun("results.md", r"minilongbench fit --scores train.parquet --embeddings pca10.parquet --ratio 0.95",
              "the fit's defaults (2,000 epochs, 8 K-Means candidates, cross-validated mode choice, 50 random "
              "baselines) take minutes on 2 cores; in its place the same fit with one candidate, 200 epochs and no "
              "validation or baseline, so that the estimate lines below read a real model folder",
              "tests/unit/test_minilongbench.py::test_cli_fit_then_estimate", ('"fit"', '"--embeddings"', '"--ratio"'),
              instead=("minilongbench", "fit", "--scores", "train.parquet", "--embeddings", "pca10.parquet",
                       "--ratio", "0.95", "--out", "mlb/", "--epochs", "200", "--candidates", "1",
                       "--validation-splits", "0", "--baseline-draws", "0")),
    CannotRun("results.md", r"from judge_scores j join metric_scores m",
              "judge_scores exists only once an LLM judge has run (a judge server); the test queries it",
              "tests/integration/test_judge_server.py::test_judge_scores_join_the_leaderboard",
              ("from judge_scores j join metric_scores m", '"query"')),
]

# Queries whose rows come from a line above that cannot run here: they run on the sandbox's tables (same columns),
# which hold no rows for them. (page, regular expression searched in the line) -> why.
EMPTY_RESULTS: dict[tuple[str, str], str] = {
    ("construct.md", r"from prior_knowledge"): "prior_knowledge rows come from the longbench100-demo run above",
    ("construct.md", r"from lveval_ablation"): "lveval_ablation rows come from the lveval-demo run above",
    ("construct.md", r"s.metric = 'lveval'"): "lveval scores come from the lveval-demo run above",
    ("results.md", r"where i.item_id in \(select item_id from instances where variant <> 'plain'\)"):
        "the sandbox's config builds no variants (LV-Eval's, config section lveval)",
}

# A page whose sandbox starts from another page's, after all of that page's lines ran -> why.
PAGE_FOLLOWS = {"results.md": ("models.md", "its compare lines name smollm2-135m-w2k, which models.md registers and "
                                            "backfills")}

# The old spellings of the grouped commands (issue 32; they keep working with a notice): the checks below are keyed
# on the old ones, so a doc line runs and is checked whichever spelling the page uses.
GROUPED = {("models", "add"): "add-model", ("models", "list"): "models", ("models", "remove"): "remove-model",
           ("models", "import"): "import-predictions", ("results", "query"): "query",
           ("results", "report"): "report", ("results", "compare"): "compare", ("tools", "score"): "score",
           ("tools", "longscore"): "longscore", ("tools", "minilongbench"): "minilongbench"}
LAKE_READERS = {"query", "report"}  # no --config: they read the lake the page's line before wrote
REGISTERING = {"add-model", "import-predictions", "remove-model", "models"}  # model names stay as the page writes them


def text_of(example: Example) -> str:
    """The line's words joined by spaces (no shell quoting), for the tables' regular expressions."""
    return " ".join(" ".join(example.tokens).split())


def cannot_run(example: Example) -> CannotRun | None:
    found = [c for c in CANNOT_RUN if c.page == example.file and re.search(c.line, text_of(example))]
    assert len(found) <= 1, f"{example}: several CANNOT_RUN entries match"
    return found[0] if found else None


def command_of(tokens: tuple[str, ...] | list[str]) -> tuple[str, list[str]]:
    """The command's (old) name and the words after it, global options (``--lake DIR``) left out."""
    words = list(tokens)
    while words and words[0] == "--lake":
        words = words[2:]
    if len(words) >= 2 and (words[0], words[1]) in GROUPED:
        return GROUPED[(words[0], words[1])], words[2:]
    if words and words[0] in ("results", "tools") and len(words) >= 2:
        return words[1], words[2:]
    return (words[0], words[1:]) if words else ("", [])


def option(words: list[str], name: str, default: str | None = None) -> str | None:
    for i, word in enumerate(words):
        if word == name and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return default


def options(words: list[str], name: str) -> list[str]:
    return [words[i + 1] for i, w in enumerate(words[:-1]) if w == name]


def positionals(words: list[str], flags: set[str] = frozenset()) -> list[str]:
    """The words that are neither an option nor an option's value (``flags``: options that take no value)."""
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word.startswith("--"):
            skip = word not in flags and "=" not in word
        else:
            out.append(word)
    return out


def longbench_records() -> list[dict]:
    return [json.loads(line) for f in sorted((SHARED_DATA / "longbench").glob("*.jsonl"))
            for line in f.read_text(encoding="utf-8").splitlines()]


# ---------------------------------------------------------------------------------------------------------------
# Sandboxes
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class Sandbox:
    """One page's project for one config family: its folder (the working directory of its lines) and environment."""

    root: Path
    env: dict[str, str]
    family: str

    @property
    def lake(self) -> Path:
        return Path(self.env["LCP_LAKE"])


@dataclass
class Reader:
    """The module's state: each page's sandboxes and which of its lines ran (with what they printed)."""

    base: Path
    template: built_lakes.Template
    stack: ExitStack
    sandboxes: dict[tuple[str, str], Sandbox] = field(default_factory=dict)
    ran: dict[Example, object] = field(default_factory=dict)
    failed: dict[Example, BaseException] = field(default_factory=dict)
    family: dict[str, str] = field(default_factory=dict)  # page -> the family of its last line that ran
    llama_url: str | None = None

    def sandbox(self, page: str, family: str) -> Sandbox:
        key = (page, family)
        if key in self.sandboxes:
            return self.sandboxes[key]
        folder = self.base / f"{page.removesuffix('.md')}-{family}"
        folder.mkdir(parents=True)
        (folder / "data").symlink_to(SHARED_DATA)  # `../data/...` of a page's line, seen from the project
        root = folder / "project"
        if family == "project":
            if page in PAGE_FOLLOWS:
                earlier = PAGE_FOLLOWS[page][0]
                for example in LINES:
                    if example.file == earlier:
                        self.run_through(example)
                built_lakes.copy_tree(self.sandbox(earlier, family).root, root)
            else:
                built_lakes.copy_tree(self.template.root, root)
            config = str(root / built_lakes.CONFIG_FILE)
        else:
            root.mkdir()
            (root / ".dagster").mkdir()
            config = family
        env = {**os.environ, "LCP_CONFIG": config, "LCP_LAKE": str(root / "data_lake"),
               "LCP_MODELS": str(root / "models.yaml"), "DAGSTER_HOME": str(root / ".dagster"),
               "LCP_PROJECT_DIR": str(root), "LCP_DATA": str(SHARED_DATA),
               "LCP_LOCAL_CACHE": str(folder / "cache"), "LCP_OFFLINE": "1"}
        if OFFICIAL.exists():
            env["LCP_OFFICIAL"] = str(OFFICIAL)
        for var in ("LCP_TASKS", "LCP_LIMIT", "OPENAI_BASE_URL", "LCP_JUDGE_MODEL", "LCP_EXECUTOR"):
            env.pop(var, None)
        box = self.sandboxes[key] = Sandbox(root, env, family)
        return box

    def server(self) -> str:
        if self.llama_url is None:
            from servers import llama_server, needs_llama_server, smollm2_gguf

            for mark in needs_llama_server:
                if mark.args[0]:
                    pytest.skip(mark.kwargs["reason"])
            self.llama_url = self.stack.enter_context(llama_server(smollm2_gguf(), alias="smollm2", n_ctx=8192))
        return self.llama_url

    def run_through(self, example: Example):
        """Run the page's lines up to ``example`` (those not run yet), then ``example``; returns what it printed."""
        for earlier in LINES:
            if earlier.file != example.file:
                continue
            if earlier in self.failed:
                outcome = self.failed[earlier]
                if isinstance(outcome, pytest.skip.Exception):
                    pytest.skip(f"{earlier} above was skipped: {outcome}")
                pytest.fail(f"{earlier} above failed, and the page's later lines build on it")
            if earlier not in self.ran:
                try:
                    self.ran[earlier] = self.run_line(earlier)
                except BaseException as exc:
                    self.failed[earlier] = exc
                    raise
            if earlier == example:
                return self.ran[earlier]
        raise AssertionError(f"{example} is not a code-block line")

    # -- one line -------------------------------------------------------------------------------------------

    def prepared(self, example: Example) -> tuple[list[str], str]:
        """The line with its --config stand-in, and its sandbox family: the config it names (``project`` for the
        sandbox's own); a command that reads only the lake (LAKE_READERS) runs where the page's line before it ran."""
        name, _ = command_of(example.tokens)
        words = list(example.tokens)
        config = option(words, "--config")
        if config in CONFIG_STAND_INS:
            i = words.index("--config")
            words[i + 1] = CONFIG_STAND_INS[config][0]
            config = None
        if name in LAKE_READERS:
            return words, self.family.get(example.file, "project")
        family = "project" if config is None or config.endswith((".yaml", ".yml")) else config
        return words, family

    def substitute(self, words: list[str], box: Sandbox, name: str) -> list[str]:
        out = []
        for i, word in enumerate(words):
            if word in SUBSTITUTIONS:
                target = SUBSTITUTIONS[word][0]
                word = target.format(root=box.root, llama_server=self.server() if "{llama_server}" in target else "")
            word = re.sub(r"\$\{?([A-Z_][A-Z0-9_]*)\}?", lambda m: box.env.get(m.group(1), m.group(0)), word)
            if name not in REGISTERING and word in MODEL_STAND_INS and (
                    (i > 0 and words[i - 1] == "--model") or name == "compare"):
                word = MODEL_STAND_INS[word][0]
            if word == built_lakes.CONFIG_FILE and i > 0 and words[i - 1] == "--config":
                word = str(box.root / word)
            out.append(word)
        return out

    def prepare_files(self, words: list[str], box: Sandbox) -> None:
        for word in words:
            base = word.rstrip("/")
            if base in USER_FILES and not (box.root / base).exists():
                USER_FILES[base][0](box.root / base)
        if "/models/my-model" in " ".join(words) or any(w.startswith(str(box.root / "my-model")) for w in words):
            folder = box.root / "my-model"
            if not folder.exists():
                from servers import smollm2_gguf

                folder.mkdir()
                gguf = option(words, "--gguf-file") or "model.gguf"
                (folder / gguf).symlink_to(smollm2_gguf())
        if "reference" in words and "reference" not in registered(box):
            lcp(box, "import-predictions", str(self.reference_file()), "--model", "reference", "--config",
                "longbench")

    def reference_file(self) -> Path:
        path = self.base / "reference.jsonl"
        if not path.exists():
            _predictions(path)
        return path

    def run_line(self, example: Example):
        skip = cannot_run(example)
        words, family = self.prepared(example)
        box = self.sandbox(example.file, family)
        if skip is not None:
            if skip.instead is None:
                return None
            words = list(skip.instead)
        if option(words, "--lake") is None:  # the page's lake from here on (a line with its own --lake leaves it)
            self.family[example.file] = family
        name, _ = command_of(words)
        words = self.substitute(words, box, name)
        self.prepare_files(words, box)
        before = registered(box)
        result = lcp(box, *words, check=False)
        assert result.exit_code == 0, (f"{example}\n  ran as: lcp {shlex.join(words)}\n  in {box.root}\n"
                                       f"  exit {result.exit_code}:\n{result.output[-4000:]}\n{result.exception!r}")
        CHECKS.get(command_of(words)[0], check_prints_something)(box, words, result, example, before)
        return result


def registered(box: Sandbox) -> list[str]:
    from lc_pipeline.generate.registry import ModelRegistry

    return ModelRegistry(box.root / "models.yaml").names() if (box.root / "models.yaml").exists() else []


def lcp(box: Sandbox, *args: str, check: bool = True):
    """``lcp ARGS`` in process, in ``box``'s folder and environment; both put back afterwards."""
    saved, cwd = dict(os.environ), os.getcwd()
    os.environ.clear()
    os.environ.update(box.env)
    os.chdir(box.root)
    try:
        result = CliRunner().invoke(main, list(args))
    finally:
        os.environ.clear()
        os.environ.update(saved)
        os.chdir(cwd)
    if check:
        assert result.exit_code == 0, f"lcp {shlex.join(args)}: exit {result.exit_code}\n{result.output[-3000:]}"
    return result


# ---------------------------------------------------------------------------------------------------------------
# What each command must have done
# ---------------------------------------------------------------------------------------------------------------

ADD_MODEL_FIELDS = {"--backend": ("backend", str), "--model-id": ("model_id", str), "--max-model-len":
                    ("max_model_len", int), "--batch-size": ("batch_size", int), "--api": ("api", str),
                    "--api-model": ("api_model", str), "--base-url": ("base_url", str), "--max-concurrency":
                    ("max_concurrency", int), "--request-timeout-s": ("request_timeout_s", float),
                    "--extra-body": ("extra_body", json.loads), "--tensor-parallel-size": ("tensor_parallel_size", int),
                    "--truncation": ("truncation", str), "--tokenizer": ("tokenizer", str)}


def shown(box: Sandbox, slug: str) -> dict:
    from lc_pipeline.generate.registry import ModelRegistry

    return ModelRegistry(box.root / "models.yaml").get(slug).shown()


def check_add_model(box, words, result, example, before):
    _, rest = command_of(words)
    slug = positionals(rest, {"--no-chat-template", "--overwrite", "--send-token-ids", "--send-text"})[0]
    settings = shown(box, slug)
    for flag, (key, convert) in ADD_MODEL_FIELDS.items():
        value = option(rest, flag)
        if value is not None:
            assert settings[key] == convert(value), f"{example}: {key} is {settings[key]!r}, the line says {value!r}"
    if option(rest, "--gguf-file") == "none":
        assert settings["gguf_file"] is None, example
    elif option(rest, "--gguf-file"):
        assert settings["gguf_file"] == option(rest, "--gguf-file"), example
    if "--send-text" in rest:
        assert settings["send_token_ids"] is False, example
    if "--send-token-ids" in rest:
        assert settings["send_token_ids"] is True, example
    like = option(rest, "--like", "smollm2-135m")  # what the line does not set stays the --like model's
    given = {key for flag, (key, _) in ADD_MODEL_FIELDS.items() if flag in rest}
    given |= {"gguf_file"} if "--gguf-file" in rest else set()
    kept = {k: shown(box, like)[k] for k in ("backend", "model_id", "gguf_file", "max_model_len") if k not in given}
    assert {k: settings[k] for k in kept} == kept, f"{example}: not {like}'s {sorted(kept)}"


def check_import(box, words, result, example, before):
    _, rest = command_of(words)
    slug = option(rest, "--model")
    assert shown(box, slug)["backend"] == "imported", example
    assert f"{slug}:" in result.output and "predictions imported" in result.output, result.output


def check_models(box, words, result, example, before):
    names = registered(box) or ["smollm2-135m"]
    _, rest = command_of(words)
    if option(rest, "--format") == "json":
        listed = [m["slug"] for m in json.loads(result.stdout)]
        assert set(names) <= set(listed), f"{example}: lists {listed}, registered {names}"
        assert all("fingerprint" in m for m in json.loads(result.stdout)), example
    else:
        assert all(n in result.output for n in names), f"{example}: {names} not all in\n{result.output}"


def lake_of(box: Sandbox, words: list[str]) -> Path:
    lake = option(words, "--lake")  # lcp's or the command's own
    return (box.root / lake) if lake else box.lake


def check_run(box, words, result, example, before):
    """A run or backfill: each model it names (else the config's) has generations in the lake it ran on, and the
    leaderboard names it; with --tasks / --limit, only those tasks and at most that many per task."""
    from lc_pipeline.resources.parquet_io import read_table

    _, rest = command_of(words)
    generations = read_table(lake_of(box, words) / "generations")
    models = options(rest, "--model") or sorted(set(generations["model"]))
    for model in models:
        rows = generations.filter(pl.col("model") == model)
        assert rows.height > 0, f"{example}: no generations of {model} in {lake_of(box, words)}"
        assert model in result.output, f"{example}: the leaderboard does not name {model}:\n{result.output[-2000:]}"
    if option(rest, "--tasks"):
        instances = read_table(lake_of(box, words) / "instances")
        per_task = dict(instances.group_by("task").len().iter_rows())
        assert set(per_task) == set(option(rest, "--tasks").split(",")), f"{example}: {per_task}"
        assert max(per_task.values()) <= int(option(rest, "--limit") or 10**9), f"{example}: {per_task}"


def check_plan(box, words, result, example, before):
    _, rest = command_of(words)
    models = options(rest, "--model")
    if option(rest, "--format") == "json":
        plan = json.loads(result.stdout)
        assert [m["model"] for m in plan["models"]] == models, example
        assert all(c["instances"] > 0 for m in plan["models"] for c in m["cells"]), example
    else:
        assert all(m in result.output for m in models) and "instances" in result.output, result.output
    tps = option(rest, "--tokens-per-second")
    if tps:
        assert tps in result.output, f"{example}: the plan does not use {tps} tokens/s:\n{result.output}"


def select_columns(sql: str) -> list[str]:
    """The output columns the outermost SELECT names plainly (``x``, ``t.x``, ``... as x``); others are left out."""
    text = " ".join(sql.split())
    match = re.match(r"(?is)(?:with .*?\)\s*)?select (.*?) from ", text)
    if not match or text.lower().startswith("pivot"):
        return []
    items, depth, current = [], 0, ""
    for ch in match.group(1):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            items.append(current.strip())
            current = ""
        else:
            current += ch
    items.append(current.strip())
    columns = []
    for item in items:
        alias = re.search(r"(?i)\s+as\s+(\w+)$", item)
        if alias:
            columns.append(alias.group(1))
        elif re.fullmatch(r"(\w+\.)?\w+", item):
            columns.append(item.split(".")[-1])
    return columns


def check_query(box, words, result, example, before):
    _, rest = command_of(words)
    sql = positionals(rest)[0]
    fmt = option(rest, "--format", "table")
    if fmt == "csv":
        table = list(csv.reader(io.StringIO(result.stdout)))
        header, rows = table[0], table[1:]
    elif fmt == "json":
        records = json.loads(result.stdout)
        header, rows = (list(records[0]) if records else []), records
    else:
        lines = [ln for ln in result.stdout.splitlines() if ln.strip()]
        header = [c.strip() for c in lines[0].split("|")]
        rows = [ln for ln in lines[2:] if not re.fullmatch(r"\(\d+ rows?\)", ln.strip())]
    missing = [c for c in select_columns(sql) if c not in header]
    assert not missing, f"{example}: columns {missing} not in the output's header {header}"
    if sql.lower().startswith("pivot"):
        assert "model" in header, f"{example}: {header}"
    empty = [why for (page, pattern), why in EMPTY_RESULTS.items()
             if page == example.file and re.search(pattern, " ".join(sql.split()))]
    if not empty:
        assert rows, f"{example}: no rows\n{result.output}"


def check_report(box, words, result, example, before):
    _, rest = command_of(words)
    out = box.root / option(rest, "--out", "report.html")
    html = out.read_text(encoding="utf-8")
    assert "<html" in html.lower() and "smollm2-135m" in html, f"{example}: {out} is not the report"


def check_compare(box, words, result, example, before):
    _, rest = command_of(words)
    a, b = positionals(rest)[:2]
    if option(rest, "--format") == "json":  # one object per benchmark x table x length; A and B as the line orders
        rows = json.loads(result.stdout)
        assert rows and all({"score_a", "score_b", "diff", "ci_low", "ci_high", "p_value"} <= set(r) for r in rows)
        assert all(r["n_common"] > 0 for r in rows), rows
    else:
        assert f"{a} (A) vs {b} (B)" in result.output and "p_value" in result.output, result.output


def check_tasks(box, words, result, example, before):
    _, rest = command_of(words)
    sub = rest[0]
    if sub == "show":
        assert positionals(rest[1:])[0] in result.output, result.output
        assert "prompt" in result.output, result.output
        return
    benchmark = option(rest, "--benchmark")
    if option(rest, "--format") == "json":
        tasks = json.loads(result.stdout)
        assert tasks and (benchmark is None or {t["benchmark"] for t in tasks} == {benchmark}), example
    else:
        lines = [ln for ln in result.stdout.splitlines() if "|" in ln][2:]
        assert lines, result.output
        if benchmark:
            assert all(ln.split("|")[1].strip() == benchmark for ln in lines), result.output


def check_sources(box, words, result, example, before):
    _, rest = command_of(words)
    for path in positionals(rest[1:]):
        target = (box.root / path).resolve()
        shown_files = [f for f in target.iterdir()] if target.is_dir() else [target]
        assert any(f.name in result.output for f in shown_files), f"{example}: {path} not reported"
    assert "rejected" in result.output, result.output


def check_longscore(box, words, result, example, before):
    _, rest = command_of(words)
    models = set(pl.read_csv(box.root / option(rest, "--scores"))["model"])
    assert all(m in result.output for m in models), result.output


def check_minilongbench(box, words, result, example, before):
    _, rest = command_of(words)
    if rest[0] == "fit":
        out = box.root / option(rest, "--out")
        assert (out / "meta.json").exists() and (out / "subset.parquet").exists(), f"{example}: {out}"
        return
    estimates = json.loads(result.stdout)
    scored = pl.read_csv(box.root / option(rest, "--scores")) if option(rest, "--scores").endswith(".csv") \
        else pl.read_parquet(box.root / option(rest, "--scores"))
    assert set(estimates) == set(scored["model"]), f"{example}: {list(estimates)}"
    assert all("overall" in e for e in estimates.values()), estimates


def check_prints_something(box, words, result, example, before):
    assert result.output.strip(), f"{example}: printed nothing"


CHECKS = {"add-model": check_add_model, "import-predictions": check_import, "models": check_models,
          "run": check_run, "demo": check_run, "backfill": check_run, "plan": check_plan, "query": check_query,
          "report": check_report, "compare": check_compare, "tasks": check_tasks, "sources": check_sources,
          "longscore": check_longscore, "minilongbench": check_minilongbench}


# ---------------------------------------------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def reader(cli_demo_project, tmp_path_factory):
    with ExitStack() as stack:
        yield Reader(tmp_path_factory.mktemp("docs"), cli_demo_project, stack)


@pytest.mark.parametrize("example", LINES, ids=lambda e: e.where)
def test_each_documented_lcp_line_runs_and_does_what_its_page_says(reader, example):
    entry = cannot_run(example)
    if entry is not None and entry.instead is None:
        pytest.skip(f"cannot run here: {entry.reason} (run by {entry.covered_by})")
    reader.run_through(example)


def test_the_pages_show_enough_lines_and_most_of_them_run():
    assert len(LINES) >= 60 and {e.file for e in LINES} >= {"README.md", "models.md", "results.md"}
    not_run = [e for e in LINES if cannot_run(e)]
    assert len(not_run) <= len(LINES) // 8, [str(e) for e in not_run]


def test_each_line_that_cannot_run_names_a_test_that_runs_its_command():
    for entry in CANNOT_RUN:
        matches = [e for e in LINES if cannot_run(e) is entry]
        assert matches, f"CANNOT_RUN entry {entry.page} {entry.line!r} matches no line of the page any more"
        path, function = entry.covered_by.split("::")
        source = (REPO / path).read_text(encoding="utf-8")
        names = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)}
        assert function in names, f"{entry.covered_by}: no such test"
        missing = [w for w in entry.words if w not in source]
        assert not missing, f"{entry.covered_by} does not hold {missing}"


def test_every_stand_in_and_user_file_is_used_by_some_line():
    words = {w.rstrip("/") for e in LINES for w in e.tokens}
    for table in (SUBSTITUTIONS, CONFIG_STAND_INS, MODEL_STAND_INS, USER_FILES):
        unused = [k for k in table if k not in words]
        assert not unused, f"no doc line uses {unused} any more: remove them from the table"
    for page, pattern in EMPTY_RESULTS:
        assert any(e.file == page and re.search(pattern, text_of(e)) for e in LINES), (page, pattern)
