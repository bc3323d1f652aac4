"""Strict SemVer 2.0.0 versions as the catalog uses them.

The ``semver`` package gives parsing and precedence (numeric prerelease
identifiers compare as numbers, so ``rc.10`` > ``rc.9``). On top of it the
catalog forbids a leading ``v`` and build metadata: a version names a directory
and a channel target, and ``1.0.0+a``/``1.0.0+b`` would be distinct names with
equal precedence, which would make "the highest version" ambiguous.
"""

from __future__ import annotations

from semver import Version

__all__ = ["Version", "VersionSyntaxError", "is_prerelease", "parse_version"]


class VersionSyntaxError(ValueError):
    """A string that is not a strict catalog version; the message says why."""


def parse_version(text: object) -> Version:
    """Parse ``text`` as a strict catalog version or raise ``VersionSyntaxError``."""
    if not isinstance(text, str):
        raise VersionSyntaxError(
            f"version must be a string like 1.2.3, got {type(text).__name__} {text!r}"
            " (quote it in YAML)"
        )
    if text[:1] in ("v", "V"):
        raise VersionSyntaxError(f'version "{text}" must not start with "v" (write {text[1:]})')
    if "+" in text:
        raise VersionSyntaxError(
            f'version "{text}" must not carry build metadata ("+..."); '
            "two builds of one version would be indistinguishable"
        )
    try:
        return Version.parse(text)
    except ValueError as e:
        raise VersionSyntaxError(
            f'"{text}" is not a SemVer 2.0.0 version (MAJOR.MINOR.PATCH[-PRERELEASE])'
        ) from e


def is_prerelease(version: Version) -> bool:
    return version.prerelease is not None
