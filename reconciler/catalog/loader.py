"""Load a catalog checkout into ``model`` objects, collecting every problem on the way.

Called by the CLI (``validate``/``resolve``/``render``/``apply``) and by the
daemon at each pass. It never stops at the first problem and never raises for
bad content: a broken file is reported and its object is kept out (or kept with
``valid=False`` where later stages need to know it exists), so one broken
instance never hides the others.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from reconciler.catalog.analysis import read_prometheus
from reconciler.catalog.context import Listed, LoadContext
from reconciler.catalog.manifests import attach_analysis_job, load_templates
from reconciler.catalog.waves import load_waves
from reconciler.catalog.yamlread import Document
from reconciler.model.analysis import PrometheusAnalysis
from reconciler.model.builds import ImageBuild, ImageBuilds
from reconciler.model.catalog import (
    INVENTORY_PER_INSTANCE,
    App,
    AppEntry,
    AppVersion,
    Batch,
    Catalog,
    Channels,
    Cluster,
    ClusterEntry,
    Instance,
    Migration,
    Origin,
    Parameter,
    Promotion,
    RolloutPlan,
)
from reconciler.model.errors import UsageError
from reconciler.model.gcpause import gc_paused
from reconciler.model.images import ImageRefError, parse_build_tag, parse_image
from reconciler.model.migrations import Deprecation, MigrationCheck
from reconciler.model.names import DNS_LABEL
from reconciler.model.problems import Problem
from reconciler.model.version import VersionSyntaxError, parse_version

YAML_SUFFIXES = (".yaml", ".yml")
DOC_SUFFIXES = (".md", ".txt", ".rst")
_DIGEST = re.compile(r"sha256:[a-f0-9]{64}")
APP_FILES = frozenset({"app.yaml", "channels.yaml", "builds.yaml"})
APP_DIRS = frozenset({"versions"})
VERSION_FILES = frozenset({"version.yaml"})
VERSION_DIRS = frozenset({"manifests", "migrations", "checks"})
CLUSTER_FILES = frozenset({"cluster.yaml"})
CLUSTER_DIRS = frozenset({"instances"})


def load_catalog(root: str | Path) -> Catalog:
    """Load every app and cluster under ``root``; problems end up in ``catalog.problems``."""
    with gc_paused(keeps=True):  # the catalog is kept: see ``model.gcpause``
        return _load_catalog(Path(root))


def _load_catalog(base: Path) -> Catalog:
    if not base.exists():
        raise UsageError(f"catalog {base} does not exist")
    if not base.is_dir():
        raise UsageError(f"catalog {base} is not a directory")
    ctx = LoadContext.for_root(base)
    catalog = Catalog(root=str(base))
    apps_dir, clusters_dir = base / "apps", base / "clusters"
    if not apps_dir.is_dir() and not clusters_dir.is_dir():
        ctx.error(".", None, "no apps/ or clusters/ directory here; is this a catalog checkout?")
    for app_dir in _subdirs(ctx, apps_dir):
        catalog.apps[app_dir.name] = _load_app(ctx, app_dir)
    for cluster_dir in _subdirs(ctx, clusters_dir):
        catalog.clusters[cluster_dir.name] = _load_cluster(ctx, cluster_dir)
    _attach_instance_analyses(ctx, base, catalog)
    catalog.waves = load_waves(ctx, base, catalog)
    catalog.problems = sorted_problems(ctx.problems)
    catalog.files_with_errors = ctx.files_with_errors
    return catalog


def _attach_instance_analyses(ctx: LoadContext, base: Path, catalog: Catalog) -> None:
    """Load the analysis Jobs instance files name from the versions of their app.

    Only instance files that set ``rollout.analysis`` cost anything. A path that no
    version of the app has is an error at the instance file's line (the instance keeps
    its last good state); one that only the version rolled to lacks is reported by
    ``plan_instance`` when a rollout to it is due.
    """
    found_in: dict[tuple[str, str], bool] = {}
    for entry in catalog.clusters.values():
        for name, inst in list(entry.instances.items()):
            path = inst.rollout.analysis if inst.rollout is not None else None
            app = catalog.apps.get(inst.app)
            if not isinstance(path, str) or app is None:
                continue
            if (inst.app, path) not in found_in:
                found_in[(inst.app, path)] = False
                for key, version in list(app.versions.items()):
                    found = attach_analysis_job(ctx, base / version.directory, version, path)
                    if found is not None:
                        app.versions[key] = found
                        found_in[(inst.app, path)] = True
            if not found_in[(inst.app, path)]:
                ctx.error(
                    inst.origin.file,
                    inst.origin.line("rollout.analysis"),
                    f'rollout analysis job "{path}" is in no version directory of {inst.app}',
                )
                entry.instances[name] = replace(inst, valid=False)


def sorted_problems(problems: list[Problem]) -> list[Problem]:
    """Problems in report order: by file and line; a total order, so any load order agrees.

    The incremental loader (``catalog.incremental``) gathers the same problems in
    another order; ties broken by message and severity make both lists equal.
    """
    return sorted(
        problems,
        key=lambda p: (p.file, p.line or 0, p.line is not None, p.message, p.severity.value),
    )


def _subdirs(ctx: LoadContext, parent: Path) -> list[Path]:
    if not ctx.is_dir(parent) or not ctx.check_contained(parent, parent.parent, "directory"):
        return []
    out = []
    for name, found in sorted(ctx.listing(parent).items()):
        if name.startswith("."):
            continue
        child = parent / name
        if not found.is_dir:
            if not _is_documentation(name, found):
                ctx.error(
                    ctx.rel(child),
                    None,
                    f"unexpected file in {ctx.rel(parent)}/ (only directories belong here)",
                )
            continue
        if ctx.check_contained(child, parent, "directory"):
            out.append(child)
    return out


def _is_documentation(name: str, found: Listed) -> bool:
    """README.md, NOTES.md...: prose next to the catalog files is fine anywhere."""
    return os.path.splitext(name)[1].lower() in DOC_SUFFIXES and found.is_file


def _check_entries(
    ctx: LoadContext, directory: Path, files: frozenset[str], dirs: frozenset[str]
) -> list[Path]:
    """Report anything in ``directory`` that the catalog format does not define.

    A renamed ``instances/`` or a stray ``web.yaml.bak`` is silently ignored by
    a loader that only looks for what it knows, and then reads as a deletion.
    SPEC section 3 makes every unknown file or directory a validation error.
    Returns the unknown files (a renamed ``cluster.yaml`` is one of them).
    """
    strays: list[Path] = []
    if not ctx.is_dir(directory):
        return strays
    for name, found in sorted(ctx.listing(directory).items()):
        if name in dirs if found.is_dir else name in files:
            continue  # the usual case, asked first: a file or directory of the format
        if name.startswith(".") or _is_documentation(name, found):
            continue
        child = directory / name
        if found.is_dir:
            expected = ", ".join(f"{d}/" for d in sorted(dirs)) or "none"
            ctx.error(
                ctx.rel(child),
                None,
                f"unknown directory {name}/ in {ctx.rel(directory)}/ (expected: {expected})",
            )
        else:
            expected = ", ".join(sorted(files)) or "none"
            ctx.error(
                ctx.rel(child),
                None,
                f"unknown file {name} in {ctx.rel(directory)}/ (expected: {expected})",
            )
            strays.append(child)
    return strays


def _origin(ctx: LoadContext, path: Path, doc: Document) -> Origin:
    return Origin(ctx.rel(path), doc.key_lines())


# ---------------------------------------------------------------- apps


def _load_app(ctx: LoadContext, app_dir: Path) -> AppEntry:
    entry = AppEntry(name=app_dir.name)
    _check_entries(ctx, app_dir, APP_FILES, APP_DIRS)
    if not DNS_LABEL.fullmatch(app_dir.name):
        ctx.error(
            ctx.rel(app_dir),
            None,
            f'app directory "{app_dir.name}" is not a valid '
            'DNS-1123 label (lowercase letters, digits and "-", at most 63)',
        )
    app_file = app_dir / "app.yaml"
    if not ctx.is_file(app_file):
        ctx.error(ctx.rel(app_dir), None, "missing app.yaml (every app directory needs one)")
    else:
        doc = ctx.read_reconciler_file(app_file, "App")
        if doc is not None and ctx.check_name(
            ctx.rel(app_file), doc, "name", app_dir.name, "directory"
        ):
            d = doc.data
            entry.app = App(
                name=d["name"],
                description=d.get("description", ""),
                owners=tuple(d.get("owners", ())),
                origin=_origin(ctx, app_file, doc),
            )
    versions_dir = app_dir / "versions"
    for version_dir in _subdirs(ctx, versions_dir):
        version = _load_version(ctx, app_dir.name, version_dir)
        if version is not None:
            entry.versions[version.key] = version
    if not entry.versions and entry.app is not None:
        ctx.warning(ctx.rel(app_dir), None, "app has no versions yet")
    channels_file = app_dir / "channels.yaml"
    if ctx.is_file(channels_file):
        entry.channels = _load_channels(ctx, app_dir.name, channels_file, entry)
    builds_file = app_dir / "builds.yaml"
    if ctx.exists_or_link(builds_file):
        _load_builds(ctx, app_dir.name, builds_file, entry)
    return entry


def _load_builds(ctx: LoadContext, app: str, path: Path, entry: AppEntry) -> None:
    """Read ``builds.yaml`` into ``entry.builds``; a broken entry invalidates its version.

    A pin that cannot be trusted must never fall back to the unpinned image of a
    running version: that would change what runs without anyone choosing it. So an
    entry with a problem makes its version invalid (instances on it are
    ``CatalogInvalid`` and keep their last good state), and a file that cannot be
    read at all (YAML, schema, wrong app) makes every version of the app invalid. An
    entry for a version the app does not have affects nothing that runs: an error,
    and the entry is left out. Other apps are never affected.
    """
    rel = ctx.rel(path)
    doc = None
    if path.is_file():
        doc, _ = ctx.read_checked(path, "ImageBuilds")  # schema errors are reported there
    else:
        ctx.error(rel, None, "builds.yaml is not a readable file")
    raw_builds = doc.data.get("builds") if doc is not None else None
    if (
        doc is None
        or not ctx.check_name(rel, doc, "app", app, "app directory")
        or not isinstance(raw_builds, dict)
        or doc.data.get("kind") != "ImageBuilds"
    ):
        for key, each in list(entry.versions.items()):
            entry.versions[key] = replace(each, valid=False)
        return
    builds: dict[str, dict[str, ImageBuild]] = {}
    lines: dict[tuple[str, str], int] = {}
    broken: set[str] = set()
    for raw_version, images in raw_builds.items():
        version_key = str(raw_version)
        version = entry.versions.get(version_key)
        if version is None:
            known = ", ".join(v.key for v in entry.sorted_versions()) or "none"
            ctx.error(
                rel,
                doc.line_of(["builds", raw_version]),
                f"builds for {version_key}, which is not a version of {app} (have: {known})",
            )
            continue
        if not isinstance(images, dict):
            broken.add(version_key)  # the schema said why
            continue
        for name, raw in images.items():
            line = doc.line_of(["builds", raw_version, name])
            if not (
                isinstance(raw, dict)
                and isinstance(raw.get("tag"), str)
                and isinstance(raw.get("digest"), str)
            ):
                broken.add(version_key)  # the schema said why
                continue
            build = ImageBuild.from_dict(raw)
            problem = _build_problem(version, str(name), build)
            if problem is not None:
                ctx.error(rel, line, f"builds of {version_key}, image {name}: {problem}")
            if problem is not None or not _DIGEST.fullmatch(build.digest):
                broken.add(version_key)  # a bad digest: the schema said why
                continue
            builds.setdefault(version_key, {})[str(name)] = build
            lines[(version_key, str(name))] = line
    for key in broken:
        entry.versions[key] = replace(entry.versions[key], valid=False)
    entry.builds = ImageBuilds(app, builds, rel, lines)


def _build_problem(version: AppVersion, name: str, build: ImageBuild) -> str | None:
    """What is wrong with pinning ``name`` of ``version`` to ``build`` (None: nothing)."""
    ref = version.images.get(name)
    if ref is None:
        known = ", ".join(sorted(version.images)) or "none"
        return f'"{name}" is not an image of this version (images: {known})'
    long = parse_build_tag(build.tag)
    if long is None or not long.is_long:
        return (
            f'tag "{build.tag}" is not a long tag <app-version>-rev<N>-b<build> '
            "(e.g. 2.6.2-rev1-b5.1)"
        )
    try:
        image = parse_image(ref)
    except ImageRefError:
        return f'the version\'s image "{ref}" does not parse'
    if image.tag != long.intermediate:
        return (
            f'tag "{build.tag}" is a build of {long.intermediate}, but the version names '
            f'"{ref}" (a long tag must extend the version\'s intermediate tag)'
        )
    return None


def _load_channels(ctx: LoadContext, app: str, path: Path, entry: AppEntry) -> Channels | None:
    doc = ctx.read_reconciler_file(path, "Channels")
    rel = ctx.rel(path)
    if doc is None or not ctx.check_name(rel, doc, "app", app, "app directory"):
        return None
    lines = doc.child_key_lines("channels")
    channels: dict[str, str] = dict(doc.data["channels"])
    for name, target in channels.items():
        line = lines.get(name)
        try:
            parse_version(target)
        except VersionSyntaxError as e:
            ctx.error(rel, line, f'channel "{name}": {e}')
            continue
        version = entry.versions.get(target)
        if version is None:
            known = ", ".join(v.key for v in entry.sorted_versions()) or "none"
            ctx.error(
                rel,
                line,
                f'channel "{name}" points to {target}, which is not a version of {app} '
                f"(have: {known})",
            )
        elif version.yanked:
            ctx.error(
                rel,
                line,
                f'channel "{name}" points to {target}, which is yanked; point it at a good version',
            )
    return Channels(app=app, channels=channels, origin=_origin(ctx, path, doc), channel_lines=lines)


def _load_version(ctx: LoadContext, app: str, version_dir: Path) -> AppVersion | None:
    rel_dir = ctx.rel(version_dir)
    try:
        dir_version = parse_version(version_dir.name)
    except VersionSyntaxError as e:
        ctx.error(rel_dir, None, f"version directory name is not a valid version: {e}")
        return None
    _check_entries(ctx, version_dir, VERSION_FILES, VERSION_DIRS)
    path = version_dir / "version.yaml"
    rel = ctx.rel(path)

    def placeholder() -> AppVersion:
        """The version as known without a usable version.yaml (made only then)."""
        return AppVersion(
            app=app, version=dir_version, directory=rel_dir, valid=False, origin=Origin(rel)
        )

    if not ctx.is_file(path):
        ctx.error(rel_dir, None, "missing version.yaml")
        return placeholder()
    doc = ctx.read_reconciler_file(path, "AppVersion")
    if doc is None or not ctx.check_name(rel, doc, "app", app, "app directory"):
        return placeholder()
    d: dict[str, Any] = doc.data
    if d["version"] != version_dir.name:
        ctx.error(
            rel,
            doc.line_of(["version"]),
            f'version "{d["version"]}" does not match its directory "{version_dir.name}"',
        )
        return placeholder()
    first = len(ctx.problems)
    images = _check_images(ctx, rel, doc, str(dir_version))
    parameters = {
        name: Parameter(
            name=name,
            default=spec.get("default"),
            required=bool(spec.get("required", "default" not in spec)),
            description=spec.get("description", ""),
        )
        for name, spec in d.get("parameters", {}).items()
    }
    deprecated = d.get("deprecated")
    version = AppVersion(
        app=app,
        version=dir_version,
        directory=rel_dir,
        upgrade_from=d.get("upgradeFrom"),
        yanked=bool(d.get("yanked", False)),
        deprecated=("deprecated" if deprecated is True else deprecated) or None,
        images=images,
        parameters=parameters,
        rollout=_rollout(
            d.get("rollout"),
            _prometheus(
                ctx, rel, doc, params={n: p.default for n, p in parameters.items()}, images=images
            ),
        ),
        migrations=tuple(
            _migration(m, doc.line_of(["migrations", i]))
            for i, m in enumerate(d.get("migrations", ()))
        ),
        origin=_origin(ctx, path, doc),
    )
    version = load_templates(ctx, version_dir, version, doc)
    valid = not any(p.is_error for p in ctx.problems[first:])
    if not valid:
        return replace(version, valid=False)
    return version


def _check_images(ctx: LoadContext, rel: str, doc: Document, version: str) -> dict[str, str]:
    images: dict[str, str] = dict(doc.data.get("images", {}))
    for name, ref in images.items():
        line = doc.line_of(["images", name])
        try:
            image = parse_image(ref)
        except ImageRefError as e:
            ctx.error(rel, line, str(e))
            continue
        for message in image.warnings():
            ctx.warning(rel, line, message)
        build = parse_build_tag(image.tag) if image.tag else None
        if build is not None and str(build.version) != version:
            ctx.warning(
                rel,
                line,
                f'image tag "{image.tag}" is a build of {build.version}, '
                f"but this is version {version}",
            )
    return images


def _batches(raw: Any) -> tuple[Batch, ...]:
    out = []
    for item in raw or ():
        if isinstance(item, str) and item.endswith("%"):
            out.append(Batch(int(item[:-1]), percent=True))
        else:
            out.append(Batch(int(item)))
    return tuple(out)


def _prometheus(
    ctx: LoadContext,
    rel: str,
    doc: Document,
    *,
    params: Mapping[str, object] | None = None,
    images: Mapping[str, str] | None = None,
) -> PrometheusAnalysis | None:
    """``rollout.analysis`` in its Prometheus form (SPEC section 4c), checked at its lines."""
    rollout = doc.data.get("rollout")
    raw = rollout.get("analysis") if isinstance(rollout, dict) else None
    return read_prometheus(ctx, rel, doc, raw, params=params, images=images)


def _rollout(raw: Any, prometheus: PrometheusAnalysis | None = None) -> RolloutPlan | None:
    if not raw:
        return None
    analysis = raw.get("analysis")
    return RolloutPlan(
        batches=_batches(raw.get("batches")),
        partition=raw.get("partition"),
        paused=bool(raw.get("paused", False)),
        on_failure=raw.get("onFailure", "hold"),
        health_timeout_seconds=int(raw.get("healthTimeoutSeconds", 300)),
        pause_seconds=int(raw.get("pauseSeconds", 0)),
        analysis=analysis if isinstance(analysis, str) else prometheus,
        promoted=_promotion(raw.get("promoted")),
        given=frozenset(str(k) for k in raw),
    )


def _promotion(raw: Any) -> Promotion | None:
    """``promoted: {to, through}``; the schema has checked the shape (null: none)."""
    if not isinstance(raw, dict):
        return None
    return Promotion(to=str(raw["to"]), through=int(raw["through"]))


def _migration(raw: dict[str, Any], line: int | None) -> Migration:
    deprecated = raw.get("deprecated")
    return Migration(
        name=raw["name"],
        phase=raw["phase"],
        scope=raw.get("scope", "app"),
        check=MigrationCheck.from_dict(raw.get("check")),
        job=raw.get("job"),
        python=raw.get("python"),
        undo=raw.get("undo"),
        timeout_seconds=int(raw.get("timeoutSeconds", 600)),
        deprecated=Deprecation.from_dict(deprecated) if isinstance(deprecated, dict) else None,
        line=line,
    )


# ---------------------------------------------------------------- clusters


def _load_cluster(ctx: LoadContext, cluster_dir: Path) -> ClusterEntry:
    entry = ClusterEntry(name=cluster_dir.name, cluster=_load_cluster_head(ctx, cluster_dir))
    groups = _instance_files(ctx, cluster_dir)
    for stem, found in groups.items():
        instance = _load_instance_group(ctx, cluster_dir.name, stem, found)
        entry.instances[instance.name] = instance
    return entry


def _load_cluster_head(ctx: LoadContext, cluster_dir: Path) -> Cluster:
    """The cluster's own settings (cluster.yaml) and the check of its directory's entries."""
    name = cluster_dir.name
    if not DNS_LABEL.fullmatch(name):
        ctx.error(
            ctx.rel(cluster_dir),
            None,
            f'cluster directory "{name}" is not a valid '
            'DNS-1123 label (lowercase letters, digits and "-", at most 63)',
        )
    cluster = Cluster(name=name, origin=Origin(ctx.rel(cluster_dir / "cluster.yaml")))
    path = cluster_dir / "cluster.yaml"
    if path.is_file():
        doc = ctx.read_reconciler_file(path, "Cluster")
        if doc is not None and ctx.check_name(ctx.rel(path), doc, "name", name, "directory"):
            allowed = doc.data.get("allowedNamespaces")
            limit = (doc.data.get("prune") or {}).get("maxRemovedInstances", "50%")
            cluster = Cluster(
                name=name,
                allowed_namespaces=tuple(allowed) if allowed is not None else None,
                allow_cluster_scoped=bool(doc.data.get("allowClusterScoped", True)),
                max_removed=limit if isinstance(limit, int) else None,
                max_removed_percent=int(str(limit).rstrip("%")) if isinstance(limit, str) else 50,
                labels=dict(doc.data.get("labels") or {}),
                inventory=str(doc.data.get("inventory", INVENTORY_PER_INSTANCE)),
                origin=_origin(ctx, path, doc),
                declared=True,
            )
        else:
            # Its limits are unknown: fail closed rather than treat the cluster as open.
            cluster = replace(cluster, valid=False, declared=True)
    elif os.path.lexists(path):
        ctx.error(ctx.rel(path), None, "cluster.yaml is not a readable file")
        cluster = replace(cluster, valid=False, declared=True)
    strays = _check_entries(ctx, cluster_dir, CLUSTER_FILES, CLUSTER_DIRS)
    if strays and not os.path.lexists(path):
        # ``cluster.yml``, ``cluster.yaml.bak``...: most likely the limits, renamed. Read
        # as "no limits", the rename would drop them: fail closed instead.
        ctx.error(
            ctx.rel(path),
            None,
            f"cluster.yaml is missing, but {', '.join(ctx.rel(p) for p in strays)} is there: "
            "if it held the cluster's limits, they cannot be read, so nothing is applied "
            "to this cluster (name the file cluster.yaml, or remove the stray file)",
        )
        cluster = replace(cluster, valid=False, declared=True)
    return cluster


def _instance_files(
    ctx: LoadContext, cluster_dir: Path, links: set[str] | None = None
) -> dict[str, list[Path]]:
    """Instance files by stem, in listing order; anything else in instances/ is reported.

    Only the listing is read here (no file contents), so the incremental loader
    runs it again for a changed cluster and reloads only the stems that changed;
    ``links`` then collects the stems with a symlinked file. ``os.scandir``
    answers "directory?" and "symlink?" from the listing itself, without a
    ``stat`` per instance.
    """
    instances_dir = cluster_dir / "instances"
    paths: dict[str, list[Path]] = {}
    if not instances_dir.is_dir() or not ctx.check_contained(
        instances_dir, cluster_dir, "directory"
    ):
        return paths
    with os.scandir(instances_dir) as scan:
        entries = sorted(scan, key=lambda e: e.name)
    for entry in entries:
        if entry.name.startswith("."):
            continue
        path = Path(entry.path)
        if path.suffix.lower() in DOC_SUFFIXES and entry.is_file():
            continue
        is_dir = entry.is_dir()
        if is_dir or path.suffix not in YAML_SUFFIXES:
            ctx.error(
                ctx.rel(path),
                None,
                f"unexpected {'directory' if is_dir else 'file'} in "
                f"{ctx.rel(instances_dir)}/ (instance files end in .yaml)",
            )
            continue
        paths.setdefault(path.stem, []).append(path)
        if links is not None and entry.is_symlink():
            links.add(path.stem)
    return paths


def _load_instance_group(ctx: LoadContext, cluster: str, stem: str, found: list[Path]) -> Instance:
    """The instance named ``stem`` from its file(s); two files for one name make it invalid."""
    instance = _load_instance(ctx, cluster, found[0])
    if len(found) > 1:
        # neither may silently win: the instance keeps its last good state
        names = " and ".join(p.name for p in found)
        for path in found:
            ctx.error(ctx.rel(path), None, f"instance {stem} has two files: {names}")
        instance = replace(instance, valid=False)
    return instance


def _load_instance(ctx: LoadContext, cluster: str, path: Path) -> Instance:
    rel = ctx.rel(path)
    doc, valid = ctx.read_checked(path, "Instance")
    broken = Instance(
        name=path.stem, cluster=cluster, app="", namespace="", valid=False, origin=Origin(rel)
    )
    if doc is None:
        return broken
    if not valid or not ctx.check_name(rel, doc, "name", path.stem, "file name"):
        return _partial(broken, doc.data, Origin(rel, doc.key_lines()))
    d: dict[str, Any] = doc.data
    lines = {
        **doc.key_lines(),
        **{f"parameters.{k}": v for k, v in doc.child_key_lines("parameters").items()},
    }
    if isinstance(d.get("rollout"), dict) and "analysis" in d["rollout"]:
        lines["rollout.analysis"] = doc.line_of(["rollout", "analysis"])
    origin = Origin(rel, lines)
    has_channel, has_version = "channel" in d, "version" in d
    if has_channel == has_version:
        which = "both" if has_channel else "neither"
        ctx.error(
            rel,
            doc.line_of(["version" if has_version else "app"]),
            f"set exactly one of channel or version (found {which})",
        )
        return _partial(broken, d, origin)
    return Instance(
        name=d["name"],
        cluster=cluster,
        # interned: thousands of instances name the same few apps, namespaces, channels
        app=_shared(d["app"]),
        namespace=_shared(d["namespace"]),
        channel=_shared(d.get("channel")),
        version=_shared(d.get("version")),
        parameters=dict(d.get("parameters", {})),
        allow_downgrade=bool(d.get("allowDowngrade", False)),
        allow_prerelease=bool(d.get("allowPrerelease", False)),
        suspend=bool(d.get("suspend", False)),
        allow_empty_prune=bool(d.get("allowEmptyPrune", False)),
        rollout=_rollout(d.get("rollout"), _prometheus(ctx, rel, doc)),
        origin=origin,
    )


def _shared(value: Any) -> Any:
    """``value``, one string for all equal ones when it is a string (``sys.intern``):
    an instance's fields live as long as the catalog does."""
    return sys.intern(value) if type(value) is str else value


def _partial(broken: Instance, data: Any, origin: Origin) -> Instance:
    """Keep what a broken instance file still says (app, namespace, selection) for status."""
    if not isinstance(data, dict):
        return broken

    def text(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) else None

    channel, version = text("channel"), text("version")
    return Instance(
        name=broken.name,
        cluster=broken.cluster,
        app=text("app") or "",
        namespace=text("namespace") or "",
        channel=channel,
        version=version if channel is None else None,
        valid=False,
        origin=origin,
    )
