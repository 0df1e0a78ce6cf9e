"""NLI backends (score/nli.py) for real: tiny random-weight Hugging Face models made here with ``from_config`` and
``save_pretrained`` (nothing downloaded), loaded back from their folder the way a user's model is. The heads are
set so the verdict is known: the point is the plumbing (pair encoding, label names, TRUE's "1", caching)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import (  # noqa: E402
    BartConfig,
    BartForConditionalGeneration,
    BertConfig,
    BertForSequenceClassification,
    GenerationConfig,
    PreTrainedTokenizerFast,
    T5Config,
    T5ForConditionalGeneration,
)

from lc_pipeline.score.nli import (  # noqa: E402
    HFClassifierNLI,
    HFSeq2SeqNLI,
    NLIJudge,
    entailment_label,
    entailment_prompt,
    parse_yes_no,
)

WORDS = ("premise hypothesis title the eiffel tower is in paris louvre a museum rome italy . : 0 1 yes no "
         "made of iron").split()


def tiny_tokenizer(folder, bos_eos: bool = True) -> PreTrainedTokenizerFast:
    specials = ["<pad>", "</s>", "<unk>", "<s>"]
    vocab = {w: i for i, w in enumerate(dict.fromkeys([*specials, *WORDS]))}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace()])
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                  bos_token="<s>", model_max_length=256)
    tok.save_pretrained(folder)
    return tok


def classifier(folder, favoured: int, labels=("entailment", "neutral", "contradiction")) -> str:
    tok = tiny_tokenizer(folder)
    config = BertConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=256, pad_token_id=tok.pad_token_id,
                        id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)})
    model = BertForSequenceClassification(config)
    with torch.no_grad():  # a head whose argmax is the favoured label, whatever the encoder says
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([5.0 if i == favoured else 0.0 for i in range(len(labels))]))
    model.save_pretrained(folder)
    return str(folder)


PAIRS = [("Title: Eiffel Tower\nThe Eiffel Tower is in Paris.", "The Eiffel Tower is in Paris."),
         ("Title: Rome\nRome is in Italy.", "The Louvre is a museum."),
         ("Title: Louvre\nThe Louvre is a museum.", "The Louvre is in Rome.")]


def test_a_classifier_reads_entailment_from_its_label_names(tmp_path):
    entails = HFClassifierNLI(classifier(tmp_path / "yes", favoured=0), batch_size=2, device="cpu")
    refutes = HFClassifierNLI(classifier(tmp_path / "no", favoured=2), batch_size=2, device="cpu")
    yes = NLIJudge(entails).entails_many(PAIRS)
    no = NLIJudge(refutes).entails_many(PAIRS)
    assert [(v.entailed, v.status, v.raw) for v in yes] == [(True, "ok", "entailment")] * 3
    assert [(v.entailed, v.status, v.raw) for v in no] == [(False, "ok", "contradiction")] * 3
    assert entails.description == f"hf_classifier:{tmp_path / 'yes'}"


def test_a_classifier_without_an_entailment_label_is_refused_naming_its_labels(tmp_path):
    backend = HFClassifierNLI(classifier(tmp_path / "m", favoured=0, labels=("LABEL_0", "LABEL_1")), device="cpu")
    with pytest.raises(ValueError, match=r"exactly one entailment label.*LABEL_0"):
        backend.replies(PAIRS[:1])
    assert entailment_label({0: "entailment", 1: "not_entailment"}, "m") == "entailment"


def seq2seq_t5(folder) -> str:
    tok = tiny_tokenizer(folder)
    config = T5Config(vocab_size=len(tok), d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2,
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                      decoder_start_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    T5ForConditionalGeneration(config).save_pretrained(folder)
    return str(folder)


def seq2seq_bart(folder, answer: str) -> str:
    """A BART whose output is ``answer`` then the end: a final-logits bias favours the answer, then the end token
    (the model's generation config forbids repeating a token)."""
    tok = tiny_tokenizer(folder)
    config = BartConfig(vocab_size=len(tok), d_model=16, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                        decoder_ffn_dim=32, max_position_embeddings=256, pad_token_id=tok.pad_token_id,
                        eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id,
                        decoder_start_token_id=tok.bos_token_id, forced_bos_token_id=None, forced_eos_token_id=None)
    model = BartForConditionalGeneration(config)
    with torch.no_grad():
        model.lm_head.weight.zero_()
        bias = torch.full((len(tok),), -50.0)
        bias[tok.convert_tokens_to_ids(answer)] = 50.0
        bias[tok.eos_token_id] = 40.0
        model.final_logits_bias.copy_(bias.unsqueeze(0))
    model.generation_config = GenerationConfig(no_repeat_ngram_size=1, decoder_start_token_id=tok.bos_token_id,
                                               eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    model.save_pretrained(folder)
    return str(folder)


def test_a_true_style_seq2seq_model_says_1_for_entailed(tmp_path):
    yes = NLIJudge(HFSeq2SeqNLI(seq2seq_bart(tmp_path / "one", "1"), device="cpu")).entails_many(PAIRS)
    no = NLIJudge(HFSeq2SeqNLI(seq2seq_bart(tmp_path / "zero", "0"), device="cpu")).entails_many(PAIRS)
    other = NLIJudge(HFSeq2SeqNLI(seq2seq_bart(tmp_path / "yes", "yes"), device="cpu")).entails_many(PAIRS[:1])
    assert [(v.entailed, v.status, v.raw) for v in yes] == [(True, "ok", "1")] * 3
    assert [(v.entailed, v.status) for v in no] == [(False, "ok")] * 3
    assert [(v.entailed, v.status, v.raw) for v in other] == [(None, "no_verdict", "yes")]  # not TRUE's answer


def test_a_random_t5_runs_through_the_same_plumbing_and_every_reply_gets_a_status(tmp_path):
    backend = HFSeq2SeqNLI(seq2seq_t5(tmp_path / "t5"), batch_size=2, device="cpu")
    assert backend.prompt("P", "H") == "premise: P hypothesis: H"
    verdicts = NLIJudge(backend).entails_many(PAIRS)
    for v in verdicts:
        assert (v.status == "ok") == (v.raw.strip() in ("0", "1"))
        assert v.entailed is (True if v.raw.strip() == "1" else False if v.raw.strip() == "0" else None)


class CountingBackend:
    description = identity = "count:test"

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def replies(self, pairs):
        self.asked += pairs
        return ["yes" if "Paris" in p else "no" for p, _ in pairs]

    def parse(self, raw):
        return parse_yes_no(raw)


class DictStore:
    def __init__(self) -> None:
        self.rows: dict[str, str] = {}

    def get_many(self, keys):
        return {k: self.rows[k] for k in keys if k in self.rows}

    def put(self, key, judge_model, reply):
        self.rows[key] = reply


def test_verdicts_are_cached_by_backend_premise_and_hypothesis_within_and_across_runs():
    store, backend = DictStore(), CountingBackend()
    judge = NLIJudge(backend, store, batch_size=2)
    first = judge.entails_many([*PAIRS, PAIRS[0]])
    assert len(backend.asked) == 3 and judge.calls == 3 and first[0] == first[3]
    assert judge.entails(*PAIRS[1]) == first[1] and len(backend.asked) == 3  # memory
    rerun_backend = CountingBackend()
    rerun = NLIJudge(rerun_backend, store)
    assert rerun.entails_many(PAIRS) == first[:3] and rerun_backend.asked == [] and rerun.cache_hits == 3


@pytest.mark.parametrize(("reply", "entailed", "status"), [
    ("yes", True, "ok"), ("No.", False, "ok"), ("**Yes** - it says so", True, "ok"), ("1", True, "ok"),
    ("0", False, "ok"), ("The evidence supports it, so yes.", True, "ok"), ("Maybe", None, "no_verdict"),
    ("It could be yes or no", None, "no_verdict"), ("", None, "no_verdict")])
def test_yes_no_replies_are_read_or_counted_as_no_verdict(reply, entailed, status):
    verdict = parse_yes_no(reply)
    assert (verdict.entailed, verdict.status, verdict.raw) == (entailed, status, reply)


def test_the_entailment_prompt_carries_the_premise_and_the_claim():
    text = entailment_prompt("Title: A\nB", "C.")
    assert "Title: A\nB" in text and "Claim: C." in text and "yes or no" in text
