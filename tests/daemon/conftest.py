"""Fixtures for end-to-end daemon tests: a catalog repository with a remote, and a sandbox."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.daemon.loop import Daemon, DaemonSettings, PassOutcome
from reconciler.kube import KubeClient
from reconciler.model.status import Phase
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
            repo=repo.url,
            cluster="prod",
            health_timeout=10.0,
            cache_dir=tmp_path / "cache",
            max_look=0.1,  # the sandbox's pods are ready in hundredths of a second
        )
        yield World(repo, sandbox, client, Daemon(settings, client), tmp_path / "cache")


def settle(daemon: Daemon, limit: int = 400, *, until_waiting: bool = False) -> list[PassOutcome]:
    """Passes, as the service schedules them, until no instance is Progressing.

    A rollout makes one transition per pass and never waits (SPEC section 4), so a
    test that moves a version with a batch plan runs passes until it is over; the
    pause between passes stands for the daemon's next look.
    """
    outcomes: list[PassOutcome] = []
    for _ in range(limit):
        outcome = daemon.run_pass()
        outcomes.append(outcome)
        report = outcome.report
        if report is None or all(s.phase is not Phase.PROGRESSING for s in report.statuses):
            return outcomes
        if until_waiting and any(s.reason == "WaitingForPromotion" for s in report.statuses):
            return outcomes
        look = report.next_look
        time.sleep(min(look if look is not None else 0.05, 0.05))
    raise AssertionError(f"still progressing after {limit} passes")
