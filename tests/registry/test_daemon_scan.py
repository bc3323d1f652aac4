"""``run --scan-images``: the daemon commits new image builds and rolls them out.

A real registry (Debian's docker-registry), a real catalog repository with a bare
remote, and the sandbox: a rebuild pushed to the registry becomes one commit on the
catalog branch (SPEC section 8 trailers), a pass is asked for at once, and the pass
renders ``repo:<long tag>@<digest>`` into the Deployment.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from reconciler.cli import main
from reconciler.daemon.imagescans import ImageScanner
from reconciler.daemon.triggers import TriggerQueue
from reconciler.model.changeset import ObjectRef
from reconciler.registry import RegistryClient
from reconciler.registry.local import LocalRegistry, push_image
from reconciler.source import CatalogWorkClone
from tests.daemon.conftest import World, sandbox_world
from tests.daemon.test_service import eventually, running, web_image
from tests.registry.conftest import FAST


def version_file(image: str) -> str:
    return f"""\
        apiVersion: reconciler/v1
        kind: AppVersion
        app: podinfo
        version: 6.5.0
        images:
          podinfo: {image}
        parameters:
          replicas: {{default: 2}}
          message: {{default: hello}}
        """


def git(repo: Path | str, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


def image_of(world: World) -> str:
    obj = world.client.get(ObjectRef("apps/v1", "Deployment", "web", "web"))
    assert obj is not None
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


def scanner(world: World, queue: TriggerQueue, tmp_path: Path) -> ImageScanner:
    clone = CatalogWorkClone(world.repo.url, cache_dir=tmp_path / "scan-cache")
    return ImageScanner(
        clone, queue, 60.0, client_factory=lambda: RegistryClient(policy=FAST), jitter=0.0
    )


@pytest.mark.slow
def test_a_rebuild_becomes_a_commit_and_rolls_out(
    tmp_path: Path, registry: LocalRegistry, repo_name: str
) -> None:
    image = f"{registry.host}/{repo_name}/podinfo"
    push_image(registry.url, f"{repo_name}/podinfo", "6.5.0-rev1")
    first = push_image(registry.url, f"{repo_name}/podinfo", "6.5.0-rev1-b5.1")
    overrides: dict[str, str | bytes | None] = {
        "apps/podinfo/versions/6.5.0/version.yaml": version_file(f"{image}:6.5.0-rev1")
    }
    with sandbox_world(tmp_path, overrides) as world:
        assert world.daemon.run_pass().ok
        assert image_of(world) == f"{image}:6.5.0-rev1"  # nothing pinned yet
        queue = TriggerQueue()
        scan = scanner(world, queue, tmp_path)

        outcome = scan.scan_once()
        assert outcome.result == "changed", outcome
        trigger = queue.wait(timeout=1.0)
        assert trigger is not None and "image scan committed" in trigger.detail
        assert world.daemon.run_pass().ok
        assert image_of(world) == f"{image}:6.5.0-rev1-b5.1@{first}"

        # a CVE rebuild: one more commit naming both builds, then the new pin runs
        second = push_image(registry.url, f"{repo_name}/podinfo", "6.5.0-rev1-b6.1", seed="cve")
        assert second != first
        assert scan.scan_once().result == "changed"
        assert queue.wait(timeout=1.0) is not None
        log = git(world.repo.remote, "log", "-1", "--format=%B", "main")
        assert log.startswith("podinfo: image build podinfo 6.5.0-rev1-b5.1 -> 6.5.0-rev1-b6.1")
        assert "Reconciler-From: 6.5.0-rev1-b5.1" in log
        assert f"Reconciler-Digest: {second}" in log
        assert world.daemon.run_pass().ok
        assert image_of(world) == f"{image}:6.5.0-rev1-b6.1@{second}"

        # nothing new: no commit, no pass asked for
        before = git(world.repo.remote, "rev-parse", "main")
        assert scan.scan_once().result == "unchanged"
        assert git(world.repo.remote, "rev-parse", "main") == before
        assert queue.wait(timeout=0.05) is None


def test_a_registry_that_fails_commits_nothing_and_the_next_scan_recovers(
    tmp_path: Path, registry: LocalRegistry, repo_name: str
) -> None:
    """The scan asks every registry before it decides: one that is away commits nothing."""
    gone = "127.0.0.1:9"  # the discard port: nothing listens there
    push_image(registry.url, f"{repo_name}/podinfo", "6.5.0-rev1-b1")
    overrides: dict[str, str | bytes | None] = {
        "apps/podinfo/versions/6.5.0/version.yaml": version_file(
            f"{gone}/{repo_name}/podinfo:6.5.0-rev1"
        )
    }
    with sandbox_world(tmp_path, overrides) as world:
        queue = TriggerQueue()
        seen: list[str] = []
        scan = scanner(world, queue, tmp_path)
        scan._observe = seen.append
        before = git(world.repo.remote, "rev-parse", "main")
        outcome = scan.scan_once()
        assert outcome.result == "failed" and gone in outcome.error
        assert git(world.repo.remote, "rev-parse", "main") == before
        assert queue.wait(timeout=0.05) is None
        assert seen == ["failed"]

        # someone points the version at the working registry: the next scan commits
        world.commit(
            "apps/podinfo/versions/6.5.0/version.yaml",
            version_file(f"{registry.host}/{repo_name}/podinfo:6.5.0-rev1"),
            "podinfo 6.5.0: images from the new registry",
        )
        assert scan.scan_once().result == "changed"
        assert seen == ["failed", "changed"]


def test_a_push_that_loses_a_race_is_retried_from_the_new_head(
    tmp_path: Path, registry: LocalRegistry, repo_name: str
) -> None:
    """Another commit lands between the scan's fetch and its push: Git refuses the push
    (never forced); the next scan starts from the new head and commits exactly once."""
    push_image(registry.url, f"{repo_name}/podinfo", "6.5.0-rev1-b1")
    overrides: dict[str, str | bytes | None] = {
        "apps/podinfo/versions/6.5.0/version.yaml": version_file(
            f"{registry.host}/{repo_name}/podinfo:6.5.0-rev1"
        )
    }
    with sandbox_world(tmp_path, overrides) as world:
        queue = TriggerQueue()
        scan = scanner(world, queue, tmp_path)
        refresh = scan.clone.refresh

        def someone_pushes_meanwhile() -> Path:
            path = refresh()
            world.commit("README.md", "# catalog\n\nEdited meanwhile.\n", "README")
            return path

        scan.clone.refresh = someone_pushes_meanwhile  # type: ignore[method-assign]
        outcome = scan.scan_once()
        assert outcome.result == "failed", outcome
        scan.clone.refresh = refresh  # type: ignore[method-assign]
        assert scan.scan_once().result == "changed"
        subjects = git(world.repo.remote, "log", "--format=%s", "main").splitlines()
        assert subjects[1] == "README"
        assert [s for s in subjects if "image build" in s] == [
            "podinfo: image build podinfo 6.5.0-rev1 -> 6.5.0-rev1-b1"
        ]


def test_scan_images_refuses_watch_and_negative_intervals(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """With --watch the catalog is a directory being edited: nothing to push to."""
    argv = ["run", "--repo", str(tmp_path), "--cluster", "prod", "--once"]
    assert main([*argv, "--scan-images", "1h", "--watch"]) == 2
    assert "--watch" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        main([*argv, "--scan-images=-5m"])
    assert stopped.value.code == 2
    assert "must not be negative" in capsys.readouterr().err


def test_the_service_scans_on_its_timer_and_reconciles_what_it_committed(
    tmp_path: Path, registry: LocalRegistry, repo_name: str
) -> None:
    """``run --scan-images``: no person, no webhook; the scan's commit starts the pass."""
    image = f"{registry.host}/{repo_name}/podinfo"
    digest = push_image(registry.url, f"{repo_name}/podinfo", "6.5.0-rev2-b1")
    overrides: dict[str, str | bytes | None] = {
        "apps/podinfo/versions/6.5.0/version.yaml": version_file(f"{image}:6.5.0-rev2")
    }
    with sandbox_world(tmp_path, overrides) as world:
        daemon = world.new_daemon(interval=3600.0, drift_interval=3600.0, scan_images=0.2)
        with running(daemon) as service:
            eventually(lambda: web_image(world) == f"{image}:6.5.0-rev2-b1@{digest}")
            assert service.scanner is not None
        scans = daemon.metrics.image_scans.labels("changed")._value.get()
        assert scans == 1
