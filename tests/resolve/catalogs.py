"""Builders for catalog values used by the resolve tests (pure values, no files)."""

from __future__ import annotations

from reconciler.model.catalog import (
    App,
    AppEntry,
    AppVersion,
    Catalog,
    Channels,
    Cluster,
    ClusterEntry,
    Instance,
    Origin,
)
from reconciler.model.version import parse_version


def version(
    text: str,
    *,
    app: str = "podinfo",
    upgrade_from: str | None = None,
    yanked: bool = False,
    deprecated: str | None = None,
) -> AppVersion:
    directory = f"apps/{app}/versions/{text}"
    return AppVersion(
        app=app,
        version=parse_version(text),
        directory=directory,
        upgrade_from=upgrade_from,
        yanked=yanked,
        deprecated=deprecated,
        origin=Origin(f"{directory}/version.yaml", {"": 1, "upgradeFrom": 5}),
    )


def entry(
    *versions: AppVersion | str, channels: dict[str, str] | None = None, name: str = "podinfo"
) -> AppEntry:
    built = [v if isinstance(v, AppVersion) else version(v, app=name) for v in versions]
    return AppEntry(
        name=name,
        app=App(name, origin=Origin(f"apps/{name}/app.yaml")),
        channels=None
        if channels is None
        else Channels(name, channels, origin=Origin(f"apps/{name}/channels.yaml")),
        versions={v.key: v for v in built},
    )


def instance(
    name: str = "web",
    *,
    app: str = "podinfo",
    channel: str | None = None,
    version: str | None = None,
    allow_prerelease: bool = False,
    allow_downgrade: bool = False,
    cluster: str = "prod",
) -> Instance:
    return Instance(
        name=name,
        cluster=cluster,
        app=app,
        namespace="web",
        channel=channel,
        version=version,
        allow_prerelease=allow_prerelease,
        allow_downgrade=allow_downgrade,
        origin=Origin(
            f"clusters/{cluster}/instances/{name}.yaml",
            {"": 1, "name": 3, "app": 4, "channel": 5, "version": 6},
        ),
    )


def catalog(*entries: AppEntry, clusters: dict[str, list[Instance]] | None = None) -> Catalog:
    return Catalog(
        root="/catalog",
        apps={e.name: e for e in entries},
        clusters={
            name: ClusterEntry(name, Cluster(name), {i.name: i for i in instances})
            for name, instances in (clusters or {}).items()
        },
    )
