"""A ``Preview`` as text (a terminal), markdown (a pull-request comment) or JSON.

The markdown starts with a hidden marker (``MARKER``) so the CI jobs of the
catalog template find their previous comment and edit it instead of adding a
new one on every push; then a short table (cluster, instance, from -> to,
objects changed) a reviewer reads at a glance, and every detail folded in
``<details>`` below it. A comment has a size limit on both hosts (65,536
characters on GitHub, 1,000,000 on GitLab), so diffs are dropped first when the
comment would not fit.
"""

from __future__ import annotations

from reconciler.model.problems import Problem
from reconciler.preview.model import (
    ADDED,
    BUILDS,
    FAILING,
    OBJECTS,
    REMOVED,
    VERSION,
    InstanceChange,
    Preview,
)

MARKER = "<!-- reconciler-preview -->"
COMMENT_LIMIT = 60_000  # below GitHub's 65,536 characters, with room for the CI's own text


def short(commit: str) -> str:
    return commit[:12]


def _range(preview: Preview) -> str:
    return (
        f"{preview.base_rev} ({short(preview.base_commit)}) -> "
        f"{preview.head_rev} ({short(preview.head_commit)})"
    )


def _counts(preview: Preview) -> str:
    kinds = [c.kind for c in preview.changes]
    parts = [
        f"{kinds.count(VERSION)} version change(s)",
        f"{kinds.count(ADDED)} added",
        f"{kinds.count(REMOVED)} removed",
    ]
    if kinds.count(BUILDS):
        parts.append(f"{kinds.count(BUILDS)} new build(s)")
    if kinds.count(OBJECTS):
        parts.append(f"{kinds.count(OBJECTS)} with new objects only")
    if kinds.count(FAILING):
        parts.append(f"{kinds.count(FAILING)} that cannot be applied")
    return ", ".join(parts)


def _verdict(preview: Preview) -> str:
    errors = len(preview.new_errors)
    warnings = len(preview.new_problems) - errors
    if errors:
        return f"the head has {errors} new error(s) and {warnings} new warning(s)"
    if warnings:
        return f"the head is valid; {warnings} new warning(s)"
    return "the head adds no validation problem"


# ---------------------------------------------------------------- text


def format_text(preview: Preview) -> str:
    lines = [f"preview {_range(preview)}: {_counts(preview)}; {_verdict(preview)}"]
    for cluster in preview.clusters:
        changes = preview.in_cluster(cluster)
        if not changes:
            continue
        lines += ["", f"cluster {cluster}"]
        for change in changes:
            lines += _text_instance(change)
    if not preview.changes:
        lines += ["", "no instance changes"]
    if preview.waves:
        lines += ["", "waves"]
        lines += [f"  {plan.app} {plan.version}: {plan.describe()}" for plan in preview.waves]
    for warning in preview.warnings:
        lines.append(f"warning: {warning}")
    lines += _text_problems("problems new on the head", preview.new_problems)
    lines += _text_problems("problems already on the base", preview.existing_problems)
    lines += _text_problems("problems fixed by the change", preview.fixed_problems)
    return "\n".join(lines) + "\n"


def _text_instance(change: InstanceChange) -> list[str]:
    out = [f"  {change.headline()}"]
    pad = "    "
    if change.why:
        out.append(f"{pad}why: {change.why}")
    if change.upgrade_path:
        out.append(f"{pad}upgrade path: {' -> '.join(change.upgrade_path)}")
    if change.error:
        out.append(f"{pad}blocked: {change.error}")
    objects = change.objects
    if change.kind == REMOVED:
        out.append(f"{pad}objects deleted: {len(objects.deleted)}")
    elif _shows_objects(change):
        out.append(f"{pad}objects: {objects.summary()} ({objects.unchanged} unchanged)")
    for sign, refs in (("~", objects.changed), ("+", objects.created), ("-", objects.deleted)):
        out += [f"{pad}  {sign} {ref}" for ref in refs]
    if change.builds:
        out += [f"{pad}build {image}: {old} -> {new}" for image, old, new in change.builds]
    if change.rollout is not None:
        out.append(f"{pad}rollout: {change.rollout.describe()}")
        for w in change.rollout.workloads:
            out.append(f"{pad}  {_workload(w.ref, w.replicas, w.targets)}")
    if change.migrations:
        out.append(f"{pad}migrations to consider:")
        out += [f"{pad}  {m.describe()}" for m in change.migrations]
    elif change.kind in (VERSION, ADDED):
        out.append(f"{pad}migrations to consider: none")
    out += [f"{pad}note: {note}" for note in change.notes]
    if objects.diff:
        out += [f"{pad}{line}" for line in objects.diff.rstrip("\n").splitlines()]
    return out


def _workload(ref: str, replicas: int | None, targets: tuple[int, ...]) -> str:
    if replicas is None:
        return f"{ref}: pods replaced node by node in each batch"
    if not targets:
        return f"{ref}: {replicas} replicas, nothing to move"
    return f"{ref}: {', '.join(map(str, targets))} of {replicas} replicas"


def _text_problems(title: str, problems: tuple[Problem, ...]) -> list[str]:
    if not problems:
        return []
    return ["", f"{title} ({len(problems)}):", *(f"  {p}" for p in problems)]


# ---------------------------------------------------------------- markdown


def format_markdown(preview: Preview, *, limit: int = COMMENT_LIMIT) -> str:
    """The pull-request comment; without the diffs when it would exceed ``limit``."""
    text = _markdown(preview, diffs=True)
    if len(text) > limit:
        text = _markdown(preview, diffs=False, note="diffs left out: the comment would be too long")
    if len(text) > limit:
        cut = text[: limit - 200].rsplit("\n", 1)[0]
        text = cut + "\n\n*(truncated: run `reconciler preview` locally for the rest)*\n"
    return text


def _markdown(preview: Preview, *, diffs: bool, note: str = "") -> str:
    icon = ":x:" if preview.new_errors else ":white_check_mark:"
    lines = [
        MARKER,
        f"### reconciler preview: `{short(preview.base_commit)}` -> `{short(preview.head_commit)}`",
        "",
        f"{icon} {_verdict(preview)}. {_counts(preview)}.",
        "",
    ]
    if preview.changes:
        lines += ["| cluster | instance | from -> to | objects changed |", "|---|---|---|---|"]
        for c in preview.changes:
            lines.append(
                f"| {c.cluster} | {_md(c.instance)} | {_md(_cell_arrow(c))} | {_cell_objects(c)} |"
            )
    else:
        lines.append("No instance changes.")
    if preview.waves:
        lines += ["", "**Waves**", ""]
        lines += [f"- {_md(f'{p.app} {p.version}: {p.describe()}')}" for p in preview.waves]
    for warning in preview.warnings:
        lines += ["", f"> :warning: {_md(warning)}"]
    lines += _md_problems(":x: Problems new on the head", preview.new_problems, folded=False)
    lines += _md_problems("Problems already on the base", preview.existing_problems, folded=True)
    lines += _md_problems("Problems fixed by the change", preview.fixed_problems, folded=True)
    for c in preview.changes:
        lines += _md_details(c, diffs=diffs)
    if note:
        lines += ["", f"*{note}*"]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;")


def _cell_arrow(c: InstanceChange) -> str:
    notes = [c.kind] if c.kind in (ADDED, REMOVED) else []
    if c.kind == OBJECTS:
        notes.append("same version")
    if c.kind == FAILING or c.error:
        notes.append("blocked")
    return c.arrow() + (f" ({', '.join(notes)})" if notes else "")


def _shows_objects(c: InstanceChange) -> bool:
    """A change that cannot be planned at the head has no objects to count."""
    return c.kind != FAILING and not (c.error and not c.objects.total)


def _cell_objects(c: InstanceChange) -> str:
    return str(c.objects.total) if _shows_objects(c) else "-"


def _md_problems(title: str, problems: tuple[Problem, ...], *, folded: bool) -> list[str]:
    if not problems:
        return []
    items = [
        f"- `{p.file}{'' if p.line is None else f':{p.line}'}` {_problem_text(p)}" for p in problems
    ]
    if folded:
        return [
            "",
            f"<details><summary>{title} ({len(problems)})</summary>",
            "",
            *items,
            "",
            "</details>",
        ]
    return ["", f"**{title} ({len(problems)})**", "", *items]


def _problem_text(p: Problem) -> str:
    prefix = "warning: " if not p.is_error else ""
    return _md(prefix + p.message)


def _md_details(c: InstanceChange, *, diffs: bool) -> list[str]:
    summary = _md(f"{c.cluster}/{c.headline()}")
    body = [f"- why: {_md(c.why)}"] if c.why else []
    if c.upgrade_path:
        body.append(f"- upgrade path: {' -> '.join(c.upgrade_path)}")
    if c.error:
        body.append(f"- :x: blocked: {_md(c.error)}")
    objects = c.objects
    if c.kind == REMOVED:
        body.append(f"- objects deleted: {len(objects.deleted)}")
    elif _shows_objects(c):
        body.append(f"- objects: {objects.summary()} ({objects.unchanged} unchanged)")
    for sign, label, refs in (
        ("~", "changed", objects.changed),
        ("+", "created", objects.created),
        ("-", "deleted", objects.deleted),
    ):
        body += [f"  - `{sign}` {label} `{ref}`" for ref in refs]
    body += [f"- build `{image}`: `{old}` -> `{new}`" for image, old, new in c.builds]
    if c.rollout is not None:
        body.append(f"- rollout: {_md(c.rollout.describe())}")
        body += [f"  - `{_workload(w.ref, w.replicas, w.targets)}`" for w in c.rollout.workloads]
    if c.migrations:
        body.append("- migrations to consider:")
        body += [f"  - {_md(m.describe())}" for m in c.migrations]
    elif c.kind in (VERSION, ADDED):
        body.append("- migrations to consider: none")
    body += [f"- note: {_md(n)}" for n in c.notes]
    if diffs and objects.diff:
        body += ["", "```diff", objects.diff.rstrip("\n"), "```"]
    return ["", f"<details><summary>{summary}</summary>", "", *body, "", "</details>"]


__all__ = ["COMMENT_LIMIT", "MARKER", "format_markdown", "format_text"]
