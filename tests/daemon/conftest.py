"""Fixtures for end-to-end daemon tests: a catalog repository with a remote, and a cluster.

``world`` is the sandbox; ``lane_world`` is the same world on each lane of
``tests/lanes.py``: the sandbox, and a real cluster with ``RECONCILER_TEST_KUBECONFIG``
(``pytest -m real_cluster``), with the catalog's namespaces suffixed per test.
"""

from __future__ import annotations

import functools
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from reconciler.daemon import plan as plan_module
from reconciler.daemon.loop import EVENT_FLUSH_SECONDS, Daemon, DaemonSettings, PassOutcome
from reconciler.kube import KubeClient
from reconciler.migrations.registry import Registry
from reconciler.model.status import Phase
from reconciler.sandbox.testing import SandboxHandle, running_sandbox
from reconciler.sandbox.timing import Timing
from reconciler.source.scaffold import CatalogRepo
from tests.factories import catalog_repo, commit_file, write_catalog
from tests.lanes import (
    FAIL_IMAGES,
    LANES,
    delete_namespaces,
    namespaces_ending,
    new_suffix,
    real_kubeconfig,
    suffix_namespaces,
    suffix_path,
)


@dataclass
class World:
    """A catalog repo (work clone + bare remote), a cluster, and a daemon on both.

    ``sandbox`` is None on a real cluster: a test reads the cluster over the API
    (``kubeconfig``), and asserts on the sandbox's request log only where it exists.
    """

    repo: CatalogRepo
    sandbox: SandboxHandle | None
    client: KubeClient
    daemon: Daemon
    cache: Path
    kubeconfig: Path | None = None  # the sandbox's when not given
    suffix: str = ""  # ends every namespace of the catalog on a real cluster
    others: list[Daemon] = field(default_factory=list)  # made by new_daemon

    def __post_init__(self) -> None:
        if self.kubeconfig is None:
            assert self.sandbox is not None, "a real cluster's World needs its kubeconfig"
            self.kubeconfig = self.sandbox.kubeconfig

    def ns(self, base: str) -> str:
        """The name namespace ``base`` of the catalog has in this test's cluster."""
        return f"{base}{self.suffix}"

    @property
    def cluster(self) -> str:
        """The catalog's cluster ``prod`` as this test names it (the daemon's ``--cluster``)."""
        return f"prod{self.suffix}"

    def path(self, rel: str) -> str:
        """Where catalog file ``rel`` (``clusters/prod/...``) is in this test's catalog."""
        return suffix_path(rel, self.suffix)

    def commit(self, rel: str, content: str, message: str = "edit") -> str:
        """Write, commit and push one file, as a person editing the catalog would."""
        text = suffix_namespaces(rel, content, self.suffix)
        return commit_file(self.repo, self.path(rel), text, message)

    def move_status_branch(self, cluster: str) -> str:
        """Another writer (a replica, a person) moves ``cluster``'s status branch on the
        remote: one commit on top that changes no record. Its new head."""
        work = str(self.repo.work)
        run = functools.partial(subprocess.run, check=True, capture_output=True, text=True)
        run(["git", "-C", work, "fetch", "-q", "origin", f"status/{cluster}"])
        tree = "FETCH_HEAD^{tree}"
        moved = run(["git", "-C", work, "commit-tree", tree, "-p", "FETCH_HEAD", "-m", "a note"])
        head = moved.stdout.strip()
        run(["git", "-C", work, "push", "-q", "origin", f"{head}:refs/heads/status/{cluster}"])
        return head

    def new_daemon(self, **overrides: object) -> Daemon:
        settings = DaemonSettings(**{**self.daemon.settings.__dict__, **overrides})  # type: ignore[arg-type]
        daemon = Daemon(settings, self.client, registry=self.daemon.registry)
        self.others.append(daemon)
        return daemon

    def reset_request_log(self) -> None:
        """Start counting requests afresh, once the Events of earlier passes were sent.

        The daemon sends Events in the background (``kube.events.EventQueue``): one
        recorded by the last pass may still be on its way and must not count as the
        next pass's request.
        """
        assert self.sandbox is not None, "the request log is the sandbox's"
        for daemon in (self.daemon, *self.others):
            daemon.flush_events()
        self.sandbox.reset_request_log()

    def writes(self) -> int:
        assert self.sandbox is not None, "the request log is the sandbox's"
        return sum(
            1
            for e in self.sandbox.request_log()
            if e.method in ("POST", "PUT", "PATCH", "DELETE") and "dryRun=" not in e.query
        )


# sandbox_world's sandboxes by URL (the daemon's ``client.host``): settle() waits on them
_SANDBOXES: dict[str, SandboxHandle] = {}
SETTLE_BOUND = 0.5  # seconds settle() waits at most for the sandbox to rest
LOOK_BOUND = 2.0  # seconds settle() waits at most for a look a quiet cluster asked for


@cache
def installed() -> Registry:
    """The installed distributions' Python migrations, read once per test process.

    A daemon reads them once, at its start (``Registry.installed``), and nothing
    installs any while the tests run: read for every test's daemon, they were a walk
    of every installed distribution's entry points each time.
    """
    return Registry.installed()


def _settings(
    repo: CatalogRepo, tmp_path: Path, suffix: str = "", **overrides: Any
) -> DaemonSettings:
    values: dict[str, Any] = {
        "repo": repo.url,
        "cluster": f"prod{suffix}",
        "leader_namespace": f"reconciler-system{suffix}",
        "health_timeout": 10.0,
        "cache_dir": tmp_path / "cache",
        "max_look": 0.1,  # the sandbox's pods are ready in hundredths of a second
    }
    return DaemonSettings(**{**values, **overrides})


@contextmanager
def sandbox_world(
    tmp_path: Path,
    overrides: dict[str, str | bytes | None] | None = None,
    *,
    timing: Timing | None = None,
    sandbox_options: dict[str, Any] | None = None,
    client_options: dict[str, Any] | None = None,
    **settings: Any,
) -> Iterator[World]:
    """A world on the sandbox: the baseline catalog with ``overrides`` (see
    ``write_catalog``), the sandbox's ``timing`` and daemon ``settings`` changed;
    ``sandbox_options`` go to ``running_sandbox``, ``client_options`` to
    ``KubeClient.connect`` (e.g. ``max_requests_in_flight``)."""
    source = write_catalog(tmp_path / "template", overrides)
    repo = catalog_repo(source, tmp_path / "repos")
    with (
        running_sandbox(
            controller_delay=0.02,
            fail_images=FAIL_IMAGES,
            timing=timing,
            **(sandbox_options or {}),
        ) as sandbox,
        KubeClient.connect(str(sandbox.kubeconfig), **(client_options or {})) as client,
    ):
        daemon = Daemon(_settings(repo, tmp_path, **settings), client, registry=installed())
        world = World(repo, sandbox, client, daemon, tmp_path / "cache")
        _SANDBOXES[client.host] = sandbox
        try:
            yield world
        finally:  # before the sandbox stops: no Event is sent to it, or logged, after
            _SANDBOXES.pop(client.host, None)
            for each in (daemon, *world.others):
                each.flush_events(EVENT_FLUSH_SECONDS)
                each.close_events()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """The sandbox only: for tests that read its request log or change its timing."""
    with sandbox_world(tmp_path) as w:
        yield w


@pytest.fixture(params=LANES)
def lane_world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    """``world`` on the sandbox, and on a real cluster in the ``real_cluster`` lane.

    On a real cluster every namespace of the catalog ends in a suffix of this test,
    and the namespaces are deleted afterwards (waiting until they are gone).
    """
    if request.param == "sandbox":
        with sandbox_world(tmp_path) as w:
            yield w
        return
    kubeconfig = real_kubeconfig()
    suffix = new_suffix()
    source = write_catalog(tmp_path / "template", suffix=suffix)
    repo = catalog_repo(source, tmp_path / "repos")
    with KubeClient.connect(kubeconfig) as client:
        daemon = Daemon(_settings(repo, tmp_path, suffix), client, registry=installed())
        world = World(repo, None, client, daemon, tmp_path / "cache", kubeconfig, suffix)
        try:
            yield world
        finally:
            delete_namespaces(client, namespaces_ending(client, suffix))


def settle(
    daemon: Daemon,
    limit: int = 400,
    *,
    until_waiting: bool = False,
    each: Callable[[PassOutcome], None] | None = None,
) -> list[PassOutcome]:
    """Passes, as the service schedules them, until no instance is Progressing.

    A rollout makes one transition per pass and never waits (SPEC section 4), so a
    test that moves a version with a batch plan runs passes until it is over; the
    pause between passes stands for the daemon's next look. ``each`` sees every
    outcome as it comes (to check the cluster at a given transition).
    """
    outcomes: list[PassOutcome] = []
    sandbox = sandbox_of(daemon)
    for _ in range(limit):
        since = sandbox.resource_version() if sandbox is not None else 0
        outcome = daemon.run_pass()
        outcomes.append(outcome)
        if each is not None:
            each(outcome)
        report = outcome.report
        if report is None or all(s.phase is not Phase.PROGRESSING for s in report.statuses):
            return outcomes
        if until_waiting and any(s.reason == "WaitingForPromotion" for s in report.statuses):
            return outcomes
        next_look(sandbox, since, report.next_look)
    raise AssertionError(f"still progressing after {limit} passes")


def sandbox_of(daemon: Daemon) -> SandboxHandle | None:
    """The sandbox ``daemon`` reconciles (made by ``sandbox_world``), None on a real cluster."""
    return _SANDBOXES.get(daemon.client.host)


def rested(daemon: Daemon) -> Daemon:
    """``daemon``, once the sandbox it reconciles has come to rest (at most
    ``SETTLE_BOUND``): for a test's own loop of passes, where a pass right after the
    last one mostly found the controllers still answering its writes and did nothing."""
    sandbox = sandbox_of(daemon)
    if sandbox is not None:
        sandbox.settled(-1, SETTLE_BOUND)
    return daemon


def next_look(sandbox: SandboxHandle | None, since: int, look: float | None) -> None:
    """The pause before the daemon's next look, after a pass that began at ``since``.

    The service looks again ``next_look`` seconds after such a pass (at most
    ``--max-look``). On the sandbox the harness looks as soon as the cluster has
    come to rest after what moved it (the pass's writes and the controllers' answers),
    at the latest after ``SETTLE_BOUND``: a pass after a fixed short pause mostly found
    the pods still starting and did nothing. When nothing moved by then, what the
    daemon waits for is time (an analysis interval, a health timeout): the look comes
    when it asked for it (at most ``LOOK_BOUND``), or once something moves and rests.
    Without a sandbox, or when the pass named no time (a gate waiting for another
    cluster or a person), a short pause stands for the look.
    """
    if look == 0:
        return
    if sandbox is None or look is None:
        time.sleep(min(look if look is not None else 0.05, 0.05))
        return
    bound = min(look, SETTLE_BOUND)
    if not sandbox.settled(since, bound) and sandbox.resource_version() == since:
        sandbox.settled(since, min(look, LOOK_BOUND) - bound)


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The instances rendered since the test began, in order (one name per render)."""
    seen: list[str] = []
    real = plan_module.render_instance

    def counting(catalog: Any, instance: Any, version: Any) -> Any:
        seen.append(instance.name)
        return real(catalog, instance, version)

    monkeypatch.setattr(plan_module, "render_instance", counting)
    yield seen
