"""`reconciler rollout promote|pause|resume|status` through the real entry point and real Git."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from reconciler.catalog import load_catalog
from reconciler.cli import main
from reconciler.model.catalog import Promotion
from reconciler.model.rollout import BatchState, Replicas, RollingState, RolloutRecord
from reconciler.model.status import Phase
from reconciler.rollout import merge_plans
from reconciler.source.ledger import StatusLedger
from tests.factories import write_catalog
from tests.ledger.test_ledger import NOW, log_subjects, status
from tests.source.servers import git

WEB = """\
    apiVersion: reconciler/v1
    kind: Instance
    name: web
    app: podinfo
    channel: fast
    namespace: web
    parameters: {replicas: 5}
    # gates: promote with `reconciler rollout promote web --cluster prod`
    rollout:
      partition: 1
    """


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def gated(tmp_path: Path) -> Path:
    """A catalog whose web instance rolls podinfo 6.6.0 in 3 batches, gated after batch 1."""
    root = tmp_path / "catalog"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write_catalog(root, {"clusters/prod/instances/web.yaml": WEB})
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial catalog")
    return root


def diff_lines(repo: Path) -> list[str]:
    diff = git(repo, "show", "--format=", "HEAD")
    return [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


def gate(
    capsys: pytest.CaptureFixture[str], repo: Path, action: str, *extra: str
) -> tuple[int, str, str]:
    return run(capsys, "rollout", action, "web", "--cluster", "prod", "--repo", str(repo), *extra)


def test_promote_approves_the_next_batch_of_the_rolling_version_with_one_line(
    capsys: pytest.CaptureFixture[str], gated: Path
) -> None:
    """The partition is policy and stays; the approval names the version (channel fast: 6.6.0)."""
    code, out, _ = gate(capsys, gated, "promote")
    assert code == 0, out
    assert "prod/web: rollout promote: gated after batch 1 -> 6.6.0 approved through batch 2" in out
    assert diff_lines(gated) == ["+  promoted: {to: 6.6.0, through: 2}"]
    assert git(gated, "log", "-1", "--format=%s") == (
        "prod/web: rollout promote (gated after batch 1 -> 6.6.0 approved through batch 2)"
    )
    trailers = git(gated, "log", "-1", "--format=%(trailers:only,unfold)")
    assert "Reconciler-Instance: web" in trailers
    assert "Reconciler-Rollout-Action: promote" in trailers
    text = (gated / "clusters/prod/instances/web.yaml").read_text()
    assert "# gates: promote with" in text and "  partition: 1\n" in text
    assert git(gated, "status", "--porcelain") == ""


def test_promote_to_the_last_batch_keeps_the_partition_and_then_refuses(
    capsys: pytest.CaptureFixture[str], gated: Path
) -> None:
    assert gate(capsys, gated, "promote")[0] == 0
    code, out, _ = gate(capsys, gated, "promote", "-o", "json")
    assert code == 0
    assert json.loads(out)["to"] == "6.6.0 approved through batch 3"
    assert diff_lines(gated) == [
        "-  promoted: {to: 6.6.0, through: 2}",
        "+  promoted: {to: 6.6.0, through: 3}",
    ]
    code, _, err = gate(capsys, gated, "promote")
    assert code == 1 and "already approved through its last batch (3)" in err
    rollout = yaml.safe_load((gated / "clusters/prod/instances/web.yaml").read_text())["rollout"]
    assert rollout == {"partition": 1, "promoted": {"to": "6.6.0", "through": 3}}


def test_promote_all_approves_every_remaining_batch(
    capsys: pytest.CaptureFixture[str], gated: Path
) -> None:
    code, _, err = gate(capsys, gated, "promote", "--all")
    assert code == 0, err
    assert diff_lines(gated) == ["+  promoted: {to: 6.6.0, through: 3}"]


def test_promote_replaces_an_approval_for_another_version_in_one_line(
    capsys: pytest.CaptureFixture[str], gated: Path
) -> None:
    """The approval of the last release is inert for this one: it starts from the partition."""
    path = gated / "clusters/prod/instances/web.yaml"
    path.write_text(path.read_text() + "  promoted: {to: 6.5.0, through: 3}\n")
    git(gated, "commit", "-q", "-am", "the last release was approved through")
    assert gate(capsys, gated, "promote")[0] == 0
    assert diff_lines(gated) == [
        "-  promoted: {to: 6.5.0, through: 3}",
        "+  promoted: {to: 6.6.0, through: 2}",
    ]


def test_promote_without_a_partition_is_refused(
    capsys: pytest.CaptureFixture[str], gated: Path
) -> None:
    """A v2 file whose last promotion removed the partition: nothing to approve."""
    path = gated / "clusters/prod/instances/web.yaml"
    path.write_text(path.read_text().replace("partition: 1", "partition: null"))
    git(gated, "commit", "-q", "-am", "v2: the last promotion removed the gate")
    code, _, err = gate(capsys, gated, "promote")
    assert code == 1 and "rollout.partition is not set" in err


def test_pause_then_resume_are_one_line_commits(
    capsys: pytest.CaptureFixture[str], gated: Path
) -> None:
    assert gate(capsys, gated, "pause")[0] == 0
    assert diff_lines(gated) == ["+  paused: true"]
    code, _, err = gate(capsys, gated, "pause")
    assert code == 1 and "already paused" in err
    code, _, err = gate(capsys, gated, "promote")
    assert code == 1 and "resume it before promoting" in err
    assert gate(capsys, gated, "resume")[0] == 0
    assert diff_lines(gated) == ["-  paused: true"]
    code, _, err = gate(capsys, gated, "resume")
    assert code == 1 and "not paused" in err
    subjects = git(gated, "log", "--format=%s").splitlines()
    assert subjects[:2] == [
        "prod/web: rollout resume (paused -> running)",
        "prod/web: rollout pause (running -> paused)",
    ]


def test_pause_adds_a_flow_mapping_when_the_instance_has_no_rollout_key(
    capsys: pytest.CaptureFixture[str], gated: Path
) -> None:
    # api runs the version range: 6.6.0 has a plan in its version.yaml
    code, _, err = run(capsys, "rollout", "pause", "api", "--cluster", "prod", "--repo", str(gated))
    assert code == 0, err
    assert diff_lines(gated) == ["+rollout: {paused: true}"]


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["promote", "nope"], 1, "no such instance (instances: api, web)"),
        (["promote", "Web"], 2, "not a valid name"),
    ],
)
def test_gate_refusals_change_nothing(
    capsys: pytest.CaptureFixture[str], gated: Path, argv: list[str], code: int, message: str
) -> None:
    head = git(gated, "rev-parse", "HEAD")
    got, _, err = run(capsys, "rollout", *argv, "--cluster", "prod", "--repo", str(gated))
    assert got == code and message in err
    assert git(gated, "rev-parse", "HEAD") == head


def test_unknown_cluster_and_no_plan_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = tmp_path / "catalog"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    plain = WEB.replace("channel: fast", "channel: stable").split("    # gates")[0]
    write_catalog(root, {"clusters/prod/instances/web.yaml": plain})
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    code, _, err = gate(capsys, root, "pause")
    assert code == 1 and "has no rollout plan" in err
    code, _, err = run(capsys, "rollout", "pause", "web", "--cluster", "qa", "--repo", str(root))
    assert code == 2 and 'cluster "qa" is not in the catalog' in err


def test_a_dirty_instance_file_is_refused(capsys: pytest.CaptureFixture[str], gated: Path) -> None:
    path = gated / "clusters/prod/instances/web.yaml"
    path.write_text(path.read_text() + "suspend: false\n")
    code, _, err = gate(capsys, gated, "promote")
    assert code == 1 and "uncommitted changes" in err


RECORD = RolloutRecord(
    from_version="6.5.0",
    to_version="6.6.0",
    state=RollingState.ROLLING,
    batches=3,
    batch=2,
    batch_state=BatchState.VERIFYING,
    replicas=Replicas(desired=5, updated=3, ready=5),
    partition=2,
    started_at=NOW,
    updated_at=NOW,
    targets=(1, 3, 5),
)


def test_status_draws_batches_from_the_status_branch(
    capsys: pytest.CaptureFixture[str], empty_remote: Path
) -> None:
    ledger = StatusLedger(empty_remote.as_uri(), "prod")
    ledger.record([status(phase=Phase.PROGRESSING, rollout=RECORD)], now=NOW)
    url = empty_remote.as_uri()
    code, out, _ = run(capsys, "rollout", "status", "web", "--cluster", "prod", "--repo", url)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "prod/web: podinfo 6.5.0 -> 6.6.0  rollingInBatches"
    assert "[x] batch 1/3  1 replica " in out
    assert "[>] batch 2/3  3 replicas" in out and "in flight (batchVerifying)" in out
    assert "[ ] batch 3/3  5 replicas" in out
    assert "replicas: 3/5 updated, 5/5 ready" in out
    code, out, _ = run(
        capsys, "rollout", "status", "web", "--cluster", "prod", "--repo", url, "-o", "json"
    )
    data = json.loads(out)
    assert [b["state"] for b in data["batches"]] == ["done", "in flight", "pending"]
    assert data["rollout"]["replicas"] == {"desired": 5, "updated": 3, "ready": 5}


def test_status_shows_waiting_for_promotion_and_a_failed_rollout_exits_1(
    capsys: pytest.CaptureFixture[str], empty_remote: Path
) -> None:
    ledger = StatusLedger(empty_remote.as_uri(), "prod")
    waiting = replace(
        RECORD, state=RollingState.WAITING, batch=1, batch_state=BatchState.READY, partition=1
    )
    ledger.record([status(phase=Phase.PROGRESSING, rollout=waiting)], now=NOW)
    url = empty_remote.as_uri()
    argv = ("rollout", "status", "web", "--cluster", "prod", "--repo", url, "-o", "json")
    code, out, _ = run(capsys, *argv)
    assert [b["state"] for b in json.loads(out)["batches"]] == [
        "done",
        "waiting for promotion",
        "pending",
    ]
    code, as_yaml, _ = run(capsys, *argv[:-1], "yaml")
    assert code == 0 and yaml.safe_load(as_yaml) == json.loads(out)
    assert log_subjects(empty_remote)[0] == (
        "prod/web: rollout podinfo 6.5.0 -> 6.6.0: batch 1/3 ready, waiting for promotion"
        " (3/5 replicas)"
    )
    failed = replace(RECORD, state=RollingState.FAILED, message="batch 2 pods failing")
    ledger.record([status(phase=Phase.STALLED, reason="RolloutFailed", rollout=failed)], now=NOW)
    code, out, _ = run(capsys, *argv[:-2], "--watch", "--interval", "10ms")
    assert code == 1 and "failed (batchVerifying)" not in out and "failed" in out


def test_status_of_an_unknown_instance_names_the_recorded_ones(
    capsys: pytest.CaptureFixture[str], empty_remote: Path
) -> None:
    StatusLedger(empty_remote.as_uri(), "prod").record([status()], now=NOW)
    argv = ("rollout", "status", "db", "--cluster", "prod", "--repo", empty_remote.as_uri())
    code, _, err = run(capsys, *argv)
    assert code == 2 and 'instance "db" has no status' in err and "(recorded: web)" in err
    code, out, _ = run(capsys, *argv[:2], "web", *argv[3:])
    assert code == 0 and "no rollout recorded" in out


@pytest.mark.parametrize(
    ("promoted", "message"),
    [
        ("{to: 6.6.0}", "through"),
        ("{to: 6.6.0, through: 0}", "through"),
        ("{to: v6.6.0, through: 2}", "to"),
        ("{to: 6.6.0, through: 2, by: me}", "by"),
    ],
)
def test_a_malformed_approval_is_a_validation_error_naming_the_line(
    capsys: pytest.CaptureFixture[str], gated: Path, promoted: str, message: str
) -> None:
    path = gated / "clusters/prod/instances/web.yaml"
    path.write_text(path.read_text() + f"  promoted: {promoted}\n")
    code, out, _ = run(capsys, "validate", str(gated), "-o", "json")
    assert code == 1
    errors = [p for p in json.loads(out)["problems"] if p["severity"] == "error"]
    assert len(errors) == 1, errors
    assert errors[0]["file"] == "clusters/prod/instances/web.yaml" and errors[0]["line"] == 11
    assert "promoted" in errors[0]["message"] and message in errors[0]["message"]


def test_an_approval_loads_and_a_v2_raised_partition_still_reads_as_the_gate(
    gated: Path,
) -> None:
    path = gated / "clusters/prod/instances/web.yaml"
    text = path.read_text()
    path.write_text(text + "  promoted: {to: 6.6.0, through: 2}\n")
    instance = load_catalog(gated).clusters["prod"].instances["web"]
    assert instance.rollout is not None
    assert instance.rollout.promoted == Promotion("6.6.0", 2)
    path.write_text(text.replace("partition: 1", "partition: 2"))  # a v2 promotion's edit
    instance = load_catalog(gated).clusters["prod"].instances["web"]
    version = load_catalog(gated).apps["podinfo"].versions["6.6.0"]
    settings = merge_plans(version.rollout, instance.rollout)
    assert settings is not None and settings.promoted is None
    assert (settings.gate("6.6.0"), settings.gate("6.7.0")) == (2, 2)
