"""``run --scan-images INTERVAL``: the daemon asks the registries for new image builds.

A rebuild of a released image (a library CVE: ``2.6.2-rev1-b5.1`` becomes
``-b6.1``) must reach the clusters as a commit, never as a silently moved tag
(SPEC section 8). ``reconciler images scan --push`` makes that commit when a
person or a CI job runs it; with ``--scan-images`` the daemon runs the same scan
on a timer, in its own thread, so a slow or unreachable registry never delays a
pass. The scan works in its own clone of the catalog branch
(``source.CatalogWorkClone``), commits ``builds.yaml`` per app with the SPEC
trailers and pushes; then it asks for a pass, which rolls the new build out
like a version change.

Only the replica that acts scans (the leader, or the holder of shard 0 with
``--shards``), so replicas do not race each other. Daemons of other clusters on
the same catalog may scan too: their pushes are plain fast-forwards, so the one
that loses the race is refused by Git, logs it, and finds nothing left to do at
its next scan. A registry that fails makes the scan commit nothing (the scan
asks every registry before deciding anything) and is retried at the next tick.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reconciler.daemon.triggers import PeriodicTrigger, Trigger, TriggerQueue
from reconciler.model.errors import ReconcilerError
from reconciler.registry import RegistryClient, scan_catalog
from reconciler.source import BuildsCommits, CatalogWorkClone, commit_builds

log = logging.getLogger(__name__)

FIRST_SCAN_DELAY = 5.0  # seconds after start


@dataclass(frozen=True)
class ScanOutcome:
    """What one scan did: ``result`` is ``changed``, ``unchanged`` or ``failed``."""

    result: str
    commits: BuildsCommits | None = None
    warnings: tuple[str, ...] = ()
    error: str = ""

    def describe(self) -> str:
        if self.error:
            return f"image scan failed: {self.error}"
        if self.commits is None or not self.commits.commits:
            return "image scan: no new builds"
        subjects = "; ".join(c.subject for c in self.commits.commits)
        return f"image scan committed {len(self.commits.commits)} app(s): {subjects}"


class ImageScanner(PeriodicTrigger):
    """Scans every ``interval`` seconds (± jitter) while ``acting()`` says this replica acts.

    The timer is ``PeriodicTrigger``'s; each tick is a scan instead of a trigger, and
    the first one comes soon after start (a user who just turned it on sees it work).
    ``scan_once`` is the whole step and may be called directly (tests, ``--once``).
    """

    def __init__(
        self,
        clone: CatalogWorkClone,
        queue: TriggerQueue,
        interval: float,
        *,
        acting: Callable[[], bool] = lambda: True,
        observe: Callable[[str], None] = lambda result: None,
        client_factory: Callable[[], RegistryClient] = RegistryClient.from_environment,
        jitter: float = 0.1,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(queue, interval, jitter=jitter, rng=rng)
        self.clone = clone
        self._acting = acting
        self._observe = observe
        self._client_factory = client_factory

    @property
    def thread_name(self) -> str:
        return "reconciler-image-scan"

    def first_delay(self) -> float:
        return min(self.next_delay(), FIRST_SCAN_DELAY)

    def tick(self) -> None:
        if not self._acting():
            log.debug("image scan skipped: this replica does not act")
            return
        try:
            self.scan_once()
        except Exception:  # a bug must not end the scanner; log it and go on
            log.exception("image scan crashed")
            self._observe("failed")

    def scan_once(self) -> ScanOutcome:
        """Refresh the clone, ask the registries, commit and push what changed."""
        try:
            root: Path = self.clone.refresh()
            with self._client_factory() as client:
                scan = scan_catalog(root, client=client)
            for warning in scan.warnings:
                log.warning("image scan: %s", warning)
            changes = scan.file_changes()
            if not changes:
                outcome = ScanOutcome("unchanged", warnings=scan.warnings)
            else:
                commits = commit_builds(
                    root,
                    changes,
                    push=True,
                    credentials=self.clone.credentials,
                    policy=self.clone.policy,
                )
                outcome = ScanOutcome("changed", commits, scan.warnings)
        except ReconcilerError as e:
            # a registry or the catalog remote is away, or the push lost a race:
            # nothing was pushed, and the next tick starts again from the remote's head
            outcome = ScanOutcome("failed", error=str(e))
        self._observe(outcome.result)
        if outcome.result == "failed":
            log.warning("%s", outcome.describe())
        elif outcome.result == "changed":
            log.info("%s", outcome.describe())
            self.queue.put(Trigger("poll", outcome.describe()))
        else:
            log.debug("%s", outcome.describe())
        return outcome
