"""``reconciler run --shards``: bad combinations are usage errors (exit 2) naming the fix.

Each is refused before any connection is made, so no cluster is needed.
"""

from __future__ import annotations

import pytest

from reconciler.cli import build_parser, main
from reconciler.commands.daemon import settings_from_args

BASE = ["run", "--repo", "/nowhere/catalog.git", "--cluster", "prod", "--kubeconfig", "/nowhere"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--shards", "0"], "--shards must be at least 1 (got 0)"),
        (["--shards", "-2"], "--shards must be at least 1 (got -2)"),
        (["--shards", "5000"], "--shards must be between 1 and 1000 (got 5000)"),
        (["--shards", "3", "--leader-elect"], "--shards and --leader-elect exclude each other"),
        (["--shards", "3", "--once"], "--shards needs the daemon"),
        (["--shards", "three"], "invalid int value: 'three'"),
        (
            ["--shards", "3", "--lease-duration", "5s", "--renew-deadline", "10s"],
            "timings must satisfy",
        ),
    ],
)
def test_bad_shard_options_exit_2_with_a_clear_message(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main([*BASE, *extra])
    except SystemExit as e:  # argparse's own errors
        code = int(e.code or 0)
    err = capsys.readouterr().err
    assert code == 2
    assert message in err


def test_shard_settings_from_the_command_line() -> None:
    args = build_parser().parse_args(
        [
            *BASE,
            "--shards",
            "4",
            "--identity",
            "pod-1",
            "--lease-name",
            "shop",
            "--lease-duration",
            "20s",
        ]
    )
    settings = settings_from_args(args)
    assert (settings.shards, settings.identity, settings.lease_name) == (4, "pod-1", "shop")
    assert (settings.lease_duration, settings.renew_deadline, settings.retry_period) == (
        20.0,
        10.0,
        2.0,
    )
    unsharded = settings_from_args(build_parser().parse_args(BASE))
    assert unsharded.shards == 0 and not unsharded.leader_elect
    assert unsharded.lease_name == "reconciler-prod"


def test_help_explains_shards(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--shards N" in out
    assert "stable hash" in out and "Replaces --leader-elect" in out


def test_max_look_from_the_command_line() -> None:
    """How soon a rollout in flight is looked at again (a fast cluster, or a test's sandbox)."""
    assert settings_from_args(build_parser().parse_args(BASE)).max_look == 2.0
    args = build_parser().parse_args([*BASE, "--max-look", "500ms"])
    assert settings_from_args(args).max_look == 0.5
