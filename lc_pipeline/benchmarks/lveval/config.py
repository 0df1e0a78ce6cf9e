"""LV-Eval's section of the config (``lveval:``), registered by the package (config.ConfigSection)."""

from __future__ import annotations

from pathlib import Path

from pydantic import (
    PrivateAttr,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationInfo,
    computed_field,
    field_validator,
    model_validator,
)

from lc_pipeline.config import ConfigError, ConfigSection, files_sha256, resolve_config_path

LVEVAL_VARIANTS = ("plain", "cfi", "kpr", "cfi_kpr")  # construct.variants.VARIANT_ORDER
LVEVAL_METRIC_VARIANTS = ("code", "paper")  # score.keyword_recall.VARIANTS
KNOWLEDGE_BASE_FACTS = "knowledge_base"


class LVEvalConfig(ConfigSection):
    """LV-Eval's variants of the QA suite (spec lveval.md §5-§7): confusing-fact insertion (CFI)
    and keyword/phrase replacement (KPR), derived from each plain instance in the paper's order
    (mixing, then CFI, then KPR), and the keyword-recall metric that scores them."""

    variants: tuple[StrictStr, ...] = ("plain",)  # rows of `instances`; plain is always built (the others derive from it)
    n_facts: StrictInt = 2  # confusing facts per item (LV-Eval: two descriptions per QA pair)
    fact_generator: StrictStr = KNOWLEDGE_BASE_FACTS  # "knowledge_base" (demo corpus, no model) or a registry model slug
    fact_attempts: StrictInt = 3  # LLM generator: rounds per item, rejected statements shown again
    rules_file: StrictStr = ""  # KPR rules, CSV/JSONL item_id,old,new; a relative path is relative to the config file
    auto_rules: StrictBool = True  # propose rules for the items the rules file does not cover
    max_rules: StrictInt = 4  # proposed rules per item
    metric_variant: StrictStr = "code"  # keyword-recall metric: the released code's (published numbers) or the paper's
    # factrecall: one fact sentence (a needle) in a haystack of distractor documents, at this many
    # evenly spaced positions per level (LV-Eval: 200); 0 = not built.
    factrecall_positions: StrictInt = 0
    factrecall_items: StrictInt = 1  # needles (LV-Eval: one per language)
    _rules_file_sha256: str = PrivateAttr("")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rules_file_sha256(self) -> str:
        """Content hash of the rules file (computed, never set): edited rules re-run the stage."""
        return self._rules_file_sha256

    @field_validator("rules_file")
    @classmethod
    def _relative_to_config(cls, value: str, info: ValidationInfo) -> str:
        return resolve_config_path(value, info)

    @model_validator(mode="after")
    def _check(self) -> LVEvalConfig:
        unknown = [v for v in self.variants if v not in LVEVAL_VARIANTS]
        if unknown or "plain" not in self.variants or len(set(self.variants)) != len(self.variants):
            raise ConfigError(f"lveval.variants {list(self.variants)}: expected distinct values of "
                              f"{list(LVEVAL_VARIANTS)} including 'plain'")
        if self.n_facts < 1 or self.fact_attempts < 1 or self.max_rules < 1:
            raise ConfigError("lveval: n_facts, fact_attempts and max_rules must be >= 1")
        if self.factrecall_positions < 0 or self.factrecall_items < 1:
            raise ConfigError("lveval: factrecall_positions must be >= 0 and factrecall_items >= 1")
        if self.metric_variant not in LVEVAL_METRIC_VARIANTS:
            raise ConfigError(f"lveval.metric_variant {self.metric_variant!r}: expected one of "
                              f"{list(LVEVAL_METRIC_VARIANTS)}")
        if self.wants_kpr and not self.rules_file and not self.auto_rules:
            raise ConfigError("lveval: KPR variants need rules: set rules_file or auto_rules: true")
        if self.rules_file:
            if not Path(self.rules_file).is_file():
                raise ConfigError(f"lveval.rules_file {self.rules_file!r} does not exist")
            self._rules_file_sha256 = files_sha256((self.rules_file,))
        return self

    @property
    def wants_cfi(self) -> bool:
        return any("cfi" in v for v in self.variants)

    @property
    def wants_kpr(self) -> bool:
        return any("kpr" in v for v in self.variants)
