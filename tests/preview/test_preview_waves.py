"""``preview`` of a channel move in a catalog with ``waves.yaml``: the release's wave plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.preview.test_preview import REDIS, as_json, commit, edit, move_stable, preview, repo

WAVES = """\
apiVersion: reconciler/v1
kind: Waves
waves:
  - name: canary
    clusters: [staging, prod-canary]
  - name: eu
    clusters: ["prod-eu-*"]
    soak: 1h
    approval: required
  - name: rest
    clusters: ["*"]
    soak: 30m
    maxFailures: 1
"""
PLAN = "canary now: 2 clusters, 3 instances; eu after 1h soak and an approval; rest after 30m"


def web(name: str = "web") -> str:
    return (
        f"apiVersion: reconciler/v1\nkind: Instance\nname: {name}\napp: podinfo\n"
        "channel: stable\nnamespace: web\n"
    )


def fleet(tmp_path: Path, **extra: str | None) -> Path:
    files: dict[str, str | bytes | None] = {
        "waves.yaml": WAVES,
        "clusters/staging/instances/web.yaml": web(),
        "clusters/staging/instances/web2.yaml": web("web2"),
        "clusters/prod-canary/instances/web.yaml": web(),
        "clusters/prod-eu-1/instances/web.yaml": web(),
    }
    files.update(extra)
    return repo(tmp_path, files)


def test_a_channel_move_shows_its_wave_plan_in_text_markdown_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fleet(tmp_path)
    move_stable(root)
    code, out, _ = preview(capsys, root)
    assert code == 0
    assert f"\nwaves\n  podinfo 6.6.0: {PLAN}\n" in out
    code, md, _ = preview(capsys, root, "--output", "markdown")
    assert f"**Waves**\n\n- podinfo 6.6.0: {PLAN}\n" in md
    code, data = as_json(capsys, root)
    assert data["waves"] == [
        {
            "app": "podinfo",
            "version": "6.6.0",
            "plan": PLAN,
            "steps": [
                {
                    "wave": "canary",
                    "clusters": ["prod-canary", "staging"],
                    "instances": 3,
                    "now": True,
                    "soak": None,
                    "approval": False,
                },
                {
                    "wave": "eu",
                    "clusters": ["prod-eu-1"],
                    "instances": 1,
                    "now": False,
                    "soak": "1h",
                    "approval": True,
                },
                {
                    "wave": "rest",
                    "clusters": ["prod"],
                    "instances": 1,
                    "now": False,
                    "soak": "30m",
                    "approval": False,
                },
            ],
        }
    ]


def test_an_approval_already_given_is_not_waited_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fleet(tmp_path)
    with (root / "waves.yaml").open("a") as handle:
        handle.write("approvals:\n  - {app: podinfo, version: 6.6.0, wave: eu}\n")
    commit(root, "approve eu for 6.6.0 ahead")
    move_stable(root)
    _, data = as_json(capsys, root)
    assert data["waves"][0]["plan"] == (
        "canary now: 2 clusters, 3 instances; eu after 1h; rest after 30m"
    )


def test_only_changes_the_waves_hold_are_planned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fleet(tmp_path)
    # an exact pin starts at once: no wave plan for it
    edit(root, "clusters/prod-eu-1/instances/web.yaml", "channel: stable", "version: 6.6.0")
    commit(root, "pin prod-eu-1 web")
    _, data = as_json(capsys, root)
    assert data["waves"] == []
    code, out, _ = preview(capsys, root)
    assert code == 0 and "\nwaves\n" not in out


def test_a_catalog_without_waves_has_no_waves_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path)
    move_stable(root)
    _, data = as_json(capsys, root)
    assert "waves" not in data


def test_a_broken_waves_file_is_a_new_error_and_holds_the_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fleet(tmp_path)
    edit(root, "waves.yaml", "soak: 30m", "soak: soon")
    edit(root, "apps/podinfo/channels.yaml", "stable: 6.5.0", "stable: 6.6.0")
    commit(root, "move and break waves.yaml")
    code, data = as_json(capsys, root)
    assert code == 1 and data["valid"] is False
    [problem] = [p for p in data["problems"]["new"] if p["file"] == "waves.yaml"]
    assert problem["line"] == 12 and "soon" in problem["message"]
    [plan] = data["waves"]
    assert plan["steps"] == [] and plan["plan"].startswith(
        "held everywhere: waves.yaml is invalid: waves.yaml:12:"
    )


def test_an_approval_for_an_app_outside_the_change_is_no_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    approvals = "approvals:\n  - {app: redis, version: 7.2.4, wave: eu}\n"
    root = fleet(tmp_path, **{**REDIS, "waves.yaml": WAVES + approvals})
    move_stable(root)  # redis is not in the change's scope, and not loaded
    code, data = as_json(capsys, root)
    assert code == 0
    every = [p for kind in ("new", "existing", "fixed") for p in data["problems"][kind]]
    assert not [p for p in every if p["file"] == "waves.yaml"], every
    # the same approval naming an app no commit has is still said
    edit(root, "waves.yaml", "app: redis", "app: nosuch")
    commit(root, "approve an app that does not exist")
    _, data = as_json(capsys, root)
    assert [p["message"] for p in data["problems"]["new"]] == [
        'approval for app "nosuch", not in the catalog'
    ]
