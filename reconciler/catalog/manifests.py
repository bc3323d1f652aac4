"""Parse a version's manifests and migration Jobs, and check their placeholders statically.

Placeholders can be checked without any instance: ``${params.X}`` must name a
parameter the version declares, ``${images.X}`` an image it lists. Doing it at
load time means a typo is reported once, at its file and line, instead of once
per instance at render time; rendering can then stay pure and fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from reconciler.catalog.context import LoadContext
from reconciler.catalog.yamlread import (
    Document,
    YamlReadError,
    iter_documents,
    read_text,
    type_name,
)
from reconciler.model.catalog import AppVersion, Template
from reconciler.model.placeholders import (
    TOKEN,
    PlaceholderError,
    find_placeholders,
    parse_placeholder,
)

YAML_SUFFIXES = (".yaml", ".yml")


def load_templates(
    ctx: LoadContext, version_dir: Path, version: AppVersion, version_doc: Document
) -> AppVersion:
    """Return ``version`` with its parsed manifests and migration Jobs attached."""
    manifests_dir = version_dir / "manifests"
    files: list[str] = []
    templates: list[Template] = []
    if ctx.is_dir(manifests_dir) and ctx.check_contained(manifests_dir, version_dir, "manifests/"):
        for path in _manifest_files(ctx, manifests_dir):
            if not ctx.check_contained(path, version_dir, "manifest"):
                continue
            files.append(ctx.rel(path))
            templates.extend(_read_manifest(ctx, path, version))
    if not templates:
        # an emptied manifests/ would otherwise read as "delete everything"
        ctx.error(version.directory, None, "version has no manifests (manifests/*.yaml)")
    jobs: dict[str, Template] = {}
    undo_jobs: dict[str, Template] = {}
    for index, migration in enumerate(version.migrations):
        line = version_doc.line_of(["migrations", index])
        if migration.job is None and migration.python is None:
            message = f'migration "{migration.name}" needs a job or a python entry point'
            if migration.undo is not None:
                message += f' (it has an undo "{migration.undo}" without a run)'
            ctx.error(version.origin.file, line, message)
            continue
        if migration.job is not None and migration.python is not None:
            ctx.error(
                version.origin.file,
                line,
                f'migration "{migration.name}" names both a job and a python migration; choose one',
            )
        if migration.job is not None:
            job = _read_job(ctx, version_dir, version, migration.job, line)
            if job is not None:
                jobs[migration.name] = job
        if migration.undo is not None:
            undo_line = version_doc.line_of(["migrations", index, "undo"])
            undo = _read_job(ctx, version_dir, version, migration.undo, undo_line)
            if undo is not None:
                undo_jobs[migration.name] = undo
    _check_migration_names(ctx, version, version_doc)
    analysis_jobs: dict[str, Template] = {}
    analysis = version.rollout.analysis if version.rollout is not None else None
    if isinstance(analysis, str):
        line = version_doc.line_of(["rollout", "analysis"])
        found = _read_job(ctx, version_dir, version, analysis, line, what="rollout analysis")
        if found is not None:
            analysis_jobs[analysis] = found
    return replace(
        version,
        manifests=tuple(files),
        templates=tuple(templates),
        migration_jobs=jobs,
        undo_jobs=undo_jobs,
        analysis_jobs=analysis_jobs,
    )


def attach_analysis_job(
    ctx: LoadContext, version_dir: Path, version: AppVersion, path: str
) -> AppVersion | None:
    """``version`` with the analysis Job an instance file names, None when it has no such file.

    An instance file's ``rollout.analysis`` is relative to the directory of the version
    the instance rolls to, which only resolution decides; so every version of the app
    that has the file carries it, and ``plan_instance`` reports a resolved version
    that lacks it. A file that is there but is not one Job is an error at that file
    and is not attached.
    """
    if path in version.analysis_jobs:
        return version
    if not ctx.inside(version_dir / path, version_dir) or not (version_dir / path).is_file():
        return None
    found = _read_job(ctx, version_dir, version, path, None, what="rollout analysis")
    if found is None:
        # reported at the file; the version stays usable for instances that never name it
        return version
    return replace(version, analysis_jobs={**version.analysis_jobs, path: found})


def _manifest_files(ctx: LoadContext, directory: Path) -> list[Path]:
    """YAML files under ``directory``, sorted, not descending into symlinked directories.

    From the load's one listing per directory (``LoadContext.listing``) rather than
    ``Path.rglob``: the loader lists one directory per version, and rglob's
    per-entry overhead dominated large catalogs.
    """
    found: list[Path] = []
    for name, entry in ctx.listing(directory).items():
        if name.startswith("."):
            continue
        if entry.is_dir and not entry.is_symlink:
            found.extend(_manifest_files(ctx, directory / name))
        elif name.endswith(YAML_SUFFIXES):
            found.append(directory / name)
    return sorted(found)


def _check_migration_names(ctx: LoadContext, version: AppVersion, doc: Document) -> None:
    seen: set[str] = set()
    for index, migration in enumerate(version.migrations):
        if migration.name in seen:
            ctx.error(
                version.origin.file,
                doc.line_of(["migrations", index, "name"]),
                f'migration name "{migration.name}" is used twice in this version',
            )
        seen.add(migration.name)


def _read_job(
    ctx: LoadContext,
    version_dir: Path,
    version: AppVersion,
    job: str,
    line: int | None,
    *,
    what: str = "migration",
) -> Template | None:
    path = version_dir / job
    if not ctx.inside(path, version_dir):
        ctx.error(
            version.origin.file,
            line,
            f'{what} job "{job}" leaves the version directory {version.directory}',
        )
        return None
    if not path.is_file():
        ctx.error(version.origin.file, line, f'{what} job "{job}" does not exist')
        return None
    docs = _read_manifest(ctx, path, version)
    if len(docs) != 1 or docs[0].kind != "Job" or docs[0].data.get("apiVersion") != "batch/v1":
        found = ", ".join(f"{d.data.get('apiVersion')} {d.kind}" for d in docs) or "nothing"
        ctx.error(
            ctx.rel(path),
            1,
            f"a {what} job file must hold exactly one batch/v1 Job, found " + found,
        )
        return None
    return docs[0]


def _read_manifest(ctx: LoadContext, path: Path, version: AppVersion) -> list[Template]:
    rel = ctx.rel(path)
    try:
        text = read_text(path)
        docs = list(iter_documents(text))
    except YamlReadError as e:
        ctx.error(rel, e.line, e.message)
        return []
    # Fast path: every ${...} in the raw text is known, so no value can hold a bad one.
    # Only otherwise walk the values, which also finds the line (and ignores comments).
    placeholders_known = _text_placeholders_known(text, version)
    out = []
    for index, doc in enumerate(docs):
        for key, line in doc.duplicates:
            ctx.error(rel, line, f'duplicate key "{key}" (the earlier value would be ignored)')
        if _check_object(ctx, rel, doc) and (
            placeholders_known or _check_placeholders(ctx, rel, doc, version)
        ):
            out.append(Template(file=rel, index=index, data=doc.data))
    return out


def _text_placeholders_known(text: str, version: AppVersion) -> bool:
    if "${" not in text:
        return True
    for match in TOKEN.finditer(text):
        token = match.group(0)
        if token == "$${":
            continue
        if token == "${":
            return False
        try:
            ph = parse_placeholder(match.group(1))
        except PlaceholderError:
            return False
        if (ph.scope == "params" and ph.name not in version.parameters) or (
            ph.scope == "images" and ph.name not in version.images
        ):
            return False
    return True


def _check_object(ctx: LoadContext, rel: str, doc: Document) -> bool:
    data = doc.data
    if not isinstance(data, dict):
        ctx.error(
            rel,
            doc.start_line,
            f"a manifest document must be a Kubernetes object (a mapping), got {type_name(data)}",
        )
        return False
    ok = True
    for key in ("apiVersion", "kind"):
        if not isinstance(data.get(key), str) or not data.get(key):
            ctx.error(rel, doc.line_of([key]), f'manifest object needs a string "{key}"')
            ok = False
    metadata = data.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        ctx.error(rel, doc.line_of(["metadata"]), 'manifest object needs "metadata.name"')
        ok = False
    if str(data.get("kind")) == "List":
        ctx.error(rel, doc.start_line, "kind: List is not supported; write one document per object")
        ok = False
    return ok


def _walk_strings(
    value: Any, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and "${" in key:
                yield (*path, key), key
            yield from _walk_strings(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk_strings(item, (*path, index))


def _check_placeholders(ctx: LoadContext, rel: str, doc: Document, version: AppVersion) -> bool:
    ok = True
    for path, text in _walk_strings(doc.data):
        if "${" not in text:
            continue
        try:
            found = find_placeholders(text)
        except PlaceholderError as e:
            ctx.error(rel, _line(doc, path), str(e))
            ok = False
            continue
        for ph in found:
            if ph.scope == "params" and ph.name not in version.parameters:
                known = ", ".join(sorted(version.parameters)) or "none declared"
                ctx.error(
                    rel,
                    _line(doc, path),
                    f'unknown parameter in "{ph}": {version.app} '
                    f"{version.key} declares no parameter {ph.name} (known: {known})",
                )
                ok = False
            elif ph.scope == "images" and ph.name not in version.images:
                known = ", ".join(sorted(version.images)) or "none declared"
                ctx.error(
                    rel,
                    _line(doc, path),
                    f'unknown image in "{ph}": {version.app} '
                    f"{version.key} lists no image {ph.name} (known: {known})",
                )
                ok = False
    return ok


def _line(doc: Document, path: tuple[str | int, ...]) -> int:
    return doc.line_of(list(path))


__all__ = ["attach_analysis_job", "load_templates"]
