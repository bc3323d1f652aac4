"""``images scan`` and ``images verify``: what the registries say about a catalog's images.

Scan (SPEC section 8): every image of every non-yanked version whose tag is an
intermediate tag (``2.6.2-rev1``) is looked up in its registry; the newest long
tag of it (``2.6.2-rev1-b6.1``, ordered by N then the build numbers,
numerically) and that tag's manifest digest become the app's ``builds.yaml``
entry. Every registry is asked before anything is decided: one that fails makes
the whole scan fail (``RegistryError`` naming it), so a half-answered scan never
commits. Tags that look like builds of the intermediate tag but break the tag
rule are ignored with a warning naming them.

Verify: every image as written, and every pinned ``<long tag>@<digest>``, must
still resolve (released images must stay pullable for the version's whole life).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from reconciler.catalog import load_catalog
from reconciler.model.builds import (
    BUILDS_KIND,
    BuildsFileChange,
    ImageBuild,
    ImageBuilds,
    builds_path,
)
from reconciler.model.catalog import Catalog
from reconciler.model.errors import ReconcilerError, UsageError
from reconciler.model.images import (
    ImageRefError,
    build_tag_key,
    parse_build_tag,
    parse_image,
    valid_tag,
)
from reconciler.registry.client import RegistryClient, RegistryError
from reconciler.registry.reference import Repository, repository_of

log = logging.getLogger("reconciler.registry")


class BuildsFileInvalid(ReconcilerError):
    """``builds.yaml`` cannot be read; the message names the file (and line)."""

    reason = "CatalogInvalid"


@dataclass(frozen=True)
class ImageUse:
    """One image of one version, where the catalog names it."""

    app: str
    version: str
    image: str  # the key in the version's ``images``
    reference: str  # as written: ``host/repo:2.6.2-rev1``
    file: str
    line: int | None


@dataclass(frozen=True)
class BuildChange:
    """One image whose pinned build moves (or is pinned for the first time)."""

    app: str
    version: str
    image: str
    repository: str
    intermediate: str
    previous: ImageBuild | None
    build: ImageBuild

    @property
    def from_tag(self) -> str:
        return self.previous.tag if self.previous is not None else self.intermediate

    def to_dict(self) -> dict[str, Any]:
        return {
            "app": self.app,
            "version": self.version,
            "image": self.image,
            "repository": self.repository,
            "from": self.from_tag,
            "fromDigest": self.previous.digest if self.previous else None,
            "to": self.build.tag,
            "digest": self.build.digest,
        }


@dataclass(frozen=True)
class AppScan:
    """The outcome for one app: its new ``builds.yaml`` and the changes that make it."""

    app: str
    builds: ImageBuilds
    changes: tuple[BuildChange, ...]

    @property
    def file(self) -> str:
        return builds_path(self.app)

    def subject(self) -> str:
        moves = [f"{c.image} {c.from_tag} -> {c.build.tag}" for c in self.changes]
        if len(moves) == 1:
            return f"{self.app}: image build {moves[0]}"
        if len(moves) <= 3:
            return f"{self.app}: image builds " + ", ".join(moves)
        return f"{self.app}: {len(moves)} image builds: " + ", ".join(moves[:2]) + ", ..."

    def message(self) -> str:
        """Subject, one body line per change, and the SPEC section 8 trailers."""
        body = [
            f"{c.version} {c.image}: {c.repository} {c.from_tag} -> {c.build.tag} "
            f"({c.build.digest})"
            for c in self.changes
        ]
        trailers = [f"Reconciler-App: {self.app}"]
        for c in self.changes:
            trailers += [
                f"Reconciler-Image: {c.image}",
                f"Reconciler-From: {c.from_tag}",
                f"Reconciler-To: {c.build.tag}",
                f"Reconciler-Digest: {c.build.digest}",
            ]
        return (
            f"{self.subject()}\n\n"
            + "\n".join(body)
            + "\n\nMade by `reconciler images scan`.\n\n"
            + "\n".join(trailers)
            + "\n"
        )

    def file_change(self) -> BuildsFileChange:
        return BuildsFileChange(self.app, self.builds, self.message())


@dataclass(frozen=True)
class ScanResult:
    """Every app scanned; ``changed`` are those whose ``builds.yaml`` must be committed."""

    apps: tuple[AppScan, ...] = ()
    warnings: tuple[str, ...] = ()
    images: int = 0  # intermediate-tagged images looked up

    @property
    def changed(self) -> tuple[AppScan, ...]:
        return tuple(a for a in self.apps if a.changes)

    def file_changes(self) -> list[BuildsFileChange]:
        """What ``reconciler.source.commit_builds`` commits, one commit per app."""
        return [a.file_change() for a in self.changed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "images": self.images,
            "changes": [c.to_dict() for a in self.changed for c in a.changes],
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class MissingImage:
    """A released image that no longer resolves in its registry."""

    app: str
    version: str
    image: str
    reference: str  # what was asked: ``repo:tag`` or ``repo:long-tag@digest``
    file: str
    line: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "app": self.app,
            "version": self.version,
            "image": self.image,
            "reference": self.reference,
            "file": self.file,
            "line": self.line,
        }

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.app} {self.version} image {self.image}: {self.reference} is missing"


@dataclass(frozen=True)
class VerifyResult:
    checked: int = 0
    missing: tuple[MissingImage, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"checked": self.checked, "missing": [m.to_dict() for m in self.missing]}


@dataclass
class _Errors:
    """Registry failures collected across a scan, reported together at the end."""

    found: dict[str, RegistryError] = field(default_factory=dict)

    def add(self, key: str, error: RegistryError) -> None:
        self.found.setdefault(key, error)

    def raise_any(self) -> None:
        if not self.found:
            return
        errors = list(self.found.values())
        if len(errors) == 1:
            raise errors[0]
        registries = sorted({e.registry for e in errors})
        raise RegistryError(
            ", ".join(registries),
            f"{len(errors)} lookups failed:\n" + "\n".join(f"  {e}" for e in errors),
        )


def catalog_images(catalog: Catalog, app: str | None = None) -> Iterator[ImageUse]:
    """Every image of every non-yanked version (of ``app``), in app, version, image order."""
    if app is not None and app not in catalog.apps:
        known = ", ".join(sorted(catalog.apps)) or "none"
        raise UsageError(f"--app {app}: no such app in the catalog (apps: {known})")
    root = Path(catalog.root)
    for name in sorted(catalog.apps):
        if app is not None and name != app:
            continue
        for version in catalog.apps[name].sorted_versions():
            if version.yanked:
                continue
            file = version.origin.file or f"{version.directory}/version.yaml"
            lines = _image_lines(root / file)
            for image, reference in sorted(version.images.items()):
                yield ImageUse(
                    name, str(version.version), image, str(reference), file, lines.get(image)
                )


def _image_lines(path: Path) -> dict[str, int]:
    """Line of each key under ``images:`` in a version.yaml (for pointing at it)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return {}
    lines: dict[str, int] = {}
    inside, indent = False, -1
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        depth = len(line) - len(stripped)
        if depth == 0:
            inside = stripped.startswith("images:")
            indent = -1
            continue
        if inside:
            indent = depth if indent < 0 else indent
            match = re.match(r"""["']?([^"':]+)["']?\s*:""", stripped)
            if depth == indent and match:
                lines[match[1]] = number
    return lines


def read_builds(root: str | Path, app: str) -> ImageBuilds:
    """``apps/<app>/builds.yaml`` (empty when absent), with the line of every entry."""
    rel = builds_path(app)
    path = Path(root) / rel
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ImageBuilds(app, {}, rel)
    except OSError as e:
        raise BuildsFileInvalid(f"{rel}: cannot read ({e.strerror})") from None
    try:
        data = YAML(typ="rt").load(text)
    except YAMLError as e:
        raise BuildsFileInvalid(f"{rel}: invalid YAML: {e}") from None
    if data is None:
        return ImageBuilds(app, {}, rel)
    if not isinstance(data, Mapping) or data.get("kind") != BUILDS_KIND:
        raise BuildsFileInvalid(f"{rel}: not an {BUILDS_KIND} file (kind: {BUILDS_KIND})")
    raw = data.get("builds") or {}
    if not isinstance(raw, Mapping):
        raise BuildsFileInvalid(f"{rel}: builds must be a mapping of version: image: build")
    builds: dict[str, dict[str, ImageBuild]] = {}
    lines: dict[tuple[str, str], int] = {}
    for version, images in raw.items():
        if not isinstance(images, Mapping):
            raise BuildsFileInvalid(f"{rel}: builds.{version} must be a mapping of image: build")
        for image, entry in images.items():
            if not isinstance(entry, Mapping) or "tag" not in entry or "digest" not in entry:
                raise BuildsFileInvalid(f"{rel}: builds.{version}.{image} needs tag and digest")
            builds.setdefault(str(version), {})[str(image)] = ImageBuild.from_dict(entry)
            lc = getattr(images, "lc", None)
            if lc is not None:
                lines[(str(version), str(image))] = lc.key(image)[0] + 1
    return ImageBuilds(app, builds, rel, lines)


def _newest(
    repo: Repository, intermediate: str, tags: list[str], warnings: list[str]
) -> str | None:
    """The newest long tag of ``intermediate`` among ``tags``; odd look-alikes are warned."""
    base = parse_build_tag(intermediate)
    assert base is not None
    prefix = f"{intermediate}-b"
    builds: list[str] = []
    for tag in tags:
        if not tag.startswith(prefix):
            continue
        parsed = parse_build_tag(tag) if valid_tag(tag) else None
        if parsed is None or not parsed.is_long or parsed.intermediate != base.intermediate:
            warnings.append(
                f"{repo}: tag {tag!r} is not a build of {intermediate} "
                "(<intermediate>-b<number>[.<number>...]); ignored"
            )
            continue
        builds.append(tag)
    return max(builds, key=build_tag_key) if builds else None


def scan_catalog(
    root: str | Path,
    *,
    app: str | None = None,
    client: RegistryClient | None = None,
    catalog: Catalog | None = None,
) -> ScanResult:
    """Ask every registry for the newest builds; raise ``RegistryError`` if any failed.

    Nothing is written: ``ScanResult.file_changes()`` is handed to
    ``reconciler.source.commit_builds``.
    """
    catalog = catalog if catalog is not None else load_catalog(root)
    own = client is None
    client = client if client is not None else RegistryClient.from_environment()
    warnings: list[str] = []
    errors = _Errors()
    tags_of: dict[Repository, list[str] | None] = {}
    found: dict[str, list[tuple[ImageUse, Repository, str, ImageBuild]]] = {}
    count = 0
    try:
        for use in catalog_images(catalog, app):
            found.setdefault(use.app, [])
            target = _intermediate(use, warnings)
            if target is None:
                continue
            repo, intermediate = target
            count += 1
            if repo not in tags_of:
                try:
                    tags_of[repo] = client.list_tags(repo)
                except RegistryError as e:
                    errors.add(str(repo), e)
                    tags_of[repo] = None
            tags = tags_of[repo]
            if tags is None:
                continue
            newest = _newest(repo, intermediate, tags, warnings)
            if newest is None:
                log.info("%s: no build of %s yet", repo, intermediate)
                continue
            try:
                digest = client.manifest_digest(repo, newest)
            except RegistryError as e:
                errors.add(f"{repo}:{newest}", e)
                continue
            if digest is None:
                warnings.append(f"{repo}: tag {newest} vanished while scanning; not pinned")
                continue
            missing = _manifest_missing(client, repo, newest, digest)
            if missing is not None:
                errors.add(f"{repo}:{newest}", missing)
                continue
            found[use.app].append((use, repo, intermediate, ImageBuild(newest, digest)))
    finally:
        if own:
            client.close()
    errors.raise_any()
    apps = tuple(
        _app_scan(Path(catalog.root), name, entries) for name, entries in sorted(found.items())
    )
    return ScanResult(apps, tuple(dict.fromkeys(warnings)), count)


def _manifest_missing(
    client: RegistryClient, repo: Repository, tag: str, digest: str
) -> RegistryError | None:
    """Why the manifest ``digest`` (named for ``tag``) cannot be pinned; None when it can.

    A HEAD by digest before ``builds.yaml`` names it: a registry that answered a
    digest for a tag must also serve that manifest, or every node would fail to pull.
    """
    try:
        confirmed = client.manifest_digest(repo, digest)
    except RegistryError as e:
        return e
    if confirmed == digest:
        return None
    return RegistryError(
        repo.host,
        f"tag {tag} of {repo.name}: the registry named manifest {digest} for it, "
        "and has no such manifest; not pinned",
    )


def _intermediate(use: ImageUse, warnings: list[str]) -> tuple[Repository, str] | None:
    """The repository and intermediate tag of an image, when it names one."""
    try:
        ref = parse_image(use.reference)
    except ImageRefError:
        return None  # the catalog's validation reports it
    if ref.digest is not None or ref.tag is None:
        return None
    parsed = parse_build_tag(ref.tag)
    if parsed is None or parsed.is_long:
        return None
    try:
        return repository_of(use.reference), ref.tag
    except ValueError as e:
        warnings.append(f"{use.file}: {e}")
        return None


def _app_scan(
    root: Path, app: str, entries: list[tuple[ImageUse, Repository, str, ImageBuild]]
) -> AppScan:
    before = read_builds(root, app)
    after = before
    changes: list[BuildChange] = []
    for use, repo, intermediate, build in entries:
        previous = before.for_version(use.version).get(use.image)
        if previous == build:
            continue
        after = after.with_build(use.version, use.image, build)
        changes.append(
            BuildChange(app, use.version, use.image, str(repo), intermediate, previous, build)
        )
    return AppScan(app, after, tuple(changes))


def verify_catalog(
    root: str | Path,
    *,
    app: str | None = None,
    client: RegistryClient | None = None,
    catalog: Catalog | None = None,
) -> VerifyResult:
    """Every image as written and every pinned build must resolve; registry failures raise."""
    catalog = catalog if catalog is not None else load_catalog(root)
    own = client is None
    client = client if client is not None else RegistryClient.from_environment()
    errors = _Errors()
    missing: list[MissingImage] = []
    answers: dict[tuple[Repository, str], str | None] = {}
    builds: dict[str, ImageBuilds] = {}
    checked = 0

    def exists(repo: Repository, reference: str) -> bool | None:
        key = (repo, reference)
        if key not in answers:
            try:
                answers[key] = client.manifest_digest(repo, reference)
            except RegistryError as e:
                errors.add(str(repo), e)
                return None
        return answers[key] is not None

    try:
        for use in catalog_images(catalog, app):
            try:
                ref = parse_image(use.reference)
                repo = repository_of(use.reference)
            except (ImageRefError, ValueError):
                continue  # validate reports it
            if use.app not in builds:
                builds[use.app] = read_builds(catalog.root, use.app)
            checks = [(ref.digest or ref.tag or "latest", use.reference, use.file, use.line)]
            pin = builds[use.app].for_version(use.version).get(use.image)
            if pin is not None:
                line = builds[use.app].lines.get((use.version, use.image))
                checks.append((pin.digest, pin.pinned(ref), builds_path(use.app), line))
            for reference, shown, file, line in checks:
                checked += 1
                if exists(repo, reference) is False:
                    missing.append(MissingImage(use.app, use.version, use.image, shown, file, line))
    finally:
        if own:
            client.close()
    errors.raise_any()
    return VerifyResult(checked, tuple(missing))
