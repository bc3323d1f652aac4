"""Catalog validation of migration hooks that needs more than one file or the installed code.

The loader already reports what one ``version.yaml`` shows on its own (a missing
or escaping Job file, a file that is not one Job, a duplicate name, an undo
without a run). This module adds the checks that need the registry of Python
migrations or several versions at once:

- a ``python:`` name nobody registered (the message lists the registered names); with
  ``declared`` (``declared.declared_migrations``: names the catalog's own package
  registers), such a name is a warning that its code was not checked here;
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

from reconciler.migrations.checks import render_check
from reconciler.migrations.checksum import migration_checksum
from reconciler.migrations.registry import Registry
from reconciler.model.catalog import AppVersion, Catalog, Cluster, Instance, Migration
from reconciler.model.migrations import CheckRef, Deprecation, MigrationCheck
from reconciler.model.placeholders import PlaceholderError, find_placeholders
from reconciler.model.problems import Problem, error, warning
from reconciler.model.version import VersionSyntaxError, parse_version
from reconciler.render import is_cluster_scoped, namespace_allowed
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


def check_migrations(
    catalog: Catalog, registry: Registry, declared: Mapping[str, str] | None = None
) -> list[Problem]:
    """Every migration problem of ``catalog`` that the loader cannot see alone.

    ``declared`` (name -> the ``pyproject.toml`` declaring it): Python migrations the
    checkout's own package registers, accepted with a warning when not installed here.
    """
    out: list[Problem] = []
    dists = registry.distributions()
    for entry in catalog.apps.values():
        versions = entry.sorted_versions()
        for version in versions:
            for migration in version.migrations:
                out.extend(_check_one(version, migration, registry, declared or {}))
        out.extend(_checksum_changes(versions, dists))
        out.extend(_deprecations(versions))
    out.extend(_reads_outside_limits(catalog))
    return out


def _reads_outside_limits(catalog: Catalog) -> Iterator[Problem]:
    """A check may read only what its instance's cluster allows it to hold.

    A ``fieldEquals`` on ``Secret/kube-system/...`` would otherwise copy another
    namespace's secret into the status record and the ledger. Each check
    reference is rendered for each instance of its app (a namespace may be a
    placeholder) and held to that cluster's ``allowedNamespaces`` and
    ``allowClusterScoped``; the daemon refuses such a read again at run time.
    """
    seen: set[tuple[str, ...]] = set()
    for entry in catalog.clusters.values():
        for instance in entry.instances.values():
            app = catalog.apps.get(instance.app)
            for version in app.versions.values() if app is not None else ():
                for migration in version.migrations:
                    for key, message in _outside(migration, version, instance, entry.cluster):
                        if key not in seen:  # one error per reference, not per instance
                            seen.add(key)
                            yield error(*_where(version, migration), message)


def _outside(
    migration: Migration, version: AppVersion, instance: Instance, cluster: Cluster
) -> Iterator[tuple[tuple[str, ...], str]]:
    """(what identifies the reference, the message) of each it reads outside the limits."""
    refs = _refs(migration.check)
    if not any(ref.namespace or is_cluster_scoped(ref.kind) for _, ref in refs):
        return  # every reference reads the instance's own namespace
    rendered, problems = render_check(migration.check, instance, version)
    if problems:
        return  # reported where the instance and its parameters are checked
    label = f'migration "{migration.name}"'
    for key, ref in _refs(rendered):
        namespace = ref.namespace or instance.namespace
        where = f"{label}: check {key}: {ref.kind} {ref.name}"
        seen = (version.origin.file, migration.name, key, cluster.name, namespace)
        if is_cluster_scoped(ref.kind):
            if not cluster.allow_cluster_scoped:
                yield (
                    seen,
                    (
                        f"{where} is cluster-scoped and cluster {cluster.name} allows no "
                        "cluster-scoped objects (allowClusterScoped: false); a check reads only "
                        "what its instance may hold"
                    ),
                )
        elif not namespace_allowed(namespace, cluster):
            allowed = ", ".join(cluster.allowed_namespaces or ())
            yield (
                seen,
                (
                    f'{where}: namespace "{namespace}" is not allowed in cluster {cluster.name} '
                    f"(allowedNamespaces: {allowed}; rendered for instance {instance.name}): "
                    "a check reads only the instance's allowed namespaces"
                ),
            )


def _refs(check: MigrationCheck) -> list[tuple[str, CheckRef]]:
    """The object references of ``check``, each with the key that names it."""
    pairs = (
        ("objectMissing", check.object_missing),
        ("objectExists", check.object_exists),
        ("fieldEquals.ref", None if check.field_equals is None else check.field_equals.ref),
    )
    return [(key, ref) for key, ref in pairs if ref is not None]


def _where(version: AppVersion, migration: Migration) -> tuple[str, int | None]:
    return version.origin.file, migration.line


def _check_one(
    version: AppVersion, migration: Migration, registry: Registry, declared: Mapping[str, str]
) -> Iterator[Problem]:
    file, line = _where(version, migration)
    label = f'migration "{migration.name}"'
    name = migration.python
    if name is not None and name not in registry:
        if name in declared:
            yield warning(
                file,
                line,
                f'{label}: python migration "{name}" is declared by {declared[name]} but '
                "not installed in this environment, so its code was not checked "
                "(pre-commit's hook environment cannot install the catalog's package); "
                "CI and the daemon must have it installed",
            )
        else:
            yield error(file, line, f"{label}: {registry.unknown_message(name)}")
    check = migration.check
    for key, ref in _refs(check):
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
