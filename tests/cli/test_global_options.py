"""Cluster options before or after the subcommand, like kubectl; the later one wins."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli import build_parser, main
from reconciler.commands.connect import connect
from reconciler.model.changeset import ObjectRef
from tests.factories import write_catalog


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize("command", ["diff", "apply", "run"])
def test_kubeconfig_context_and_timeout_before_or_after_the_subcommand(command: str) -> None:
    extra = ["--repo", "r"] if command == "run" else []
    args = parse(command, *extra, "--cluster", "c")
    assert (args.kubeconfig, args.context, args.request_timeout) == (None, None, None)
    before = ["--kubeconfig", "a", "--context", "x", "--request-timeout", "5s"]
    args = parse(*before, command, *extra, "--cluster", "c")
    assert (args.kubeconfig, args.context, args.request_timeout) == ("a", "x", 5.0)
    args = parse(command, *extra, "--cluster", "c", "--kubeconfig", "b", "--request-timeout", "1m")
    assert (args.kubeconfig, args.context, args.request_timeout) == ("b", None, 60.0)
    args = parse(*before, command, *extra, "--cluster", "c", "--context", "y")
    assert (args.kubeconfig, args.context, args.request_timeout) == ("a", "y", 5.0)


def test_no_color_and_logging_before_or_after() -> None:
    assert parse("validate").no_color is False
    assert parse("--no-color", "validate").no_color is True
    assert parse("validate", "--no-color").no_color is True
    args = parse("--log-level", "debug", "validate", "--log-level", "error")
    assert args.log_level == "error"


def test_request_timeout_reaches_the_client(sandbox: Any) -> None:
    base = {"kubeconfig": str(sandbox.kubeconfig), "context": None}
    with connect(argparse.Namespace(**base, request_timeout=2.5)) as client:
        assert client.retry.timeout == (2.5, 2.5)
        assert client.get(ObjectRef("v1", "ConfigMap", "default", "absent")) is None
    with connect(argparse.Namespace(**base, request_timeout=0.0)) as client:
        assert client.retry.timeout is None  # kubectl: 0 means no limit
    with connect(argparse.Namespace(**base, request_timeout=None)) as client:
        assert client.retry.timeout == (5.0, 30.0)


def test_diff_accepts_the_cluster_options_on_either_side(
    tmp_path: Path, sandbox: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(write_catalog(tmp_path))
    kubeconfig = str(sandbox.kubeconfig)
    assert (
        main(
            [
                "--kubeconfig",
                kubeconfig,
                "--request-timeout",
                "20s",
                "diff",
                root,
                "--cluster",
                "prod",
            ]
        )
        == 1
    )
    assert (
        main(
            [
                "diff",
                root,
                "--cluster",
                "prod",
                "--kubeconfig",
                kubeconfig,
                "--request-timeout",
                "0",
            ]
        )
        == 1
    )
    # the later one wins: a bad global file is overridden by the subcommand's
    missing = str(tmp_path / "missing")
    assert (
        main(
            ["--kubeconfig", missing, "diff", root, "--cluster", "prod", "--kubeconfig", kubeconfig]
        )
        == 1
    )
    assert (
        main(
            ["--kubeconfig", kubeconfig, "diff", root, "--cluster", "prod", "--kubeconfig", missing]
        )
        == 2
    )
    capsys.readouterr()


def test_diff_namespace_filter(
    tmp_path: Path, sandbox: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(write_catalog(tmp_path))
    cluster = ["--cluster", "prod", "--kubeconfig", str(sandbox.kubeconfig), "-o", "json"]
    capsys.readouterr()
    assert main(["diff", root, *cluster, "-n", "web"]) == 1
    diffs = json.loads(capsys.readouterr().out)
    assert diffs and {d["instance"] for d in diffs} == {"web"}
    assert main(["diff", root, *cluster, "-n", "elsewhere"]) == 0
    assert json.loads(capsys.readouterr().out) == []
