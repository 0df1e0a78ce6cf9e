"""Scoring: metric rows/s of ``score_frame``, and judge calls/s at bounded concurrency against a local server.

    python benchmarks/scoring.py [--quick] [--rows 100000] [--judge-calls 16] [--json scoring.json]

Metric scoring: generations made up from the demo corpus's real questions and gold answers
(seeded: a correct "Answer: ..." line, a gold answer buried in chatter, a wrong answer
from another item, an empty reply), a quarter of the items given LV-Eval CFI rows so
``score_frame`` adds its keyword-recall metric to them. Printed: generations/s and score
rows/s of ``score_frame``, beside a bare loop calling ``score_qa`` on the same rows (the
metric arithmetic alone; the ratio is what ``score_frame`` adds: lookups, checks, rows).

Judge: llama-cpp-python's OpenAI-compatible server on 127.0.0.1 with the built-in
SmolLM2-135M (started here, 2 threads), the Loong rubric (the QA suite's default) on
--judge-calls generations, through ``JudgeClient`` (the judge_scores asset's client) with
``max_concurrency`` 1 (no cache) and 4 (filling a reply cache, as the asset does), in
alternating rounds (``--judge-rounds``; each round judges other generations, so the server
cannot reuse a previous request's KV cache) so both see the same machine load; the replies of
both are compared (greedy: the same replies mean the same work); then the last round's calls
again from the warm cache.
That server runs one request at a time behind a lock, so 4 in flight measures the client's
concurrency machinery against a serial server, not a parallel engine (vLLM / ``llama-server
-np N`` would answer them side by side). ``--quick``: 5,000 rows, 4 judge calls, one round.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from lc_pipeline.score.judge import judge_frame, plan_judgments
from lc_pipeline.score.metric_scores import score_frame
from lc_pipeline.score.metrics import score_qa
from lc_pipeline.sources.demo_corpus import build_demo_corpus

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generation_throughput import start_server  # noqa: E402  (same server start as the generation benchmark)

JUDGE_MODEL = "smollm2"


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def made_up_rows(n: int, seed: int, cfi_share: float = 0.0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(generations, instances): ``n`` generations over the corpus's items, seeded output kinds;
    ``cfi_share`` of the items also get an LV-Eval ``cfi`` instance."""
    _, items = build_demo_corpus(n_entities=2000, seed=7)
    items = items.select("item_id", "task", "category", "language", "question", "answers", "answer_keywords")
    rng = random.Random(seed)
    inst_rows, gen = [], {"generation_id": [], "instance_id": [], "output": []}
    item_rows = list(items.iter_rows(named=True))
    with_cfi = {r["item_id"] for r in item_rows[: int(len(item_rows) * cfi_share)]}
    for r in item_rows:
        for variant in ("plain", "cfi") if r["item_id"] in with_cfi else ("plain",):
            inst_rows.append({**r, "instance_id": f"{r['item_id']}-{variant}", "suite": "qa", "benchmark": "qa", "depth": 0.5,
                              "variant": variant})
    rng.shuffle(inst_rows)
    for i in range(n):
        inst = inst_rows[i % len(inst_rows)]
        gold = inst["answers"][0]
        kind = rng.random()
        if kind < 0.4:
            out = f"Answer: {gold}"
        elif kind < 0.7:
            out = f"Based on the documents, the answer is {gold}. It is mentioned in the text about {inst['question'][:40]}"
        elif kind < 0.95:
            out = f"Answer: {rng.choice(item_rows)['answers'][0]}\nI am fairly sure about this."
        else:
            out = ""
        gen["generation_id"].append(f"g{i:07d}")
        gen["instance_id"].append(inst["instance_id"])
        gen["output"].append(out)
    return pl.DataFrame(gen), pl.DataFrame(inst_rows)


def metric_throughput(n: int, seed: int) -> list[dict]:
    """score_frame on QA rows (beside a bare score_qa loop over the same rows), then with LV-Eval rows."""
    rows = []
    for label, share in (("QA (subem, em, f1)", 0.0), ("QA + LV-Eval CFI on 1/4 of items", 0.25)):
        generations, instances = made_up_rows(n, seed, share)
        answers = dict(instances.select("instance_id", "answers").iter_rows())

        def frame() -> pl.DataFrame:
            return score_frame(generations, instances)

        def bare() -> None:  # the metric arithmetic alone, same rows
            for iid, output in generations.select("instance_id", "output").iter_rows():
                score_qa(output, answers[iid])

        # Best of 3, alternating: the two compete for the same (shared) cores in the same moments.
        t_frame, t_bare = float("inf"), float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            scores = frame()
            t_frame = min(t_frame, time.perf_counter() - t0)
            if share == 0.0:
                t0 = time.perf_counter()
                bare()
                t_bare = min(t_bare, time.perf_counter() - t0)
        row = {"rows": label, "generations": generations.height, "score_rows": scores.height,
               "score_frame_s": round(t_frame, 3), "generations_per_s": round(generations.height / t_frame),
               "score_rows_per_s": round(scores.height / t_frame),
               "mean_score_by_metric": {k: round(v, 4) for k, v in
                                        scores.group_by("metric").agg(pl.col("score").mean()).sort("metric").iter_rows()}}
        if share == 0.0:  # what score_frame adds to the arithmetic: lookups, checks, building rows
            row.update(bare_score_qa_s=round(t_bare, 3), bare_generations_per_s=round(generations.height / t_bare),
                       score_frame_over_bare=round(t_bare / t_frame, 3))
        rows.append(row)
    return rows


def judge_throughput(n_calls: int, max_tokens: int, threads: int, seed: int, rounds: int) -> dict:
    """Judge calls/s, 1 vs 4 in flight, in ``rounds`` alternating rounds (each round its own
    generations, so no reply is a repeat of an earlier prompt), then the last round's calls from a warm cache."""
    from lc_pipeline.resources.judge import JudgeCache, JudgeClient

    server, url = start_server(threads)
    rows: list[dict] = []
    try:
        def run(generations, instances, concurrency: int, cache: JudgeCache | None, label: str,
                round_no: int) -> tuple[dict, dict[str, str]]:
            client = JudgeClient(JUDGE_MODEL, url, cache=cache, max_concurrency=concurrency, max_tokens=max_tokens,
                                 timeout_s=600)
            judgments = plan_judgments(generations, instances, JUDGE_MODEL, client.decoding)
            calls = [c for j in judgments for c in j.calls.values()]
            t0 = time.perf_counter()
            replies = client.ask(calls)
            seconds = time.perf_counter() - t0
            frame = judge_frame(judgments, replies, JUDGE_MODEL)
            row = {"round": round_no, "mode": label, "max_concurrency": concurrency, "calls": len(calls),
                   "sent": client.calls, "cache_hits": client.cache_hits, "seconds": seconds,
                   "calls_per_s": round(len(calls) / seconds, 3), "reply_chars": sum(map(len, replies.values())),
                   "parsed_ok": int((frame["parse_status"] == "ok").sum())}
            print(f"  judge round {round_no} {label}: {row['calls_per_s']} calls/s ({seconds:.1f} s)", flush=True)
            return row, replies

        warm_gens, warm_inst = made_up_rows(1, seed + 1000)
        JudgeClient(JUDGE_MODEL, url, max_tokens=4).ask(
            list(plan_judgments(warm_gens, warm_inst, JUDGE_MODEL, {"warm-up": True})[0].calls.values()))
        with tempfile.TemporaryDirectory() as tmp:
            for round_no in range(1, rounds + 1):
                generations, instances = made_up_rows(n_calls, seed + round_no)
                generations = generations.filter(pl.col("output") != "")  # an empty answer is not worth a call
                one, one_replies = run(generations, instances, 1, None, "1 in flight", round_no)
                # As the judge_scores asset runs: every reply stored in the SQLite cache as it arrives.
                cache_file = Path(tmp) / f"judge-{round_no}.sqlite"
                four, four_replies = run(generations, instances, 4, JudgeCache(cache_file), "4 in flight", round_no)
                # Same replies = the same work was done (greedy decoding, same prompts).
                four["same_replies_as_1"] = sum(four_replies[k] == v for k, v in one_replies.items())
                for r in (one, four):
                    r["speedup_vs_1"] = round(one["seconds"] / r["seconds"], 2)
                rows += [one, four]
            warm, _ = run(generations, instances, 4, JudgeCache(cache_file), "warm cache", rounds)
            warm["speedup_vs_1"] = round(one["seconds"] / warm["seconds"])
            rows.append(warm)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    return {"server": "llama-cpp-python server (serializes requests)", "model": "SmolLM2-135M-Instruct GGUF",
            "rubric": "loong", "max_tokens": max_tokens, "server_threads": threads, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="5,000 rows, 4 judge calls")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--judge-calls", type=int, default=16)
    ap.add_argument("--judge-max-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2, help="llama.cpp server threads")
    ap.add_argument("--judge-rounds", type=int, default=2, help="alternating rounds of 1 and 4 in flight")
    ap.add_argument("--no-judge", action="store_true")
    ap.add_argument("--no-metrics", action="store_true")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--json", default="scoring.json")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.judge_calls, args.judge_rounds = 5000, 4, 1
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
                    "load_before": load_average()}
    if not args.no_metrics:
        report["metrics"] = metric_rows = metric_throughput(args.rows, args.seed)
        print(f"\nmetric scoring, {args.rows:,} generations")
        print(f"{'rows':<36} {'scorer':<20} {'seconds':>8} {'generations/s':>14} {'score rows':>10} {'score rows/s':>13}")
        for m in metric_rows:
            print(f"{m['rows']:<36} {'score_frame':<20} {m['score_frame_s']:>8.2f} {m['generations_per_s']:>14,} "
                  f"{m['score_rows']:>10,} {m['score_rows_per_s']:>13,}")
            if "bare_score_qa_s" in m:
                print(f"{'':<36} {'bare score_qa loop':<20} {m['bare_score_qa_s']:>8.2f} "
                      f"{m['bare_generations_per_s']:>14,}")
                print(f"{'':<36} score_frame / bare loop: {m['score_frame_over_bare']:.2f}x")
    if not args.no_judge:
        report["judge"] = j = judge_throughput(args.judge_calls, args.judge_max_tokens, args.threads, args.seed,
                                               args.judge_rounds)
        print(f"\njudge: {j['server']}, {j['model']}, rubric {j['rubric']}, max_tokens {j['max_tokens']}")
        print(f"{'round':>5} {'mode':<14} {'calls':>6} {'sent':>5} {'seconds':>8} {'calls/s':>9} {'vs 1':>8} "
              f"{'same replies':>12} {'parsed ok':>9}")
        for r in j["rows"]:
            print(f"{r['round']:>5} {r['mode']:<14} {r['calls']:>6} {r['sent']:>5} {r['seconds']:>8.2f} "
                  f"{r['calls_per_s']:>9.3f} {r['speedup_vs_1']:>7}x {r.get('same_replies_as_1', ''):>12} "
                  f"{r['parsed_ok']:>9}")
    report["load_after"] = load_average()
    print(f"load average before {report['load_before']}, after {report['load_after']}")
    Path(args.json).write_text(json.dumps(report, indent=2))
    print(f"written to {args.json}")


if __name__ == "__main__":
    main()
