"""Choose the version each instance should run (SPEC section 2).

An instance names a channel, an exact version, a range or ``latest``; this
module turns that into a ``Resolution`` carrying the chosen version, every
candidate with the verdict on it, warnings (yanked, deprecated) and, given the
deployed version, the downgrade guard and the upgrade path. It never raises
for bad input: one instance that cannot be resolved must not stop the others,
so failures come back as ``Resolution.error`` with reason ``ResolveFailed``.

Called by ``reconciler resolve``, ``render``/``diff``/``apply`` and the daemon's
planning step; pure functions over model values, no I/O.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from reconciler.model.catalog import AppEntry, AppVersion, Catalog, Instance
from reconciler.model.errors import NoUpgradePath, ResolveError, UsageError
from reconciler.model.resolution import Candidate, Resolution
from reconciler.model.version import Version, VersionSyntaxError, parse_version
from reconciler.resolve.paths import find_upgrade_path
from reconciler.resolve.ranges import Range, RangeSyntaxError, parse_range

__all__ = ["resolve_cluster", "resolve_instance", "selector_source"]

RESOLVE_FAILED = "ResolveFailed"
DOWNGRADE_BLOCKED = "DowngradeBlocked"


@dataclass(frozen=True)
class _Selection:
    """What one selector rule decided, before the deployed version is considered."""

    chosen: AppVersion | None = None
    error: str | None = None
    candidates: tuple[Candidate, ...] = ()
    warnings: tuple[str, ...] = ()


def selector_source(instance: Instance) -> str:
    """``channel:<name>``, ``exact``, ``range:<expr>`` or ``latest`` (SPEC section 6).

    ``none`` for an instance that sets neither (the validator reports it).
    Interned: every instance's resolution and record keep it, and thousands of
    instances follow the same few channels.
    """
    if instance.channel is not None:
        return sys.intern(f"channel:{instance.channel}")
    if instance.version is None:
        return "none"
    text = instance.version.strip()
    if text == "latest":
        return "latest"
    try:
        parse_version(text)
    except VersionSyntaxError:
        return sys.intern(f"range:{text}")
    return "exact"


def resolve_cluster(
    catalog: Catalog, cluster: str, deployed: Mapping[str, str] | None = None
) -> list[Resolution]:
    """Resolve every instance of ``cluster``, sorted by instance name.

    ``deployed`` maps instance name to the version running now (from the
    status branch or the cluster); instances absent from it are new.
    """
    entry = catalog.clusters.get(cluster)
    if entry is None:
        known = ", ".join(sorted(catalog.clusters)) or "none"
        raise UsageError(f'cluster "{cluster}" is not in the catalog (known: {known})')
    deployed = deployed or {}
    return [
        resolve_instance(
            instance, catalog.apps.get(instance.app), deployed=deployed.get(instance.name)
        )
        for instance in sorted(entry.instances.values(), key=lambda i: i.name)
    ]


def resolve_instance(
    instance: Instance, entry: AppEntry | None, *, deployed: str | None = None
) -> Resolution:
    """Choose a version for ``instance`` from ``entry`` (its app's catalog entry)."""
    base = Resolution(
        cluster=instance.cluster,
        instance=instance.name,
        app=instance.app,
        source=selector_source(instance),
        deployed=deployed,
        file=instance.origin.file,
        line=instance.origin.line(instance.selector_key),
    )
    selection = _select(instance, entry)
    if selection.chosen is None or entry is None:
        return replace(
            base,
            error=selection.error or "no version chosen",
            reason=RESOLVE_FAILED,
            candidates=selection.candidates,
            warnings=selection.warnings,
        )
    chosen = selection.chosen
    resolved = replace(
        base,
        version=chosen.key,
        candidates=selection.candidates,
        warnings=selection.warnings + _deprecation(chosen),
    )
    if deployed is None:
        return resolved
    return _from_deployed(resolved, instance, entry, chosen, deployed)


def _select(instance: Instance, entry: AppEntry | None) -> _Selection:
    if entry is None:
        return _Selection(error=f'app "{instance.app}" is not in the catalog')
    if instance.channel is not None:
        return _by_channel(instance.channel, entry)
    if instance.version is None:
        return _Selection(error=f"instance {instance.name} sets neither channel nor version")
    text = instance.version.strip()
    if text == "latest":
        return _latest(entry, instance.allow_prerelease)
    try:
        exact = parse_version(text)
    except VersionSyntaxError:
        return _by_range(text, entry, instance.allow_prerelease)
    return _by_exact(exact, entry)


def _by_channel(channel: str, entry: AppEntry) -> _Selection:
    if entry.channels is None:
        return _Selection(
            error=f"app {entry.name} has no channels file (apps/{entry.name}/channels.yaml), "
            f'so channel "{channel}" cannot be resolved'
        )
    pointers = entry.channels.channels
    if channel not in pointers:
        known = ", ".join(pointers) or "none"
        return _Selection(
            error=f'channel "{channel}" is not defined for app {entry.name} (known: {known})'
        )
    target = str(pointers[channel])
    chosen = _find(entry, target)
    if chosen is None:
        return _Selection(
            error=f'channel "{channel}" of app {entry.name} points to {target}, '
            f"which is not in the catalog (versions: {_known(entry)})",
            candidates=_verdicts(entry, lambda v: (False, f"channel {channel} points to {target}")),
        )
    if chosen.yanked:
        return _Selection(
            error=f'channel "{channel}" of app {entry.name} points to {target}, which is yanked',
            candidates=_verdicts(
                entry,
                _pick(chosen, "yanked (a channel never picks one)", f"not channel {channel}"),
            ),
        )
    reason = f"chosen: channel {channel} points here"
    return _Selection(
        chosen=chosen,
        candidates=_verdicts(entry, _pick(chosen, reason, f"channel {channel} points to {target}")),
    )


def _by_exact(exact: Version, entry: AppEntry) -> _Selection:
    chosen = next((v for v in entry.versions.values() if v.version == exact), None)
    if chosen is None:
        return _Selection(
            error=f"version {exact} of app {entry.name} is not in the catalog "
            f"(versions: {_known(entry)})",
            candidates=_verdicts(entry, lambda v: (False, f"not the requested {exact}")),
        )
    warnings: tuple[str, ...] = ()
    reason = "chosen: the instance names this version exactly"
    if chosen.yanked:
        reason += " (yanked)"
        warnings = (
            f"version {chosen.key} of app {entry.name} is yanked; chosen only because the "
            "instance names it exactly",
        )
    candidates = _verdicts(entry, _pick(chosen, reason, f"not the requested {exact}"))
    return _Selection(chosen=chosen, candidates=candidates, warnings=warnings)


def _by_range(text: str, entry: AppEntry, allow_prerelease: bool) -> _Selection:
    try:
        wanted = parse_range(text)
    except RangeSyntaxError as e:
        return _Selection(error=str(e))
    usable = [
        v
        for v in entry.sorted_versions()
        if not v.yanked and wanted.matches(v.version, include_prerelease=allow_prerelease)
    ]
    if not usable:
        return _Selection(
            error=_no_match(wanted, entry, allow_prerelease),
            candidates=_verdicts(entry, lambda v: _range_verdict(v, wanted, allow_prerelease)),
        )
    chosen = usable[-1]

    def verdict(v: AppVersion) -> tuple[bool, str]:
        if v is chosen:
            return True, "chosen: highest non-yanked version in range"
        kept, reason = _range_verdict(v, wanted, allow_prerelease)
        return (True, f"lower than the chosen {chosen.key}") if kept else (kept, reason)

    return _Selection(chosen=chosen, candidates=_verdicts(entry, verdict))


def _range_verdict(v: AppVersion, wanted: Range, allow_prerelease: bool) -> tuple[bool, str]:
    if not wanted.matches(v.version, include_prerelease=allow_prerelease):
        if wanted.matches(v.version, include_prerelease=True):
            return False, "prerelease (allowPrerelease is false)"
        return False, f"outside range {wanted}"
    if v.yanked:
        return False, "yanked"
    return True, "in range"


def _no_match(wanted: Range, entry: AppEntry, allow_prerelease: bool) -> str:
    message = f'no version of app {entry.name} matches "{wanted}" (versions: {_known(entry)})'
    hidden = [
        v.key
        for v in entry.sorted_versions()
        if not v.yanked
        and not allow_prerelease
        and wanted.matches(v.version, include_prerelease=True)
    ]
    if hidden:
        message += f"; set allowPrerelease: true to consider {', '.join(hidden)}"
    yanked = [
        v.key
        for v in entry.sorted_versions()
        if v.yanked and wanted.matches(v.version, include_prerelease=allow_prerelease)
    ]
    if yanked:
        message += f"; in range but yanked: {', '.join(yanked)}"
    return message


def _latest(entry: AppEntry, allow_prerelease: bool = False) -> _Selection:
    """The highest non-yanked release; with ``allowPrerelease`` prereleases count too.

    Like ``helm --devel``: a user who opts into prereleases expects ``latest``
    to mean the newest build, not the newest release.
    """

    def eligible(v: AppVersion) -> tuple[bool, str]:
        if v.version.prerelease is not None and not allow_prerelease:
            return False, "prerelease (allowPrerelease is false)"
        if v.yanked:
            return False, "yanked"
        return True, "prerelease" if v.version.prerelease is not None else "release"

    usable = [v for v in entry.sorted_versions() if eligible(v)[0]]
    what = "version" if allow_prerelease else "release version"
    if not usable:
        return _Selection(
            error=f"app {entry.name} has no non-yanked {what} for latest "
            f"(versions: {_known(entry)})",
            candidates=_verdicts(entry, eligible),
        )
    chosen = usable[-1]

    def verdict(v: AppVersion) -> tuple[bool, str]:
        if v is chosen:
            return True, f"chosen: highest non-yanked {what}"
        kept, reason = eligible(v)
        return (True, f"lower than the chosen {chosen.key}") if kept else (kept, reason)

    return _Selection(chosen=chosen, candidates=_verdicts(entry, verdict))


def _from_deployed(
    resolved: Resolution, instance: Instance, entry: AppEntry, chosen: AppVersion, deployed: str
) -> Resolution:
    """Apply the downgrade guard or find the upgrade path from what runs now."""
    try:
        running = parse_version(deployed)
    except VersionSyntaxError:
        return replace(
            resolved,
            warnings=(
                *resolved.warnings,
                f'deployed version "{deployed}" is not a valid version; '
                "downgrade guard and upgrade path skipped",
            ),
        )
    if chosen.version == running:
        return resolved
    if chosen.version < running:
        return _downgrade(resolved, instance, chosen, running)
    try:
        path = find_upgrade_path(
            entry.versions.values(), running, chosen, allow_prerelease=instance.allow_prerelease
        )
    except NoUpgradePath as e:
        return replace(resolved, reason=NoUpgradePath.reason, message=str(e))
    except ResolveError as e:
        return replace(resolved, version=None, error=str(e), reason=RESOLVE_FAILED)
    # a direct upgrade has no path to show; next_version is then the target itself
    return replace(resolved, upgrade_path=path if len(path) > 1 else ())


def _downgrade(
    resolved: Resolution, instance: Instance, chosen: AppVersion, running: Version
) -> Resolution:
    if instance.allow_downgrade:
        note = f"downgrading from {running} to {chosen.key} (allowDowngrade is true)"
        return replace(resolved, warnings=(*resolved.warnings, note))
    where = f" in {instance.origin.file}" if instance.origin.file else ""
    return replace(
        resolved,
        reason=DOWNGRADE_BLOCKED,
        message=f"chosen version {chosen.key} is lower than the deployed {running}; "
        f"staying at {running} (set allowDowngrade: true on instance {instance.name}{where} "
        "to allow the downgrade)",
    )


def _deprecation(v: AppVersion) -> tuple[str, ...]:
    if v.deprecated is None:
        return ()
    text = str(v.deprecated).strip()
    note = f": {text}" if text else ""
    return (f"version {v.key} of app {v.app} is deprecated{note}",)


def _find(entry: AppEntry, text: str) -> AppVersion | None:
    if text in entry.versions:
        return entry.versions[text]
    try:
        wanted = parse_version(text)
    except VersionSyntaxError:
        return None
    return next((v for v in entry.versions.values() if v.version == wanted), None)


def _known(entry: AppEntry) -> str:
    return ", ".join(v.key for v in entry.sorted_versions()) or "none"


Verdict = Callable[[AppVersion], tuple[bool, str]]


def _pick(chosen: AppVersion, chosen_reason: str, other_reason: str) -> Verdict:
    def verdict(v: AppVersion) -> tuple[bool, str]:
        if v is chosen:
            return chosen_reason.startswith("chosen"), chosen_reason
        return False, other_reason

    return verdict


def _verdicts(entry: AppEntry, verdict: Verdict) -> tuple[Candidate, ...]:
    """Every catalog version of the app, highest first, with the verdict on it."""
    out = []
    for v in reversed(entry.sorted_versions()):
        kept, reason = verdict(v)
        out.append(Candidate(v.key, kept, reason))
    return tuple(out)
