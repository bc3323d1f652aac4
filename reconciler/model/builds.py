"""Image builds: which rebuild of each released image runs (SPEC section 8).

A version's ``images`` name an intermediate tag (``2.6.2-rev1``) that image
maintainers rebuild under long tags (``2.6.2-rev1-b5.1``, ``-b6.1``, ...), for
example after a library CVE. Pulling the intermediate tag would let clusters drift
silently, so the reconciler pins what runs: ``apps/<app>/builds.yaml`` (kind
``ImageBuilds``, written by ``reconciler images scan``) holds one entry per
version and image, and rendering uses ``repo:<long tag>@<digest>`` for it.
Released ``version.yaml`` files are never edited; a rebuild arrives as a commit to
this file and rolls out like a version change.

This module is the pure value and its YAML mapping; the catalog loader validates
the file against the versions it names, ``reconciler.registry`` fills it in.

```yaml
apiVersion: reconciler/v1
kind: ImageBuilds
app: shop
builds:
  2.6.2:                       # a version of this app
    web:                       # an image name from that version's ``images``
      tag: 2.6.2-rev1-b5.1     # a long tag of the intermediate tag the version names
      digest: sha256:...       # the manifest digest the registry gave for it
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.model.images import ImageRef, ImageRefError, parse_image
from reconciler.model.version import Version, VersionSyntaxError, parse_version

BUILDS_KIND = "ImageBuilds"


@dataclass(frozen=True, order=True)
class ImageBuild:
    """One pinned rebuild: a long tag and the manifest digest it had when scanned."""

    tag: str
    digest: str

    def pinned(self, image: ImageRef) -> str:
        """``repo:<long tag>@<digest>`` for the image a version names."""
        return f"{image.name}:{self.tag}@{self.digest}"

    def to_dict(self) -> dict[str, str]:
        return {"tag": self.tag, "digest": self.digest}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ImageBuild:
        return cls(tag=str(raw["tag"]), digest=str(raw["digest"]))


@dataclass(frozen=True)
class ImageBuilds:
    """``apps/<app>/builds.yaml``: version -> image name -> the build that runs.

    ``lines`` maps ``(version, image)`` to the line of its entry, so a problem with
    one entry points at it.
    """

    app: str
    builds: Mapping[str, Mapping[str, ImageBuild]] = field(default_factory=dict)
    file: str = ""
    lines: Mapping[tuple[str, str], int] = field(default_factory=dict)

    def for_version(self, version: str) -> Mapping[str, ImageBuild]:
        """The builds of one version (empty when none was scanned)."""
        return self.builds.get(version, {})

    def with_build(self, version: str, image: str, build: ImageBuild) -> ImageBuilds:
        """A copy with one entry set; the scan's transition, never an edit in place."""
        builds = {v: dict(images) for v, images in self.builds.items()}
        builds.setdefault(version, {})[image] = build
        return ImageBuilds(self.app, builds, self.file)

    def to_dict(self) -> dict[str, Any]:
        """The file's content, versions and images in a stable order for small diffs."""
        return {
            "apiVersion": "reconciler/v1",
            "kind": BUILDS_KIND,
            "app": self.app,
            "builds": {
                version: {name: b.to_dict() for name, b in sorted(images.items())}
                for version, images in sorted(self.builds.items(), key=lambda kv: _vkey(kv[0]))
                if images
            },
        }


def _vkey(version: str) -> tuple[int, Version | None, str]:
    try:
        return (0, parse_version(version), "")
    except VersionSyntaxError:
        return (1, None, version)


def pinned_images(images: Mapping[str, str], builds: Mapping[str, ImageBuild]) -> dict[str, str]:
    """A version's ``images`` with every built image pinned to its long tag and digest.

    Images without an entry keep the reference the version names, so a catalog
    without ``builds.yaml`` renders exactly as before.
    """
    out = dict(images)
    for name, build in builds.items():
        ref = images.get(name)
        if ref is None:
            continue
        try:
            out[name] = build.pinned(parse_image(ref))
        except ImageRefError:
            continue  # the loader reports the bad reference; keep it as written
    return out


@dataclass(frozen=True)
class BuildsFileChange:
    """A new ``apps/<app>/builds.yaml`` and the commit message that brings it.

    ``reconciler.registry`` decides it (what the registry has), ``reconciler.source``
    writes and commits it (Git is only ``source``'s), so neither needs the other.
    """

    app: str
    builds: ImageBuilds
    message: str

    @property
    def path(self) -> str:
        return builds_path(self.app)


def builds_path(app: str) -> str:
    """The file of an app's builds, relative to the catalog root."""
    return f"apps/{app}/builds.yaml"
