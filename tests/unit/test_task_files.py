"""The packaged task files of LongBench, LV-Eval and Loong say what the specs say.

The reference values are transcribed here from the specs (released_benchmarks.md, longbench_metrics.md,
lveval.md §1.4/§2/§8, loong.md), independently of the YAML files, and cross-checked against the code
that produces and scores the items (sources/, score/).
"""

import re
import string

import pytest

from lc_pipeline.benchmarks.longbench import sources as longbench_source
from lc_pipeline.benchmarks.loong import sources as loong_source
from lc_pipeline.benchmarks.lveval import sources as lveval_source
from lc_pipeline.score import keyword_recall
from lc_pipeline.benchmarks.longbench import metrics as longbench_scoring
from lc_pipeline.tasks import load_catalog
from lc_pipeline.tasks.registry import BUILDERS, METRICS, RUBRICS

BENCHMARKS = ("longbench", "lveval", "loong")

# released_benchmarks.md, "LongBench v1": the released dataset2maxlen.
LONGBENCH_MAX_NEW_TOKENS = {
    "narrativeqa": 128, "qasper": 128, "multifieldqa_en": 64, "multifieldqa_zh": 64, "hotpotqa": 32,
    "2wikimqa": 32, "musique": 32, "dureader": 128, "gov_report": 512, "qmsum": 512, "multi_news": 512,
    "vcsum": 512, "trec": 64, "triviaqa": 32, "samsum": 128, "lsht": 64, "passage_count": 32,
    "passage_retrieval_en": 32, "passage_retrieval_zh": 32, "lcc": 64, "repobench-p": 64,
}
# released_benchmarks.md: categories as in LongBench's tables (English / Chinese task after the slash).
LONGBENCH_CATEGORIES = {
    "Single-Doc QA": ("narrativeqa", "qasper", "multifieldqa_en", "multifieldqa_zh"),
    "Multi-Doc QA": ("hotpotqa", "2wikimqa", "musique", "dureader"),
    "Summarization": ("gov_report", "qmsum", "multi_news", "vcsum"),
    "Few-shot Learning": ("trec", "triviaqa", "samsum", "lsht"),
    "Synthetic": ("passage_count", "passage_retrieval_en", "passage_retrieval_zh"),
    "Code Completion": ("lcc", "repobench-p"),
}
LONGBENCH_CHINESE = {"multifieldqa_zh", "dureader", "vcsum", "lsht", "passage_retrieval_zh"}
LONGBENCH_CODE = {"lcc", "repobench-p"}
# longbench_metrics.md, "Per-task metric", by the registered name of each metric.
LONGBENCH_METRICS = {
    **dict.fromkeys(["narrativeqa", "qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "musique", "triviaqa"],
                    "longbench.qa_f1"),
    "multifieldqa_zh": "longbench.qa_f1_zh",
    **dict.fromkeys(["gov_report", "qmsum", "multi_news", "samsum"], "longbench.rouge"),
    **dict.fromkeys(["dureader", "vcsum"], "longbench.rouge_zh"),
    **dict.fromkeys(["trec", "lsht"], "longbench.classification"),
    "passage_retrieval_en": "longbench.retrieval",
    "passage_retrieval_zh": "longbench.retrieval_zh",
    "passage_count": "longbench.count",
    **dict.fromkeys(["lcc", "repobench-p"], "longbench.code_sim"),
}
# released_benchmarks.md: no chat template for few-shot and code completion.
LONGBENCH_PLAIN_TEXT = {"trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p"}
# longbench_metrics.md: the few-shot first-line rule.
LONGBENCH_FIRST_LINE = {"trec", "triviaqa", "samsum", "lsht"}

# lveval.md §1.4 (release naming) and §2 (task type, language); §8.1 (max_new_tokens).
LVEVAL_DATASETS = {
    "loogle_SD_mixup": ("single-hop QA", "en"),
    "cmrc_mixup": ("single-hop QA", "zh"),
    "multifieldqa_en_mixup": ("single-hop QA", "en"),
    "multifieldqa_zh_mixup": ("single-hop QA", "zh"),
    "factrecall_en": ("single-hop QA", "en"),
    "factrecall_zh": ("single-hop QA", "zh"),
    "dureader_mixup": ("multi-hop QA", "zh"),
    "loogle_CR_mixup": ("multi-hop QA", "en"),
    "loogle_MIR_mixup": ("multi-hop QA", "en"),
    "hotpotwikiqa_mixup": ("multi-hop QA", "en"),
    "lic_mixup": ("multi-hop QA", "zh"),
}
FACTRECALL = {"factrecall_en", "factrecall_zh"}

# loong.md §4, named as the adapter writes them (Loong's ``level`` 1-4).
LOONG_TASKS = {"spotlight_locating", "comparison", "clustering", "chain_of_reasoning"}

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def tasks_of(catalog, benchmark):
    return {t.name: t for t in catalog.tasks(benchmark)}


def all_tasks(catalog):
    return [t for b in BENCHMARKS for t in catalog.tasks(b)]


def test_the_catalog_loads_the_three_benchmarks_with_their_descriptions(catalog):
    for benchmark in BENCHMARKS:
        assert catalog.tasks(benchmark), benchmark
        assert ".md" in catalog.benchmarks[benchmark], f"{benchmark}: the description cites its spec"
    assert len(catalog.tasks("longbench")) == 21
    assert len(catalog.tasks("lveval")) == 11
    assert len(catalog.tasks("loong")) == 4


# ------------------------------------------------------------------------------------------------ LongBench


def test_the_spec_tables_transcribed_here_cover_the_tasks_the_adapter_writes():
    adapter_tasks = set(longbench_source.TASKS)
    assert len(adapter_tasks) == 21
    assert set(LONGBENCH_MAX_NEW_TOKENS) == set(LONGBENCH_METRICS) == adapter_tasks
    assert {t for ts in LONGBENCH_CATEGORIES.values() for t in ts} == adapter_tasks
    assert LONGBENCH_FIRST_LINE <= set(LONGBENCH_CATEGORIES["Few-shot Learning"])


def test_longbench_declares_exactly_the_21_tasks_the_adapter_writes(catalog):
    assert set(tasks_of(catalog, "longbench")) == set(longbench_source.TASKS)
    assert set(longbench_scoring.tasks()) == set(longbench_source.TASKS)  # the scorer reads them from the file


def test_each_longbench_task_is_scored_with_its_longbench_metric(catalog):
    for name, task in tasks_of(catalog, "longbench").items():
        assert task.metric_names == (LONGBENCH_METRICS[name],), name
        assert task.metric_names[0].removeprefix("longbench.") in longbench_scoring.METRICS, name


def test_only_the_four_few_shot_tasks_score_the_first_line(catalog):
    for name, task in tasks_of(catalog, "longbench").items():
        (metric,) = task.metrics
        expected = {"first_line": True} if name in LONGBENCH_FIRST_LINE else {}
        assert metric.options == expected, name


def test_longbench_answer_lengths_are_the_released_dataset2maxlen(catalog):
    assert {n: t.max_new_tokens for n, t in tasks_of(catalog, "longbench").items()} == LONGBENCH_MAX_NEW_TOKENS


def test_few_shot_and_code_tasks_are_fed_without_the_chat_template(catalog):
    plain = {n for n, t in tasks_of(catalog, "longbench").items() if not t.chat_template}
    assert plain == LONGBENCH_PLAIN_TEXT


def test_longbench_tasks_sit_in_their_paper_category_and_language_table(catalog):
    tasks = tasks_of(catalog, "longbench")
    for category, names in LONGBENCH_CATEGORIES.items():
        for name in names:
            task = tasks[name]
            language = "zh" if name in LONGBENCH_CHINESE else "en"
            table = "all" if name in LONGBENCH_CODE else language
            assert (task.category, task.aggregation.group) == (category, category), name
            assert (task.language, task.aggregation.table, task.aggregation.weight) == (language, table, 1.0), name


def test_longbench_items_go_through_qa_assembly_cut_in_the_middle_and_are_not_judged(catalog):
    for name, task in tasks_of(catalog, "longbench").items():
        assert (task.builder.name, task.builder.options) == ("qa.assemble", {}), name
        assert task.truncation == "middle", name
        assert task.rubric is None, name


# -------------------------------------------------------------------------------------------------- LV-Eval


def test_lveval_declares_its_eleven_datasets_and_each_has_a_keyword_recall_rule(catalog):
    declared = set(tasks_of(catalog, "lveval"))
    assert declared == set(LVEVAL_DATASETS)
    assert declared <= set(keyword_recall.DATASETS)
    # The scorer's two other rules score our own corpora, not LV-Eval datasets.
    assert set(keyword_recall.DATASETS) - declared == {"keyword_recall_en", "keyword_recall_zh"}


def test_lveval_tasks_have_the_released_language_category_and_answer_length(catalog):
    for name, task in tasks_of(catalog, "lveval").items():
        category, language = LVEVAL_DATASETS[name]
        assert task.language == language == keyword_recall.DATASETS[name].language, name
        assert (task.category, task.aggregation.group, task.aggregation.table) == (category, category, "all"), name
        assert category == lveval_source.CATEGORIES[name], name  # what the adapter writes on the items
        assert task.max_new_tokens == (16 if name in FACTRECALL else 64), name


def test_factrecall_is_built_by_its_own_builder_and_the_mixup_datasets_by_qa_assembly(catalog):
    for name, task in tasks_of(catalog, "lveval").items():
        assert task.builder.name == ("lveval.factrecall" if name in FACTRECALL else "qa.assemble"), name


def test_lveval_is_scored_by_keyword_recall_alone_cut_in_the_middle_and_not_judged(catalog):
    for name, task in tasks_of(catalog, "lveval").items():
        assert task.metric_names == ("lveval",), name
        assert task.metrics[0].options == {}, name  # the rule comes from the task name
        assert (task.truncation, task.chat_template, task.rubric) == ("middle", True, None), name


def test_lveval_description_says_the_level_score_is_the_mean_of_the_datasets(catalog):
    description = catalog.benchmarks["lveval"]
    assert "unweighted mean of the 11 dataset scores" in description


# ---------------------------------------------------------------------------------------------------- Loong


def test_loong_declares_the_four_tasks_the_adapter_writes(catalog):
    assert set(tasks_of(catalog, "loong")) == LOONG_TASKS == set(loong_source.LEVEL_TASKS.values())


def test_loong_drops_whole_documents_and_is_judged_with_its_rubric(catalog):
    for name, task in tasks_of(catalog, "loong").items():
        assert (task.builder.name, task.truncation, task.chat_template) == ("qa.assemble", "drop_documents", True)
        assert task.rubric == "loong", name
        assert task.metric_names == ("subem", "em", "f1"), name
        assert task.language == "any", name  # items are English and Chinese
        assert task.aggregation.table == "all" and task.aggregation.group == task.category, name


def test_loong_groups_are_one_per_task(catalog):
    groups = [t.aggregation.group for t in catalog.tasks("loong")]
    assert len(set(groups)) == 4


def test_loong_prompts_put_the_documents_first(catalog):
    # loong.md §4.1: documents, then the instruction, then the question.
    for name, task in tasks_of(catalog, "loong").items():
        assert task.prompt.startswith("{context}"), name
        assert task.prompt.index("{context}") < task.prompt.index("{question}"), name


# ------------------------------------------------------------------------------------------ every task file


def test_every_prompt_has_context_and_question_once_and_no_other_placeholder(catalog):
    for task in all_tasks(catalog):
        fields = [f for _, f, _, _ in string.Formatter().parse(task.prompt) if f is not None]
        assert sorted(fields) == ["context", "question"], task.qualified_name
        assert task.prompt.count("{") == task.prompt.count("}") == 2, task.qualified_name


def test_every_prompt_renders_with_a_context_and_a_question(catalog):
    for task in all_tasks(catalog):
        rendered = task.prompt.format(context="<<CTX>>", question="<<Q>>")
        assert rendered.count("<<CTX>>") == rendered.count("<<Q>>") == 1, task.qualified_name


def test_prompts_are_non_empty_and_distinct_per_task(catalog):
    for benchmark in BENCHMARKS:
        prompts = [t.prompt for t in catalog.tasks(benchmark)]
        for task in catalog.tasks(benchmark):
            instruction = task.prompt.replace("{context}", "").replace("{question}", "")
            assert len(instruction.split()) >= 3 or len(instruction.strip()) >= 10, task.qualified_name
        assert len(set(prompts)) == len(prompts), benchmark


def test_chinese_tasks_have_chinese_prompts_and_english_tasks_english_ones(catalog):
    for task in all_tasks(catalog):
        if task.language == "zh":
            assert CJK.search(task.prompt), task.qualified_name
        elif task.language == "en":
            assert not CJK.search(task.prompt), task.qualified_name


def test_an_answer_prefix_is_the_cue_the_prompt_ends_with(catalog):
    for task in all_tasks(catalog):
        if task.answer_prefix is not None:
            assert task.prompt.rstrip().endswith(task.answer_prefix.strip()), task.qualified_name
            assert task.prompt.index("{question}") < task.prompt.rindex(task.answer_prefix), task.qualified_name


def test_every_builder_metric_and_rubric_named_is_registered(catalog):
    for task in all_tasks(catalog):
        assert task.builder.name in BUILDERS, task.qualified_name
        for metric in task.metric_names:
            assert metric in METRICS, (task.qualified_name, metric)
        assert task.rubric is None or task.rubric in RUBRICS, task.qualified_name


def test_every_task_says_what_it_is(catalog):
    for task in all_tasks(catalog):
        assert task.description.strip(), task.qualified_name


def test_chat_template_use_follows_the_authors_code(catalog):
    # HELMET: open instruct models get the chat template only for Cite, LongQA and Summ (helmet.md §5.1);
    # 100-LongBench feeds raw prompts (100longbench.md §4.3).
    chat = {t.category for t in catalog.tasks("helmet") if t.chat_template}
    assert chat == {"Cite", "LongQA", "Summ"}
    assert not any(t.category in chat for t in catalog.tasks("helmet") if not t.chat_template)
    assert not any(t.chat_template for t in catalog.tasks("longbench100"))
