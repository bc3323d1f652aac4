"""Container image references: parsing, the checks SPEC section 2 asks for, build-tag order.

An image value is ``name[:tag][@sha256:digest]``. A tag is
``[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`` (the OCI distribution rule), so ``+``,
``:`` and ``~`` are invalid. Build tags ``<app-version>-rev<N>[-b<build>]``
(SPEC section 8: short ``2.6.2``, intermediate ``2.6.2-rev1``, long
``2.6.2-rev1-b5.1``) order by app version, then N, then the build's dotted
numbers, all numerically, so ``-rev10`` sorts after ``-rev9`` and ``b5.10``
after ``b5.9`` where a string sort would put them first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reconciler.model.version import Version, VersionSyntaxError, parse_version

_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
_DIGEST = re.compile(r"sha256:[a-f0-9]{64}")
# registry host (optional port) and lowercase path components, per the distribution spec
_NAME_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]+)?")
_BUILD_TAG = re.compile(
    r"^(?P<version>.+?)-rev(?P<rev>[0-9]+)(?:-b(?P<build>[0-9]+(?:\.[0-9]+)*))?$"
)


def is_digest(text: str) -> bool:
    """Whether ``text`` is a manifest digest as reconciler pins them: ``sha256:`` + 64 hex."""
    return _DIGEST.fullmatch(text) is not None


class ImageRefError(ValueError):
    """An image reference that does not parse; the message says which part is wrong."""


@dataclass(frozen=True)
class ImageRef:
    name: str
    tag: str | None = None
    digest: str | None = None

    def __str__(self) -> str:
        text = self.name
        if self.tag is not None:
            text += f":{self.tag}"
        if self.digest is not None:
            text += f"@{self.digest}"
        return text

    def warnings(self) -> list[str]:
        """What is legal but risky: an image that can change under the same name."""
        if self.digest is not None:
            return []
        if self.tag is None:
            return [f'image "{self}" has no tag; it means "latest" and can change at any time']
        if self.tag == "latest":
            return [f'image "{self}" uses the tag "latest", which can change at any time']
        return []


def parse_image(text: str) -> ImageRef:
    """Parse ``name[:tag][@sha256:digest]`` or raise ``ImageRefError``."""
    if not text or text != text.strip():
        raise ImageRefError(f'image "{text}" is empty or has surrounding spaces')
    rest, digest = text, None
    if "@" in rest:
        rest, digest = rest.split("@", 1)
        if not _DIGEST.fullmatch(digest):
            raise ImageRefError(
                f'image "{text}": digest "{digest}" must be sha256: and 64 lowercase hex digits'
            )
    name, tag = rest, None
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        name, tag = rest[:colon], rest[colon + 1 :]
        if not _TAG.fullmatch(tag):
            raise ImageRefError(
                f'image "{text}": tag "{tag}" is invalid (letters, digits, "_", "." and "-", '
                'at most 128, not starting with "." or "-"; "+", ":" and "~" are not allowed)'
            )
    _check_name(text, name)
    return ImageRef(name, tag, digest)


def _check_name(text: str, name: str) -> None:
    parts = name.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        if not _HOST.fullmatch(parts[0]):
            raise ImageRefError(f'image "{text}": registry "{parts[0]}" is invalid')
        parts = parts[1:]
    for part in parts:
        if not _NAME_COMPONENT.fullmatch(part):
            raise ImageRefError(
                f'image "{text}": name component "{part}" must be lowercase letters, digits '
                'and separators (".", "_", "-")'
            )


@dataclass(frozen=True, order=True)
class BuildTag:
    """A tag ``<app-version>-rev<N>[-b<build>]``; orders numerically field by field.

    ``build`` holds the dotted build numbers (``b5.1`` is ``(5, 1)``); an empty
    tuple is the intermediate tag itself, which sorts before any of its builds.
    """

    version: Version
    rev: int
    build: tuple[int, ...] = ()

    def __str__(self) -> str:
        text = f"{self.version}-rev{self.rev}"
        return text if not self.build else f"{text}-b{'.'.join(map(str, self.build))}"

    @property
    def intermediate(self) -> str:
        """The intermediate tag this long tag is a build of (``2.6.2-rev1``)."""
        return f"{self.version}-rev{self.rev}"

    @property
    def is_long(self) -> bool:
        return bool(self.build)


def parse_build_tag(tag: str) -> BuildTag | None:
    """The build-tag reading of ``tag``, or None when it is not of that form."""
    match = _BUILD_TAG.match(tag)
    if match is None:
        return None
    try:
        version = parse_version(match["version"])
    except VersionSyntaxError:
        return None
    build = tuple(int(n) for n in match["build"].split(".")) if match["build"] else ()
    return BuildTag(version, int(match["rev"]), build)


def build_tag_key(tag: str) -> tuple[int, BuildTag | None, str]:
    """Sort key: build tags in numeric order, then any other tag by its text."""
    parsed = parse_build_tag(tag)
    return (0, parsed, "") if parsed is not None else (1, None, tag)


def valid_tag(tag: str) -> bool:
    """Whether ``tag`` follows the OCI distribution tag rule."""
    return _TAG.fullmatch(tag) is not None
