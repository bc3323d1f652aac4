"""``reconciler images scan|verify`` against a real registry, committing to a real Git repo."""

from __future__ import annotations

import json
import socket
import subprocess
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest

from reconciler.cli import main
from reconciler.registry import RegistryClient
from reconciler.registry.local import FaultProxy, LocalRegistry, delete_manifest, push_image
from reconciler.registry.scan import scan_catalog
from reconciler.source import commit_builds
from tests.registry.conftest import FAST

Answer = tuple[int, dict[str, str], bytes] | None


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


def _version(app: str, version: str, images: dict[str, str], yanked: bool = False) -> str:
    lines = [
        "apiVersion: reconciler/v1",
        "kind: AppVersion",
        f"app: {app}",
        f"version: {version}",
        "images:",
        *(f"  {name}: {ref}" for name, ref in images.items()),
    ]
    if yanked:
        lines.append("yanked: true")
    return "\n".join(lines) + "\n"


def make_catalog(root: Path, host: str, repo: str) -> Path:
    files = {
        "apps/shop/app.yaml": "apiVersion: reconciler/v1\nkind: App\nname: shop\n",
        "apps/shop/channels.yaml": (
            "apiVersion: reconciler/v1\nkind: Channels\napp: shop\nchannels:\n  stable: 2.6.2\n"
        ),
        "apps/shop/versions/2.6.2/version.yaml": _version(
            "shop",
            "2.6.2",
            {"web": f"{host}/{repo}/web:2.6.2-rev1", "worker": f"{host}/{repo}/worker:2.6.2-rev1"},
        ),
        "apps/shop/versions/2.6.1/version.yaml": _version(
            "shop", "2.6.1", {"web": f"{host}/{repo}/web:2.6.1-rev1"}, yanked=True
        ),
    }
    for rel, text in files.items():
        manifest = root / rel.rsplit("/", 1)[0] / "manifests" / "cm.yaml"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        if rel.endswith("version.yaml"):
            manifest.parent.mkdir(parents=True, exist_ok=True)
            manifest.write_text(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${instance.name}\n"
                "data:\n  image: ${images.web}\n"
            )
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "catalog")
    return root


@pytest.fixture
def shop(tmp_path: Path, registry: LocalRegistry, repo_name: str) -> Path:
    return make_catalog(tmp_path / "catalog", registry.host, repo_name)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def trailers(repo: Path, rev: str = "HEAD") -> list[str]:
    text = git(repo, "log", "-1", "--format=%(trailers:only,unfold)", rev)
    return [line for line in text.splitlines() if line]


def test_scan_pins_the_newest_build_and_commits_once_per_app(
    capsys: pytest.CaptureFixture[str], shop: Path, registry: LocalRegistry, repo_name: str
) -> None:
    web, worker = f"{repo_name}/web", f"{repo_name}/worker"
    push_image(registry.url, web, "2.6.2-rev1")  # the intermediate tag itself is no build
    push_image(registry.url, web, "2.6.2-rev1-b5.9")
    b510 = push_image(registry.url, web, "2.6.2-rev1-b5.10")  # numerically newer than b5.9
    push_image(registry.url, web, "2.6.2-rev10-b99")  # another intermediate tag
    push_image(registry.url, web, "2.6.2-rev1-bogus")  # breaks the rule: a warning
    push_image(registry.url, web, "2.6.1-rev1-b9")  # of a yanked version: not scanned
    w1 = push_image(registry.url, worker, "2.6.2-rev1-b1")

    code, out, err = run(capsys, "images", "scan", "--repo", str(shop))
    assert code == 0, err
    assert err == (
        f"warning: {registry.host}/{web}: tag '2.6.2-rev1-bogus' is not a build of 2.6.2-rev1 "
        "(<intermediate>-b<number>[.<number>...]); ignored\n"
    )
    assert git(shop, "log", "-1", "--format=%s") == (
        "shop: image builds web 2.6.2-rev1 -> 2.6.2-rev1-b5.10, worker 2.6.2-rev1 -> 2.6.2-rev1-b1"
    )
    assert trailers(shop) == [
        "Reconciler-App: shop",
        "Reconciler-Image: web",
        "Reconciler-From: 2.6.2-rev1",
        "Reconciler-To: 2.6.2-rev1-b5.10",
        f"Reconciler-Digest: {b510}",
        "Reconciler-Image: worker",
        "Reconciler-From: 2.6.2-rev1",
        "Reconciler-To: 2.6.2-rev1-b1",
        f"Reconciler-Digest: {w1}",
    ]
    text = (shop / "apps/shop/builds.yaml").read_text()
    assert text.startswith("# Image builds of this app's versions")
    assert text.split("\n", 3)[3] == textwrap.dedent(f"""\
        kind: ImageBuilds
        app: shop
        builds:
          2.6.2:
            web:
              tag: 2.6.2-rev1-b5.10
              digest: {b510}
            worker:
              tag: 2.6.2-rev1-b1
              digest: {w1}
        """)
    assert "shop 2.6.2 web: 2.6.2-rev1 -> 2.6.2-rev1-b5.10" in out
    assert git(shop, "status", "--porcelain") == ""

    # a rebuild: one image moves; comments written by people survive the round-trip
    builds = shop / "apps/shop/builds.yaml"
    builds.write_text(builds.read_text().replace("builds:\n", "builds:  # pinned\n"))
    git(shop, "commit", "-qam", "comment")
    b6 = push_image(registry.url, web, "2.6.2-rev1-b6.1")
    code, out, _ = run(capsys, "images", "scan", str(shop))
    assert code == 0
    assert git(shop, "log", "-1", "--format=%s") == (
        "shop: image build web 2.6.2-rev1-b5.10 -> 2.6.2-rev1-b6.1"
    )
    assert trailers(shop)[1:] == [
        "Reconciler-Image: web",
        "Reconciler-From: 2.6.2-rev1-b5.10",
        "Reconciler-To: 2.6.2-rev1-b6.1",
        f"Reconciler-Digest: {b6}",
    ]
    diff = git(shop, "diff", "-U0", "HEAD~1", "HEAD", "--", "apps/shop/builds.yaml")
    assert [
        line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")
    ] == [
        "-      tag: 2.6.2-rev1-b5.10",
        f"-      digest: {b510}",
        "+      tag: 2.6.2-rev1-b6.1",
        f"+      digest: {b6}",
    ]
    assert "builds:  # pinned" in builds.read_text()

    head = git(shop, "rev-parse", "HEAD")
    code, out, _ = run(capsys, "images", "scan", str(shop), "-o", "json")
    assert code == 0 and git(shop, "rev-parse", "HEAD") == head  # nothing new: no commit
    assert json.loads(out) == {
        "images": 2,
        "changes": [],
        "warnings": [
            f"{registry.host}/{web}: tag '2.6.2-rev1-bogus' is not a build of 2.6.2-rev1 "
            "(<intermediate>-b<number>[.<number>...]); ignored"
        ],
        "commits": [],
        "branch": None,
        "pushed": False,
        "pushedTo": None,
    }


def test_scan_on_a_branch_leaves_the_checkout_alone(
    capsys: pytest.CaptureFixture[str], shop: Path, registry: LocalRegistry, repo_name: str
) -> None:
    digest = push_image(registry.url, f"{repo_name}/web", "2.6.2-rev1-b1")
    push_image(registry.url, f"{repo_name}/worker", "2.6.2-rev1-b1")
    head = git(shop, "rev-parse", "HEAD")
    code, out, err = run(capsys, "images", "scan", str(shop), "--branch", "images/scan")
    assert code == 0, err
    assert git(shop, "rev-parse", "HEAD") == head
    assert git(shop, "symbolic-ref", "--short", "HEAD") == "main"
    assert git(shop, "status", "--porcelain") == ""
    assert not (shop / "apps/shop/builds.yaml").exists()
    assert git(shop, "rev-parse", "images/scan~1") == head
    assert digest in git(shop, "show", "images/scan:apps/shop/builds.yaml")
    assert "on branch images/scan" in out
    code, _, err = run(capsys, "images", "scan", str(shop), "--branch", "images/scan")
    assert code == 2 and "the branch exists already" in err


def test_scan_with_a_registry_down_or_malformed_commits_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, registry: LocalRegistry, repo_name: str
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    catalog = make_catalog(tmp_path / "c", registry.host, repo_name)
    version = catalog / "apps/shop/versions/2.6.2/version.yaml"
    original = version.read_text()
    version.write_text(original.replace(f"{registry.host}/{repo_name}/worker", f"{dead}/x/worker"))
    git(catalog, "commit", "-qam", "worker elsewhere")
    push_image(registry.url, f"{repo_name}/web", "2.6.2-rev1-b1")  # this one would change
    head = git(catalog, "rev-parse", "HEAD")
    # every registry is asked first; one that is down fails the whole scan
    with RegistryClient(policy=FAST, sleep=lambda _: None) as c, pytest.raises(Exception) as e:
        scan_catalog(catalog, client=c)
    assert str(e.value).startswith(f"registry {dead}: listing tags of x/worker: cannot connect")

    def malformed(method: str, path: str, _: Mapping[str, str]) -> Answer:
        return (200, {}, b"<html>not a tags list</html>") if "/tags/list" in path else None

    with FaultProxy(registry.host, override=malformed) as proxy:
        version.write_text(
            original.replace(f"{registry.host}/{repo_name}/worker", f"{proxy.host}/x/worker")
        )
        git(catalog, "commit", "-qam", "worker behind a broken proxy")
        head = git(catalog, "rev-parse", "HEAD")
        code, _, err = run(capsys, "images", "scan", "--repo", str(catalog))
    assert code == 2
    assert err == (
        f"reconciler: error: registry {proxy.host}: tags of x/worker: the answer is not JSON "
        "(malformed tags response); nothing was committed\n"
    )
    assert git(catalog, "rev-parse", "HEAD") == head
    assert git(catalog, "status", "--porcelain") == ""


def test_scan_result_commits_through_source_for_the_daemon(
    shop: Path, registry: LocalRegistry, repo_name: str
) -> None:
    push_image(registry.url, f"{repo_name}/web", "2.6.2-rev1-b2")
    push_image(registry.url, f"{repo_name}/worker", "2.6.2-rev1")  # no build yet: no entry
    with RegistryClient(policy=FAST) as c:
        result = scan_catalog(shop, app="shop", client=c)
    assert [(ch.image, ch.build.tag) for a in result.changed for ch in a.changes] == [
        ("web", "2.6.2-rev1-b2")
    ]
    done = commit_builds(shop, result.file_changes())
    assert [c.commit for c in done.commits] == [git(shop, "rev-parse", "HEAD")]


def test_verify_names_each_missing_image(
    capsys: pytest.CaptureFixture[str], shop: Path, registry: LocalRegistry, repo_name: str
) -> None:
    web, worker = f"{repo_name}/web", f"{repo_name}/worker"
    push_image(registry.url, web, "2.6.2-rev1")
    push_image(registry.url, worker, "2.6.2-rev1")
    build = push_image(registry.url, web, "2.6.2-rev1-b3")
    assert run(capsys, "images", "scan", str(shop))[0] == 0
    code, out, _ = run(capsys, "images", "verify", "--repo", str(shop))
    assert (code, out) == (0, "all 3 image references resolve\n")

    # the pinned build is deleted from the registry (by digest, through the API)
    delete_manifest(registry.url, web, build)
    code, out, _ = run(capsys, "images", "verify", str(shop))
    assert code == 1
    assert out == (
        f"apps/shop/builds.yaml:8: shop 2.6.2 image web: {registry.host}/{web}:2.6.2-rev1-b3@{build} "
        "is missing\n1 of 3 image references are missing\n"
    )
    code, out, _ = run(capsys, "images", "verify", str(shop), "--app", "shop", "-o", "json")
    assert code == 1
    assert json.loads(out)["missing"] == [
        {
            "app": "shop",
            "version": "2.6.2",
            "image": "web",
            "reference": f"{registry.host}/{web}:2.6.2-rev1-b3@{build}",
            "file": "apps/shop/builds.yaml",
            "line": 8,
        }
    ]
    # an intermediate tag that vanished is named at its line in version.yaml
    delete_manifest(registry.url, worker, push_image(registry.url, worker, "2.6.2-rev1"))
    code, out, _ = run(capsys, "images", "verify", str(shop))
    assert code == 1
    assert (
        f"apps/shop/versions/2.6.2/version.yaml:7: shop 2.6.2 image worker: "
        f"{registry.host}/{worker}:2.6.2-rev1 is missing"
    ) in out.splitlines()


def test_unknown_app_is_a_usage_error(capsys: pytest.CaptureFixture[str], shop: Path) -> None:
    code, _, err = run(capsys, "images", "verify", str(shop), "--app", "nope")
    assert code == 2 and "--app nope: no such app in the catalog (apps: shop)" in err


def test_scan_push_publishes_the_current_branch_or_the_new_one(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    shop: Path,
    registry: LocalRegistry,
    repo_name: str,
) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(shop, "remote", "add", "origin", str(remote))
    git(shop, "push", "-q", "-u", "origin", "main")
    push_image(registry.url, f"{repo_name}/web", "2.6.2-rev1-b1")
    push_image(registry.url, f"{repo_name}/worker", "2.6.2-rev1")
    code, out, err = run(capsys, "images", "scan", str(shop), "--push")
    assert code == 0, err
    assert git(remote, "rev-parse", "main") == git(shop, "rev-parse", "HEAD")
    assert "pushed to origin/main" in out

    push_image(registry.url, f"{repo_name}/web", "2.6.2-rev1-b2")
    code, out, err = run(capsys, "images", "scan", str(shop), "--branch", "builds", "--push")
    assert code == 0, err
    assert git(remote, "rev-parse", "builds") == git(shop, "rev-parse", "builds")
    assert git(remote, "rev-parse", "main") == git(shop, "rev-parse", "main")
    assert git(remote, "log", "-1", "--format=%s", "builds") == (
        "shop: image build web 2.6.2-rev1-b1 -> 2.6.2-rev1-b2"
    )


def test_uncommitted_builds_file_is_refused(
    capsys: pytest.CaptureFixture[str], shop: Path, registry: LocalRegistry, repo_name: str
) -> None:
    push_image(registry.url, f"{repo_name}/web", "2.6.2-rev1-b1")
    push_image(registry.url, f"{repo_name}/worker", "2.6.2-rev1")
    (shop / "apps/shop/builds.yaml").write_text(
        "apiVersion: reconciler/v1\nkind: ImageBuilds\napp: shop\n"
    )
    code, _, err = run(capsys, "images", "scan", str(shop), "--branch", "b")
    assert code == 1
    assert "apps/shop/builds.yaml: has uncommitted changes" in err
    assert git(shop, "branch", "--list", "b") == ""


def test_scan_a_token_registry_with_credentials_from_the_environment(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    token_registry: LocalRegistry,
    repo_name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    catalog = make_catalog(tmp_path / "c", token_registry.host, repo_name)
    for image, tag in (("web", "2.6.2-rev1-b1"), ("worker", "2.6.2-rev1-b2")):
        name = f"{repo_name}/{image}"
        push_image(token_registry.url, name, tag, token=token_registry.token(name))
    head = git(catalog, "rev-parse", "HEAD")
    monkeypatch.setenv("RECONCILER_REGISTRY_USERNAME", "reader")
    monkeypatch.setenv("RECONCILER_REGISTRY_PASSWORD", "wrong")
    code, _, err = run(capsys, "images", "scan", "--repo", str(catalog))
    assert code == 2 and "credentials were refused; nothing was committed" in err
    assert "wrong" not in err
    assert git(catalog, "rev-parse", "HEAD") == head
    monkeypatch.setenv("RECONCILER_REGISTRY_PASSWORD", "s3cret-Pa55")
    monkeypatch.setenv("RECONCILER_REGISTRY_HOST", token_registry.host)
    code, _, err = run(capsys, "images", "scan", "--repo", str(catalog))
    assert code == 0, err
    assert git(catalog, "log", "-1", "--format=%s") == (
        "shop: image builds web 2.6.2-rev1 -> 2.6.2-rev1-b1, worker 2.6.2-rev1 -> 2.6.2-rev1-b2"
    )


@pytest.mark.parametrize(
    ("answered", "needle"),
    [
        (
            "sha256:../../../etc/passwd",
            "the registry answered the digest 'sha256:../../../etc/passwd', not sha256: "
            "and 64 lowercase hex digits",
        ),
        (
            "sha256:" + "ab" * 32,
            f"the registry named manifest sha256:{'ab' * 32} for it, and has no such manifest",
        ),
    ],
    ids=["malformed", "no-such-manifest"],
)
def test_scan_commits_no_digest_it_did_not_check(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    registry: LocalRegistry,
    repo_name: str,
    answered: str,
    needle: str,
) -> None:
    """Issue 28: ``sha256:../../../etc/passwd`` from a registry ended up in builds.yaml."""
    push_image(registry.url, f"{repo_name}/web", "2.6.2-rev1-b1")
    push_image(registry.url, f"{repo_name}/worker", "2.6.2-rev1-b1")

    def lying(method: str, path: str, _: Mapping[str, str]) -> Answer:
        if method == "HEAD" and path.endswith("/manifests/2.6.2-rev1-b1") and "/web/" in path:
            return 200, {"Docker-Content-Digest": answered}, b""
        return None

    with FaultProxy(registry.host, override=lying) as proxy:
        catalog = make_catalog(tmp_path / "c", proxy.host, repo_name)
        head = git(catalog, "rev-parse", "HEAD")
        code, _, err = run(capsys, "images", "scan", str(catalog))
    assert code != 0
    assert f"registry {proxy.host}:" in err and needle in err and "2.6.2-rev1-b1" in err
    assert "nothing was committed" in err
    assert git(catalog, "rev-parse", "HEAD") == head
    assert not (catalog / "apps/shop/builds.yaml").exists()
