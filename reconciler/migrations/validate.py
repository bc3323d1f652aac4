"""Catalog validation of migration hooks that needs more than one file or the installed code.

The loader already reports what one ``version.yaml`` shows on its own (a missing
or escaping Job file, a file that is not one Job, a duplicate name, an undo
without a run). This module adds the checks that need the registry of Python
migrations or several versions at once:

- a ``python:`` name nobody registered (the message lists the registered names);
- a check that names an invalid object, or uses an unknown placeholder, or has a
  bad ``deployedVersion`` range; a check with *only* ``deployedVersion`` is a
  warning (SPEC: the version is an extra filter, never the only one);
- a later version shipping a name with a different checksum (a warning: it will
  not run again where it already ran);
- deprecation: a warning for versions at or above ``since`` that still ship the
  migration, an error at or above ``removeIn``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from reconciler.migrations.checksum import migration_checksum
from reconciler.migrations.registry import Registry
from reconciler.model.catalog import AppVersion, Catalog, Migration
from reconciler.model.migrations import CheckRef, Deprecation
from reconciler.model.placeholders import PlaceholderError, find_placeholders
from reconciler.model.problems import Problem, error, warning
from reconciler.model.version import VersionSyntaxError, parse_version
from reconciler.resolve import RangeSyntaxError, parse_range

API_VERSION = re.compile(
    r"^(v[0-9]+((alpha|beta)[0-9]+)?|[a-z0-9]([-a-z0-9.]*[a-z0-9])?/v[0-9]+((alpha|beta)[0-9]+)?)$"
)
KIND = re.compile(r"^[A-Z][A-Za-z0-9]*$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class _Shipped:
    version: AppVersion
    migration: Migration


def check_migrations(catalog: Catalog, registry: Registry) -> list[Problem]:
    """Every migration problem of ``catalog`` that the loader cannot see alone."""
    out: list[Problem] = []
    dists = registry.distributions()
    for entry in catalog.apps.values():
        versions = entry.sorted_versions()
        for version in versions:
            for migration in version.migrations:
                out.extend(_check_one(version, migration, registry))
        out.extend(_checksum_changes(versions, dists))
        out.extend(_deprecations(versions))
    return out


def _where(version: AppVersion, migration: Migration) -> tuple[str, int | None]:
    return version.origin.file, migration.line


def _check_one(version: AppVersion, migration: Migration, registry: Registry) -> Iterator[Problem]:
    file, line = _where(version, migration)
    label = f'migration "{migration.name}"'
    if migration.python is not None and migration.python not in registry:
        yield error(file, line, f"{label}: {registry.unknown_message(migration.python)}")
    check = migration.check
    for key, ref in (
        ("objectMissing", check.object_missing),
        ("objectExists", check.object_exists),
        ("fieldEquals.ref", None if check.field_equals is None else check.field_equals.ref),
    ):
        if ref is not None:
            for message in _ref_problems(ref, version):
                yield error(file, line, f"{label}: check {key}: {message}")
    if check.deployed_version is not None:
        try:
            parse_range(check.deployed_version)
        except RangeSyntaxError as e:
            yield error(file, line, f"{label}: check deployedVersion: {e}")
        if not check.has_state_condition:
            yield warning(
                file,
                line,
                f"{label}: its check is only deployedVersion; let the cluster's state decide "
                "(objectMissing, objectExists or fieldEquals) and keep the version as an extra "
                "filter",
            )


def _ref_problems(ref: CheckRef, version: AppVersion) -> Iterator[str]:
    if not API_VERSION.match(ref.api_version):
        yield f'apiVersion "{ref.api_version}" is not "v1" or "group/version"'
    if not KIND.match(ref.kind):
        yield f'kind "{ref.kind}" is not a Kubernetes kind (CamelCase, e.g. ConfigMap)'
    for what, value, pattern in (
        ("name", ref.name, DNS_SUBDOMAIN),
        ("namespace", ref.namespace, DNS_LABEL),
    ):
        if value is None:
            continue
        try:
            found = find_placeholders(value)
        except PlaceholderError as e:
            yield f"{what}: {e}"
            continue
        for ph in found:
            if ph.scope == "params" and ph.name not in version.parameters:
                yield (
                    f'{what} "{value}": {version.app} {version.key} declares no parameter {ph.name}'
                )
            elif ph.scope == "images":
                yield f'{what} "{value}": an image is not an object name'
        if not found and not pattern.match(value):
            yield f'{what} "{value}" is not a valid Kubernetes {what} (a DNS name)'


def _checksum_changes(
    versions: list[AppVersion], dists: Mapping[str, tuple[str, str]]
) -> Iterator[Problem]:
    first: dict[str, tuple[AppVersion, str]] = {}
    for version in versions:
        for migration in version.migrations:
            checksum = migration_checksum(version, migration, dists)
            earlier = first.get(migration.name)
            if earlier is None:
                first[migration.name] = (version, checksum)
                continue
            if earlier[0] is not version and earlier[1] != checksum:
                file, line = _where(version, migration)
                yield warning(
                    file,
                    line,
                    f'migration "{migration.name}" differs from the one {earlier[0].key} ships '
                    "under the same name: where it already ran it will not run again; give "
                    "changed logic a new name",
                )


def _deprecations(versions: list[AppVersion]) -> Iterator[Problem]:
    marks: dict[str, Deprecation] = {}
    for version in versions:  # the highest version's mark wins
        for migration in version.migrations:
            if migration.deprecated is not None:
                marks[migration.name] = migration.deprecated
    for version in versions:
        for migration in version.migrations:
            mark = marks.get(migration.name)
            if mark is not None:
                yield from _deprecation(version, migration, mark)


def _deprecation(version: AppVersion, migration: Migration, mark: Deprecation) -> Iterator[Problem]:
    file, line = _where(version, migration)
    try:
        since = parse_version(mark.since)
        remove_in = None if mark.remove_in is None else parse_version(mark.remove_in)
    except VersionSyntaxError as e:
        yield error(file, line, f'migration "{migration.name}": deprecated: {e}')
        return
    note = f" ({mark.note})" if mark.note else ""
    if remove_in is not None and version.version >= remove_in:
        yield error(
            file,
            line,
            f'migration "{migration.name}" was to be removed in {mark.remove_in}; delete it '
            f"from {version.key}{note}",
        )
    elif version.version >= since:
        until = f"; it must be gone by {mark.remove_in}" if mark.remove_in else ""
        yield warning(
            file,
            line,
            f'migration "{migration.name}" is deprecated since {mark.since}{until}{note}',
        )


__all__ = ["check_migrations"]
