"""Fixtures for end-to-end daemon tests: a catalog repository with a remote, and a sandbox."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.daemon.loop import Daemon, DaemonSettings
from reconciler.kube import KubeClient
from reconciler.sandbox.testing import SandboxHandle, running_sandbox
from reconciler.source.scaffold import CatalogRepo, commit_file, create_catalog_repo
from tests.factories import write_catalog


@dataclass
class World:
    """A catalog repo (work clone + bare remote), a sandbox cluster, and a daemon on both."""

    repo: CatalogRepo
    sandbox: SandboxHandle
    client: KubeClient
    daemon: Daemon
    cache: Path

    def commit(self, rel: str, content: str, message: str = "edit") -> str:
        """Write, commit and push one file, as a person editing the catalog would."""
        return commit_file(self.repo, rel, content, message)

    def new_daemon(self, **overrides: object) -> Daemon:
        settings = DaemonSettings(**{**self.daemon.settings.__dict__, **overrides})  # type: ignore[arg-type]
        return Daemon(settings, self.client)

    def writes(self) -> int:
        return sum(
            1
            for e in self.sandbox.request_log()
            if e.method in ("POST", "PUT", "PATCH", "DELETE") and "dryRun=" not in e.query
        )


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    source = write_catalog(tmp_path / "template")
    repo = create_catalog_repo(source, tmp_path / "repos")
    with (
        running_sandbox(controller_delay=0.02) as sandbox,
        KubeClient.connect(str(sandbox.kubeconfig)) as client,
    ):
        settings = DaemonSettings(
            repo=repo.url, cluster="prod", health_timeout=10.0, cache_dir=tmp_path / "cache"
        )
        yield World(repo, sandbox, client, Daemon(settings, client), tmp_path / "cache")
