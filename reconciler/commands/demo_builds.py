"""The demo's image-build chapter: a rebuild arrives as a commit and rolls out (SPEC 8).

The example app ``shop`` names the intermediate tag ``2.6.2-rev1`` of
``localhost:5000/shop/web``. The demo runs a real registry (Debian's
``docker-registry``, the CNCF distribution server) on a free port, points the
demo's copy of the catalog at it, and pushes small generated images under the
three tags. Before the first pass ``reconciler images scan --push`` pins the build
that exists (``2.6.2-rev1-b5.1``); in the chapter a CVE rebuild
(``2.6.2-rev1-b6.1``) is pushed, the daemon's own scan (``run --scan-images``)
commits it, and the next passes roll it out in shop's batches, each step a status
commit naming both builds.

Without the registry binary (a machine without root or apt) the chapter is
skipped with a line saying how to get it; the rest of the demo does not need it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from reconciler.daemon.imagescans import ImageScanner
from reconciler.daemon.loop import Daemon, PassOutcome
from reconciler.daemon.triggers import TriggerQueue
from reconciler.registry import scan_catalog, verify_catalog
from reconciler.registry.local import (
    REGISTRY_BINARY,
    LocalRegistry,
    RegistryStartError,
    push_image,
    running_registry,
)
from reconciler.source import CatalogWorkClone, commit_builds
from reconciler.source.scaffold import CatalogRepo, commit_message, log_oneline

TEMPLATE_HOST = "localhost:5000"  # what the template's shop app names
REPOSITORY = "shop/web"
INSTANCE = "shop"
NAMESPACE = "team-shop"


@contextmanager
def demo_registry(directory: Path, say: Callable[[str], None]) -> Iterator[LocalRegistry | None]:
    """A real registry for the chapter, or None (said why) when it cannot run here."""
    if not os.access(REGISTRY_BINARY, os.X_OK):
        say(
            f"registry     none: {REGISTRY_BINARY} is missing, so the image-build chapter is "
            "skipped (as root: apt-get install docker-registry; `make demo` does it)"
        )
        yield None
        return
    try:
        with running_registry(directory) as registry:
            say(f"registry     {registry.url}  (Debian's docker-registry, the CNCF distribution)")
            yield registry
    except RegistryStartError as e:
        say(f"registry     could not start ({e}); the image-build chapter is skipped")
        yield None


def point_catalog_at(catalog: Path, registry: LocalRegistry) -> None:
    """The demo's copy of the catalog names the registry that runs, not localhost:5000."""
    for version in (catalog / "apps" / "shop" / "versions").glob("*/version.yaml"):
        text = version.read_text(encoding="utf-8")
        version.write_text(text.replace(TEMPLATE_HOST, registry.host), encoding="utf-8")


def pin_first_builds(
    repo: CatalogRepo, registry: LocalRegistry, say: Callable[[str], None]
) -> None:
    """The image maintainers' pushes so far, and the scan commit that pins what exists."""
    for tag in ("2.6.1", "2.6.1-rev1", "2.6.2", "2.6.2-rev1", "2.6.2-rev1-b5.1"):
        push_image(registry.url, REPOSITORY, tag)
    say(f"pushed {REPOSITORY}: 2.6.1, 2.6.1-rev1, 2.6.2, 2.6.2-rev1, 2.6.2-rev1-b5.1")
    scan = scan_catalog(repo.work)
    done = commit_builds(repo.work, scan.file_changes(), push=True)
    for commit in done.commits:
        say(f"commit {commit.commit[:12]}: {commit.subject} (reconciler images scan --push)")


def image_build_chapter(
    story_chapter: Callable[[str], None],
    say: Callable[[str], None],
    repo: CatalogRepo,
    daemon: Daemon,
    registry: LocalRegistry,
    workdir: Path,
    roll: Callable[[str], PassOutcome],
    image_of: Callable[[], str],
) -> PassOutcome:
    """A CVE rebuild: pushed, committed by the daemon's scan, rolled out in batches."""
    story_chapter("Image builds: a library CVE is fixed by rebuilding shop's image")
    say(f"shop runs {image_of()}")
    fixed = push_image(registry.url, REPOSITORY, "2.6.2-rev1-b6.1", seed="openssl CVE fixed")
    push_image(registry.url, REPOSITORY, "2.6.2-rev1-b7-nightly", seed="nightly")
    say(f"pushed {REPOSITORY}:2.6.2-rev1-b6.1 ({fixed[:19]}...) and a stray 2.6.2-rev1-b7-nightly")
    say("the intermediate tag 2.6.2-rev1 stays; only the long tag moves. The daemon's scan")
    say("(run --scan-images INTERVAL) asks the registry and commits the new pin:")
    clone = CatalogWorkClone(repo.url, cache_dir=workdir / "cache")
    quiet = logging.getLogger("reconciler.daemon.imagescans")
    level, quiet.level = quiet.level, logging.ERROR  # its warnings are told below
    try:
        scan = ImageScanner(clone, TriggerQueue(), 3600.0).scan_once()
    finally:
        quiet.setLevel(level)
    for warning in scan.warnings:
        say(f"warning: {warning}")
    if scan.commits is None or not scan.commits.commits:
        say(f"the scan committed nothing: {scan.describe()}")
    for line in log_oneline(repo.remote, "HEAD")[:1]:
        say(f"commit {line}")
    message = commit_message(repo.remote, "HEAD").splitlines()
    for trailer in (t for t in message if t.startswith("Reconciler-")):
        say(f"  {trailer}")
    say("the next passes roll it out in shop's batches [1, 50%, 50%]; each step is a commit:")
    outcome = roll(INSTANCE)
    say(f"shop runs {image_of()}")
    verified = verify_catalog(clone.path, app="shop")
    say(
        f"reconciler images verify: {verified.checked} image references checked, "
        f"{len(verified.missing)} missing (every released image must stay pullable)"
    )
    return outcome
