"""``reconciler preview`` on real Git repositories of two commits (SPEC section 7).

Each test writes the baseline catalog of ``tests/factories.py`` (the shape the
held-out catalogs have), commits it, makes one change, commits again and
previews ``HEAD~1..HEAD`` through the command line, as a CI job runs it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli import main
from reconciler.preview import MARKER, load_scope
from tests.conftest import TEMPLATE
from tests.factories import catalog_repo, write_catalog
from tests.source.servers import head

EXPECTED = Path(__file__).parent / "expected"

SECRET = """\
apiVersion: v1
kind: Secret
metadata:
  name: ${instance.name}-token
stringData:
  token: %s
  user: admin
"""

BASE_CHANNELS = (
    "apiVersion: reconciler/v1\nkind: Channels\napp: podinfo\nchannels:\n"
    "  stable: 6.5.0\n  fast: 6.6.0\n"
)

REDIS = {
    "apps/redis/app.yaml": "apiVersion: reconciler/v1\nkind: App\nname: redis\n",
    "apps/redis/channels.yaml": (
        "apiVersion: reconciler/v1\nkind: Channels\napp: redis\nchannels:\n  stable: 7.2.4\n"
    ),
    "apps/redis/versions/7.2.4/version.yaml": (
        "apiVersion: reconciler/v1\nkind: AppVersion\napp: redis\nversion: 7.2.4\n"
        "images:\n  redis: redis:7.2.4\n"
    ),
    "apps/redis/versions/7.2.4/manifests/cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${instance.name}\n"
        "data:\n  image: ${images.redis}\n"
    ),
    "clusters/prod/instances/cache.yaml": (
        "apiVersion: reconciler/v1\nkind: Instance\nname: cache\napp: redis\n"
        "channel: stable\nnamespace: team-cache\n"
    ),
}


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def commit(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return head(root)


def repo(tmp_path: Path, overrides: dict[str, str | bytes | None] | None = None) -> Path:
    """A checkout of the catalog with ``overrides`` at one commit: a copy of the build
    ``tests.factories.catalog_repo`` keeps per catalog (its Git processes run once)."""
    source = write_catalog(tmp_path / "catalog-files", overrides)
    return catalog_repo(source, tmp_path / "repos").work


def edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text, f"{old!r} not in {rel}"
    path.write_text(text.replace(old, new))


def move_stable(root: Path) -> None:
    edit(root, "apps/podinfo/channels.yaml", "stable: 6.5.0", "stable: 6.6.0")
    commit(root, "podinfo: stable -> 6.6.0")


def preview(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> tuple[int, str, str]:
    code = main(["preview", str(root), "--base", "HEAD~1", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> tuple[int, Any]:
    code, out, _ = preview(capsys, root, "--output", "json", *argv)
    return code, json.loads(out)


def instances(data: Any) -> dict[str, dict[str, Any]]:
    return {i["instance"]: i for c in data["clusters"] for i in c["instances"]}


def test_channel_move_names_the_instance_the_selector_and_the_rollout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path)
    move_stable(root)
    code, out, _ = preview(capsys, root)
    assert code == 0
    assert "  web: 6.5.0 -> 6.6.0 via channel stable" in out
    assert "why: channel stable moved 6.5.0 -> 6.6.0" in out
    assert "~ Deployment/web/web" in out and "+ ConfigMap/web/web-config" in out
    # version 6.6.0 plans [1, 50%, 50%]; web asks for 5 replicas
    assert "Deployment/web/web: 1, 3, 5 of 5 replicas" in out
    assert "\n  api:" not in out  # a range that already chose 6.6.0 does not move
    assert "--- a/" not in out  # no diff unless asked
    code, _, _ = preview(capsys, root, "--exit-code")
    assert code == 3


def test_only_the_moved_app_is_loaded_and_planned(tmp_path: Path) -> None:
    root = repo(tmp_path, dict(REDIS))
    move_stable(root)
    scope = load_scope(root, "HEAD~1", "HEAD", tmp_path / "work")
    assert set(scope.base.catalog.apps) == {"podinfo"} == set(scope.head.catalog.apps)
    assert scope.instances == {("prod", "web"), ("prod", "api")}
    assert set(scope.base.catalog.clusters["prod"].instances) == {"web", "api", "cache"}
    assert "redis" in scope.head.app_dirs


def test_instance_added_and_removed_with_the_objects_it_deletes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path, dict(REDIS))
    (root / "clusters/prod/instances/api.yaml").unlink()
    (root / "clusters/prod/instances/extra.yaml").write_text(
        "apiVersion: reconciler/v1\nkind: Instance\nname: extra\napp: podinfo\n"
        "channel: fast\nnamespace: team-extra\n"
    )
    commit(root, "api out, extra in")
    code, out, _ = preview(capsys, root)
    assert code == 0
    assert "extra: added, installs podinfo 6.6.0 via channel fast" in out
    assert "api: removed, uninstalls podinfo 6.6.0" in out
    code, data = as_json(capsys, root)
    found = instances(data)
    assert set(found) == {"extra", "api"}
    assert found["extra"]["change"] == "added" and found["extra"]["to"] == "6.6.0"
    assert sorted(found["extra"]["objects"]["created"]) == [
        "ConfigMap/team-extra/extra-config",
        "Deployment/team-extra/extra",
    ]
    assert found["api"]["change"] == "removed" and found["api"]["from"] == "6.6.0"
    assert sorted(found["api"]["objects"]["deleted"]) == [
        "ConfigMap/team-api/api-config",
        "Deployment/team-api/api",
    ]
    _, out, _ = preview(capsys, root, "--diff")
    assert "--- a/Deployment/team-api/api" in out and "+++ b/Deployment/team-extra/extra" in out


def test_a_new_problem_fails_and_an_old_one_is_shown_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = (
        "apiVersion: reconciler/v1\nkind: Instance\nname: broken\napp: podinfo\n"
        "channel: nope\nnamespace: web\n"
    )
    root = repo(tmp_path, {"clusters/prod/instances/broken.yaml": broken})
    edit(root, "clusters/prod/instances/web.yaml", "{replicas: 5}", "{replicas: 5, colour: red}")
    commit(root, "web: an unknown parameter")
    code, data = as_json(capsys, root)
    assert code == 1 and data["valid"] is False
    new = data["problems"]["new"]
    assert [p["file"] for p in new] == ["clusters/prod/instances/web.yaml"]
    assert "colour" in new[0]["message"] and new[0]["severity"] == "error"
    old = data["problems"]["existing"]
    assert [p["file"] for p in old] == ["clusters/prod/instances/broken.yaml"]
    assert 'channel "nope"' in old[0]["message"]
    code, out, _ = preview(capsys, root)
    new_part, _, old_part = out.partition("problems already on the base (1):")
    assert "problems new on the head (1):" in new_part and "colour" in new_part
    assert "broken.yaml" in old_part and "broken.yaml" not in new_part

    # the old problem alone does not fail a change; removing it counts as fixed
    edit(root, "clusters/prod/instances/web.yaml", ", colour: red", "")
    (root / "clusters/prod/instances/broken.yaml").unlink()
    commit(root, "fix both")
    code, data = as_json(capsys, root)
    assert code == 0 and data["problems"]["new"] == []
    assert [p["file"] for p in data["problems"]["fixed"]] == [
        "clusters/prod/instances/broken.yaml",
        "clusters/prod/instances/web.yaml",
    ]


def test_existing_error_elsewhere_does_not_fail_a_valid_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path, {"apps/podinfo/channels.yaml": None})
    edit(root, "clusters/prod/instances/api.yaml", "team-api", "team-api2")
    commit(root, "api: new namespace")
    code, data = as_json(capsys, root)
    # web follows a channel of an app without channels.yaml: an error at both commits
    assert code == 0
    assert [p["file"] for p in data["problems"]["existing"]] == ["clusters/prod/instances/web.yaml"]
    assert instances(data)["api"]["change"] == "objects"


def test_secret_values_are_masked_in_the_diff(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(
        tmp_path,
        {
            "apps/podinfo/versions/6.5.0/manifests/secret.yaml": SECRET % "old-s3cr3t",
            "apps/podinfo/versions/6.6.0/manifests/secret.yaml": SECRET % "new-s3cr3t",
        },
    )
    move_stable(root)
    for output in ("text", "markdown", "json"):
        code, out, _ = preview(capsys, root, "--diff", "--output", output)
        assert code == 0
        assert "s3cr3t" not in out
        assert "admin" not in out  # unchanged values are masked too
    _, out, _ = preview(capsys, root, "--diff")
    lines = [line.removeprefix("    ") for line in out.splitlines()]
    assert "-  token: '***'" in lines and "+  token: '*** (changed)'" in lines
    assert "   user: '***'" in lines
    assert "+        image: ghcr.io/stefanprodan/podinfo:6.6.0" in lines


def test_markdown_comment_matches_the_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path)
    move_stable(root)
    (root / "clusters/prod/instances/extra.yaml").write_text(
        "apiVersion: reconciler/v1\nkind: Instance\nname: extra\napp: podinfo\n"
        "channel: fast\nnamespace: team-extra\nparameters: {replicas: 1, colour: red}\n"
    )
    commit(root, "extra")
    code = main(["preview", "--repo", str(root), "--base", "HEAD~2", "--output", "markdown"])
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith(MARKER + "\n")
    base, head = git(root, "rev-parse", "HEAD~2")[:12], git(root, "rev-parse", "HEAD")[:12]
    normalized = out.replace(base, "BASE").replace(head, "HEAD")
    if os.environ.get("UPDATE_SNAPSHOTS"):
        (EXPECTED / "channel-move.md").write_text(normalized)
    assert normalized == (EXPECTED / "channel-move.md").read_text()


def test_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = repo(tmp_path)
    move_stable(root)
    code, data = as_json(capsys, root)
    assert code == 0
    assert set(data) == {"base", "head", "valid", "changes", "clusters", "problems", "warnings"}
    assert data["base"]["rev"] == "HEAD~1" and re.fullmatch("[0-9a-f]{40}", data["base"]["commit"])
    assert data["head"]["commit"] == git(root, "rev-parse", "HEAD")
    assert data["valid"] is True and data["changes"] is True
    assert [c["cluster"] for c in data["clusters"]] == ["prod"]
    web = instances(data)["web"]
    assert {k: web[k] for k in ("cluster", "app", "change", "from", "to", "via", "why")} == {
        "cluster": "prod",
        "app": "podinfo",
        "change": "version",
        "from": "6.5.0",
        "to": "6.6.0",
        "via": "channel stable",
        "why": "channel stable moved 6.5.0 -> 6.6.0",
    }
    assert web["objects"] == {
        "created": ["ConfigMap/web/web-config"],
        "changed": ["Deployment/web/web"],
        "deleted": [],
        "unchanged": 0,
    }
    assert web["rollout"]["batched"] is True and web["rollout"]["batches"] == ["1", "50%", "50%"]
    assert web["rollout"]["workloads"] == [
        {"object": "Deployment/web/web", "replicas": 5, "targets": [1, 3, 5]}
    ]
    assert web["migrations"] == []
    assert set(data["problems"]) == {"new", "existing", "fixed"}


def test_migrations_each_change_would_consider(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "catalog"
    shutil.copytree(TEMPLATE, root, ignore=shutil.ignore_patterns("migrations-example"))
    git(root, "init", "-q")
    commit(root, "template")
    edit(root, "apps/ledger/channels.yaml", "stable: 2.0.0", "stable: 2.1.0")
    commit(root, "ledger: stable -> 2.1.0")
    code, data = as_json(capsys, root, "--cluster", "prod")
    assert code == 0
    assert [c["cluster"] for c in data["clusters"]] == ["prod"]
    ledger = instances(data)["ledger"]
    assert (ledger["from"], ledger["to"]) == ("2.0.0", "2.1.0")
    assert "register-event-schemas" in {m["name"] for m in ledger["migrations"]}
    assert all(m["version"] == "2.1.0" for m in ledger["migrations"])


def test_a_change_outside_the_catalog_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path)
    (root / "README.md").write_text("# catalog\n")
    commit(root, "docs")
    code, out, _ = preview(capsys, root, "--exit-code")
    assert code == 0 and "no instance changes" in out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("--base", "no-such-branch"), "--base no-such-branch"),
        (("--base", "HEAD~1", "--head", "deadbeef"), "--head deadbeef"),
        (("--base", "HEAD~1..HEAD"), "--base HEAD~1..HEAD"),  # a range: no one commit
        (("--base", "HEAD~1", "--cluster", "mars"), 'cluster "mars"'),
    ],
)
def test_usage_errors_exit_2_and_say_which_argument(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], says: str
) -> None:
    root = repo(tmp_path)
    move_stable(root)
    code = main(["preview", str(root), *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert says in err and "Traceback" not in err


def test_not_a_git_checkout_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_catalog(tmp_path / "plain")
    assert main(["preview", str(root), "--base", "HEAD~1"]) == 2
    assert "is not the top directory of a Git checkout" in capsys.readouterr().err


def test_a_channel_moved_back_is_shown_blocked_by_the_downgrade_guard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path)
    move_stable(root)
    edit(root, "apps/podinfo/channels.yaml", "stable: 6.6.0", "stable: 6.5.0")
    commit(root, "podinfo: stable back to 6.5.0")
    code, data = as_json(capsys, root)
    assert code == 0  # the head is valid; the guard is a runtime decision
    web = instances(data)["web"]
    assert (web["from"], web["to"], web["change"]) == ("6.6.0", "6.5.0", "version")
    assert web["error"].startswith("DowngradeBlocked: ")


# ---------------------------------------------------------------- scope equals full


def _full(root: Path, rev: str, tmp: Path) -> tuple[dict[tuple[str, str], Any], list[Any]]:
    """Everything at ``rev``, the slow way: a whole checkout, loaded, planned and validated."""
    from reconciler.catalog import load_catalog
    from reconciler.daemon.plan import check_catalog, plan_cluster

    tree = tmp / rev.replace("~", "-")
    git(root, "worktree", "add", "-q", "--detach", str(tree), rev)
    catalog = load_catalog(tree)
    plans = {
        (c, p.name): (p.resolution.version, p.objects, p.reason)
        for c in catalog.clusters
        for p in plan_cluster(catalog, c)
    }
    problems = [(p.file, p.severity.value, p.message) for p in check_catalog(catalog)]
    return plans, problems


EDITS: dict[str, dict[str, str | None]] = {
    "channel move": {"apps/podinfo/channels.yaml": BASE_CHANNELS.replace("6.5.0", "6.6.0")},
    "new redis version in a range": {
        "apps/redis/versions/7.4.0/version.yaml": (
            "apiVersion: reconciler/v1\nkind: AppVersion\napp: redis\nversion: 7.4.0\n"
            "images:\n  redis: redis:7.4.0\n"
        ),
        "apps/redis/versions/7.4.0/manifests/cm.yaml": REDIS[
            "apps/redis/versions/7.2.4/manifests/cm.yaml"
        ],
    },
    "instance switches app": {
        "clusters/prod/instances/cache.yaml": REDIS["clusters/prod/instances/cache.yaml"]
        .replace("app: redis", "app: podinfo")
        .replace("team-cache", "team-cache"),
    },
    "cluster limits tightened": {
        "clusters/prod/cluster.yaml": (
            "apiVersion: reconciler/v1\nkind: Cluster\nname: prod\n"
            'allowedNamespaces: [web, "team-api"]\nallowClusterScoped: false\n'
        ),
    },
    "app deleted": {path: None for path in REDIS if path.startswith("apps/redis/")},
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_scoped_preview_agrees_with_rendering_and_validating_both_commits_in_full(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    files = dict(REDIS)
    files["clusters/prod/instances/cache.yaml"] = files[
        "clusters/prod/instances/cache.yaml"
    ].replace("channel: stable", 'version: ">=7.0.0"')
    root = repo(tmp_path, files)
    for rel, content in EDITS[name].items():
        if content is None:
            (root / rel).unlink()
        else:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(content)
    commit(root, name)
    before, base_problems = _full(root, "HEAD~1", tmp_path)
    after, head_problems = _full(root, "HEAD", tmp_path)
    differ = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    _, data = as_json(capsys, root)
    assert {("prod", i) for i in instances(data)} == differ
    new = [(p["file"], p["severity"], p["message"]) for p in data["problems"]["new"]]
    assert sorted(new) == sorted(set(head_problems) - set(base_problems))
    fixed = [(p["file"], p["severity"], p["message"]) for p in data["problems"]["fixed"]]
    assert sorted(fixed) == sorted(set(base_problems) - set(head_problems))


def test_removing_every_instance_warns_that_the_cluster_guard_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path)
    for name in ("web", "api"):
        (root / f"clusters/prod/instances/{name}.yaml").unlink()
    commit(root, "empty prod")
    code, data = as_json(capsys, root)
    assert code == 0
    assert {i["change"] for i in instances(data).values()} == {"removed"}
    assert len(data["warnings"]) == 1 and "PruneRefused" in data["warnings"][0]


def test_cluster_filter_keeps_other_clusters_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    staging = {
        "clusters/staging/instances/web.yaml": (
            "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\n"
            "channel: stable\nnamespace: web\n"
        )
    }
    root = repo(tmp_path, staging)
    move_stable(root)
    _, data = as_json(capsys, root)
    assert [(c["cluster"], [i["instance"] for i in c["instances"]]) for c in data["clusters"]] == [
        ("prod", ["web"]),
        ("staging", ["web"]),
    ]
    _, data = as_json(capsys, root, "--cluster", "staging")
    assert [c["cluster"] for c in data["clusters"]] == ["staging"]
    _, data = as_json(capsys, root, "--cluster", "staging,prod")
    assert [c["cluster"] for c in data["clusters"]] == ["prod", "staging"]


# ---------------------------------------------------------------- image builds (SPEC 8)

D5, D6 = "sha256:" + "5" * 64, "sha256:" + "6" * 64
PINNED_650 = {
    "apps/podinfo/versions/6.5.0/version.yaml": (
        "apiVersion: reconciler/v1\nkind: AppVersion\napp: podinfo\nversion: 6.5.0\n"
        "images:\n  podinfo: ghcr.io/stefanprodan/podinfo:6.5.0-rev1\n"
        "parameters:\n  replicas: {default: 2}\n  message: {default: hello}\n"
        "rollout:\n  batches: [1, 50%, 50%]\n"
    ),
    "apps/podinfo/builds.yaml": (
        "apiVersion: reconciler/v1\nkind: ImageBuilds\napp: podinfo\nbuilds:\n"
        f"  6.5.0:\n    podinfo: {{tag: 6.5.0-rev1-b5.1, digest: '{D5}'}}\n"
    ),
}


def test_a_new_build_shows_per_instance_with_its_rollout_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path, dict(PINNED_650))
    edit(root, "apps/podinfo/builds.yaml", "b5.1", "b6.1")
    edit(root, "apps/podinfo/builds.yaml", D5, D6)
    commit(root, "podinfo 6.5.0: rebuild b6.1")
    code, out, _ = preview(capsys, root)
    assert code == 0, out
    assert "  web: 6.5.0 builds podinfo 6.5.0-rev1-b5.1 -> 6.5.0-rev1-b6.1\n" in out
    assert "1 new build(s)" in out
    assert "rollout: in batches [1, 50%, 50%] (plan from the version)" in out
    assert "Deployment/web/web: 1, 3, 5 of 5 replicas" in out
    assert "api:" not in out  # api runs 6.6.0, which has no builds
    _, md = preview(capsys, root, "--output", "markdown")[:2]
    assert "| prod | web | 6.5.0 builds podinfo 6.5.0-rev1-b5.1 -> 6.5.0-rev1-b6.1 | 1 |" in md
    assert "- build `podinfo`: `6.5.0-rev1-b5.1` -> `6.5.0-rev1-b6.1`" in md
    _, data = as_json(capsys, root)
    web = instances(data)["web"]
    assert web["change"] == "builds" and (web["from"], web["to"]) == ("6.5.0", "6.5.0")
    assert web["builds"] == [
        {"image": "podinfo", "from": "6.5.0-rev1-b5.1", "to": "6.5.0-rev1-b6.1"}
    ]
    assert web["rollout"]["batched"] and web["rollout"]["workloads"][0]["targets"] == [1, 3, 5]


def test_a_first_pin_shows_the_intermediate_tag_it_replaces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path, {**PINNED_650, "apps/podinfo/builds.yaml": None})
    (root / "apps/podinfo/builds.yaml").write_text(PINNED_650["apps/podinfo/builds.yaml"])
    commit(root, "pin podinfo 6.5.0")
    code, out, _ = preview(capsys, root)
    assert code == 0 and "  web: 6.5.0 builds podinfo 6.5.0-rev1 -> 6.5.0-rev1-b5.1\n" in out
