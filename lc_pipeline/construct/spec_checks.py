"""Checks of a ``TaskSpec`` against what its builder can do, before anything is built.

Generic (HELMET and 100-LongBench use them): a builder declares its kinds, each with its required
options (and their allowed values) and the placeholders it fills; a spec that asks for something
else is a ValueError naming the task (``benchmark/name``) and the field, never a silently ignored
option or a KeyError from ``str.format`` halfway through a build. A prompt's fields are plain names, filled
literally (lc_pipeline/text.py ``fill_template``; issue 31 D13).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from lc_pipeline.tasks.spec import TaskSpec
from lc_pipeline.text import TemplateError, template_fields


def spec_error(spec: TaskSpec, field: str, problem: str) -> ValueError:
    where = f" (declared in {spec.declared_in})" if spec.declared_in else ""
    return ValueError(f"task {spec.qualified_name!r}{where}: field {field!r}: {problem}")


def check_builder(spec: TaskSpec, builder: str, kinds: Mapping[str, Mapping[str, Collection[str]]],
                  optional: Mapping[str, Mapping[str, Collection[str] | None]] | None = None) -> str:
    """The spec's ``builder.options.kind``, checked: the builder's name, a known kind, each of the kind's
    options present with an allowed value, and no other option. ``kinds``: kind -> option -> allowed values;
    ``optional``: kind -> option -> allowed values (None: any value, the kind checks it) of options it may omit."""
    if spec.builder.name != builder:
        raise spec_error(spec, "builder.name", f"{spec.builder.name!r} is not built here (builder {builder!r})")
    options = dict(spec.builder.options)
    kind = options.pop("kind", None)
    if kind is None:
        raise spec_error(spec, "builder.options.kind", f"missing; one of {sorted(kinds)}")
    if kind not in kinds:
        raise spec_error(spec, "builder.options.kind", f"unknown kind {kind!r}; known kinds are {sorted(kinds)}")
    for name, allowed in kinds[kind].items():
        if name not in options:
            raise spec_error(spec, f"builder.options.{name}", f"missing (kind {kind!r}); one of {sorted(allowed)}")
        if options[name] not in allowed:
            raise spec_error(spec, f"builder.options.{name}", f"{options[name]!r} is not one of {sorted(allowed)}")
    may = dict((optional or {}).get(kind, {}))
    for name, allowed in may.items():
        if name in options and allowed is not None and options[name] not in allowed:
            raise spec_error(spec, f"builder.options.{name}", f"{options[name]!r} is not one of {sorted(allowed)}")
    extra = sorted(set(options) - set(kinds[kind]) - set(may))
    if extra:
        raise spec_error(spec, "builder.options", f"unknown option{'s' if len(extra) > 1 else ''} {extra} "
                                                  f"for kind {kind!r}; it takes {['kind', *kinds[kind], *may]}")
    return kind


def check_prompt(spec: TaskSpec, placeholders: Collection[str]) -> str:
    """The spec's prompt template, checked: present, well formed, and filled by ``placeholders`` alone."""
    if spec.prompt is None:
        raise spec_error(spec, "prompt", "missing; this builder needs the task's prompt template")
    try:
        used = template_fields(spec.prompt)
    except TemplateError as exc:  # a single "{", or a field that is not a plain name
        raise spec_error(spec, "prompt", str(exc)) from None
    unknown = sorted(used - set(placeholders))
    if unknown:
        raise spec_error(spec, "prompt", f"placeholder{'s' if len(unknown) > 1 else ''} "
                                         f"{', '.join('{' + u + '}' for u in unknown)} not filled by this builder; "
                                         f"it fills {', '.join('{' + p + '}' for p in sorted(placeholders))}")
    if "context" in placeholders and "context" not in used:
        # Else the build fails later, saying the source text is too short (issue 31 D22).
        raise spec_error(spec, "prompt", "has no {context}: this builder puts the long input there, and without it "
                                         "the model would never see it; add {context} where the input goes")
    return spec.prompt


def check_max_new_tokens(spec: TaskSpec) -> int:
    if spec.max_new_tokens is None:
        raise spec_error(spec, "max_new_tokens", "missing; this builder writes each row's generation budget")
    return spec.max_new_tokens
