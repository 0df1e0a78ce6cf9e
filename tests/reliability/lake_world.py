"""A small project for the reliability tests: a config, a lake holding ``instances`` for two
lengths, and models served by the misbehaving local server (tests/reliability/fault_server.py).

The instances are built from the demo corpus (questions with gold answers, their evidence
documents plus two distractors, our QA prompt, exact cl100k token counts) and written where
the pipeline reads them, so ``lcp backfill`` runs generation and scoring without building
retrieval indexes first: seconds, not minutes. Models use the openai backend with a tiktoken
tokenizer, so no model weights are loaded either.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import yaml

from lc_pipeline import schemas
from lc_pipeline.construct.prompts import build_prompt, format_context
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.generate.registry import ModelRegistry, ModelSpec
from lc_pipeline.sources.demo_corpus import build_demo_corpus

REPO = Path(__file__).resolve().parents[2]
LENGTHS = ("1k", "2k")
CONFIG = {
    "name": "reliability",
    "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 40, "seed": 3}],
    "lengths": list(LENGTHS),
    "base_lengths": ["1k"],
    "long_lengths": ["2k"],
    "depths": [0.0, 1.0],
    "items_per_length": 3,
    "max_new_tokens": 8,
    "models": [],
}


def instances_frame(level: str, n: int) -> pl.DataFrame:
    """``n`` QA instances for ``level``: evidence first (depth 0) or last (depth 1), in turn, among
    distractor documents, more of them at the longer level (so no two levels share a prompt)."""
    docs, items = build_demo_corpus(source="demo", n_entities=40, seed=3)
    text = {d["doc_id"]: (d["title"], d["text"]) for d in docs.iter_rows(named=True)}
    counter = TokenCounter.load("cl100k_base")
    doc_ids = sorted(text)
    rows = []
    for i, item in enumerate(items.head(n).iter_rows(named=True)):
        depth = float(i % 2)
        fillers = [d for d in doc_ids if d not in item["evidence_doc_ids"]][i : i + 2 * LENGTHS.index(level) + 2]
        order = [*item["evidence_doc_ids"], *fillers] if depth == 0.0 else [*fillers, *item["evidence_doc_ids"]]
        context = format_context(text[d] for d in order)
        prompt = build_prompt(context, item["question"])
        rows.append({
            "instance_id": hashlib.sha256(f"{level}/{item['item_id']}/{depth}".encode()).hexdigest()[:16],
            "item_id": item["item_id"], "source": "demo", "suite": "qa", "benchmark": "qa", "task": item["task"],
            "category": item["category"], "language": "en", "variant": "plain", "insertions": [],
            "replacement_rule_ids": [], "depth": depth, "evidence_depths": [depth], "question": item["question"],
            "answers": item["answers"], "answer_keywords": item["answer_keywords"],
            "evidence_doc_ids": item["evidence_doc_ids"], "context_doc_ids": order, "n_hard_negatives": 0,
            "n_filler_documents": len(fillers), "context": context, "prompt": prompt, "tokenizer": counter.name,
            "target_tokens": int(level.removesuffix("k")) * 1024, "input_tokens": counter.count(prompt),
            "context_tokens": counter.count(context), "max_new_tokens": CONFIG["max_new_tokens"],
        })
    return schemas.conform(pl.DataFrame(rows, schema=schemas.INSTANCES), "instances")


def served_model(slug: str, url: str, **changes) -> ModelSpec:
    """A model behind the local server: openai backend, counted with cl100k, small retry settings."""
    settings = {"backend": "openai", "model_id": "fault-model", "gguf_file": None, "max_model_len": 4096,
                "tokenizer": "tiktoken:cl100k_base", "base_url": url, "max_concurrency": 1, "max_retries": 1,
                "request_timeout_s": 5.0, **changes}
    return ModelSpec(slug=slug, **settings)


@dataclass
class World:
    root: Path  # the project directory: config, models.yaml, data_lake/, .dagster/, logs/
    per_length: int

    @property
    def lake(self) -> Path:
        return self.root / "data_lake"

    @property
    def dagster_home(self) -> Path:
        return self.root / ".dagster"

    @property
    def models_file(self) -> Path:
        return self.root / "models.yaml"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LCP_", "OPENAI_", "DAGSTER_"))}
        env.update(LCP_CONFIG=str(self.root / "config.yaml"), LCP_LAKE=str(self.lake),
                   LCP_MODELS=str(self.models_file), DAGSTER_HOME=str(self.dagster_home),
                   LCP_PROJECT_DIR=str(REPO), **extra)
        return env

    def add_model(self, spec: ModelSpec) -> None:
        ModelRegistry(self.models_file).add(spec)

    def lcp(self, *args: str, env: dict[str, str] | None = None, log: str | None = None,
            wait: bool = True, timeout: float = 300) -> subprocess.CompletedProcess | subprocess.Popen:
        """``lcp ARGS`` in this project; with ``log``, stdout and stderr go to ``logs/<log>.log``."""
        out = subprocess.PIPE
        if log:
            (self.root / "logs").mkdir(exist_ok=True)
            out = open(self.root / "logs" / f"{log}.log", "w")  # noqa: SIM115  (closed by the child's exit)
        proc = subprocess.Popen([sys.executable, "-m", "lc_pipeline.cli", *args], env=env or self.env(),
                                stdout=out, stderr=subprocess.STDOUT if log else subprocess.PIPE, text=True,
                                start_new_session=True)
        if not wait:
            return proc
        stdout, stderr = proc.communicate(timeout=timeout)
        if log:
            out.close()
            stdout = (self.root / "logs" / f"{log}.log").read_text()
        return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr or "")


def make_world(root: Path, per_length: int = 4) -> World:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    for level in LENGTHS:
        path = root / "data_lake" / "instances" / f"length={level}" / "data.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        instances_frame(level, per_length).write_parquet(path)
    (root / ".dagster").mkdir(exist_ok=True)
    return World(root, per_length)
