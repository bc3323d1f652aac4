"""Command line entry point: parse arguments, call one function, map errors to exit codes.

Each subcommand is a plain function ``(args) -> int`` in ``reconciler.commands``;
it is imported only when chosen, so ``reconciler validate`` never pays for the
Kubernetes client. Exit codes (SPEC section 6): 0 success, 1 the command ran and
found problems, 2 usage or environment error.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from reconciler import __version__
from reconciler.model.errors import (
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_USAGE,
    ReconcilerError,
    UsageError,
)

DESCRIPTION = """\
GitOps for versioned apps: a catalog repository holds app versions and channel
pointers; reconciler keeps each cluster equal to it and records every step as
commits on a status branch.

Start with `reconciler demo`, or point `validate`/`resolve`/`render` at a
catalog checkout (default: the current directory)."""


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one clear line, as SPEC section 6 asks."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _output(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--output",
        "-o",
        choices=("text", "json"),
        default="text",
        help="print human-readable text (default) or JSON",
    )


def _show_secrets(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--show-secrets",
        action="store_true",
        help="print Secret data/stringData values (masked as *** by default)",
    )


def _catalog_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "catalog",
        nargs="?",
        default=".",
        metavar="CATALOG",
        help="catalog checkout (default: current directory)",
    )


def _kube_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)"
    )
    p.add_argument("--context", help="kubeconfig context to use")


def _repo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--repo", required=True, help="catalog repository: local path or Git URL (file, https, ssh)"
    )
    p.add_argument(
        "--cluster", required=True, help="cluster name (clusters/<cluster>/ in the catalog)"
    )
    p.add_argument("--status-branch", help="status branch (default: status/<cluster>)")


def duration(text: str) -> float:
    """``90``, ``90s``, ``5m``, ``1h`` or ``500ms`` as seconds (argparse type)."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    for suffix in ("ms", "s", "m", "h"):
        if text.endswith(suffix):
            number, scale = text[: -len(suffix)], units[suffix]
            break
    else:
        number, scale = text, 1.0
    try:
        value = float(number) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (e.g. 30s, 5m, 1h)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"duration {text!r} must not be negative")
    return value


def _positive_int(text: str) -> int:
    """An integer of at least 1 (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _apply_option_args(p: argparse.ArgumentParser) -> None:
    """Options of the apply step, shared by ``apply`` and ``run``."""
    p.add_argument(
        "--max-requests-in-flight",
        type=_positive_int,
        metavar="N",
        help="API requests in flight at once: independent instances are applied "
        "concurrently within this budget, 1 applies them one at a time (default 8; "
        "the API server's 429 answers are waited out as their Retry-After says)",
    )
    p.add_argument(
        "--force-conflicts",
        action="store_true",
        help="take over fields owned by another field manager",
    )
    p.add_argument(
        "--allow-empty-prune",
        action="store_true",
        help="let an instance that renders no objects delete all it had "
        "(default: it keeps them and is Stalled/EmptyRender; or set allowEmptyPrune: true)",
    )
    p.add_argument(
        "--allow-mass-prune",
        action="store_true",
        help="let one commit uninstall more instances than cluster.yaml "
        "prune.maxRemovedInstances allows (default: at most half, never all)",
    )


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--branch", help="catalog branch to follow (default: the remote's HEAD)")
    p.add_argument(
        "--interval",
        type=duration,
        default=60.0,
        help="poll the catalog this often, with 10%% jitter (default 60s)",
    )
    p.add_argument(
        "--drift-interval",
        type=duration,
        default=300.0,
        help="re-check the cluster this often even if Git did not move (default 5m)",
    )
    p.add_argument(
        "--health-timeout",
        type=duration,
        default=120.0,
        help="an instance whose objects are not healthy this long after a change is "
        "Failed/HealthCheckFailed; until then it is Progressing and looked at again every "
        "second, and no pass waits for it (default 2m)",
    )
    p.add_argument(
        "--health-grace",
        type=duration,
        default=2.0,  # daemon.healthwatch.DEFAULT_HEALTH_GRACE (imported lazily)
        help="how long one pass polls health in total before recording what it saw, so a "
        "change that is ready within seconds makes one status commit (default 2s; with "
        "--once a pass waits up to --health-timeout instead)",
    )
    p.add_argument(
        "--watch",
        action="store_true",
        help="--repo is a local checkout: reconcile its files on every save",
    )
    _apply_option_args(p)
    p.add_argument(
        "--verify-signatures",
        action="append",
        default=[],
        metavar="KEYFILE",
        help="only accept catalog commits signed by a key in KEYFILE (GPG public "
        "key or SSH allowed-signers file; repeatable)",
    )
    p.add_argument(
        "--leader-elect",
        action="store_true",
        help="run as one of several replicas; only the Lease holder acts",
    )
    p.add_argument(
        "--leader-elect-namespace",
        default="reconciler-system",
        help="namespace of the leader Lease (default reconciler-system)",
    )
    p.add_argument("--lease-name", help="leader Lease name (default reconciler-<cluster>)")
    p.add_argument(
        "--metrics-address",
        default="",
        help="serve /metrics, /healthz, /readyz and webhooks here, e.g. :8080",
    )
    p.add_argument(
        "--webhook-secret-file",
        metavar="FILE",
        help="shared secret for webhook signatures (or $RECONCILER_WEBHOOK_SECRET)",
    )


Handler = Callable[[argparse.Namespace], int]

# subcommand -> "module:function" inside reconciler.commands
COMMANDS: dict[str, str] = {
    "validate": "catalog:validate_command",
    "resolve": "catalog:resolve_command",
    "render": "catalog:render_command",
    "diff": "cluster:diff_command",
    "apply": "cluster:apply_command",
    "run": "daemon:run_command",
    "status": "ledger:status_command",
    "history": "ledger:history_command",
    "migrations": "ledger:migrations_command",
    "channel set": "ledger:channel_set_command",
    "rollout promote": "rollout:rollout_gate_command",
    "rollout pause": "rollout:rollout_gate_command",
    "rollout resume": "rollout:rollout_gate_command",
    "rollout status": "rollout:rollout_status_command",
    "sandbox": "sandbox:sandbox_command",
    "demo": "demo:demo_command",
}


def _logging_options() -> argparse.ArgumentParser:
    """``--log-level``/``--log-format``, also accepted after the subcommand.

    SUPPRESS as default: given after the subcommand they override the global
    ones, absent they leave the global defaults in place.
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--log-level",
        default=argparse.SUPPRESS,
        choices=("debug", "info", "warning", "error"),
        help="log verbosity",
    )
    common.add_argument(
        "--log-format",
        default=argparse.SUPPRESS,
        choices=("text", "json"),
        help="log line format (json carries cluster and instance fields)",
    )
    return common


_LOGGING = _logging_options()


def _subcommand(sub: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, parents=[_LOGGING], **kwargs)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="reconciler",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"reconciler {__version__}")
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=("debug", "info", "warning", "error"),
        help="log verbosity",
    )
    parser.add_argument(
        "--log-format",
        default="text",
        choices=("text", "json"),
        help="log line format (json carries cluster and instance fields)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = _subcommand(
        sub,
        "validate",
        help="lint a catalog checkout",
        description="Check every file of a catalog and report all problems with file and line.",
    )
    _catalog_arg(p)
    _output(p)

    p = _subcommand(
        sub,
        "resolve",
        help="chosen version per instance",
        description="Choose the version each instance of a cluster should run.",
    )
    _catalog_arg(p)
    p.add_argument("--cluster", required=True, help="cluster name")
    p.add_argument(
        "--explain",
        action="store_true",
        help="list every candidate version and why it was kept or dropped",
    )
    p.add_argument(
        "--deployed",
        action="append",
        default=[],
        metavar="INSTANCE=VERSION",
        help="treat INSTANCE as running VERSION (checks downgrade and upgrade paths)",
    )
    _output(p)

    p = _subcommand(
        sub,
        "render",
        help="rendered manifests",
        description="Render the Kubernetes objects of a cluster's instances.",
    )
    _catalog_arg(p)
    p.add_argument("--cluster", required=True, help="cluster name")
    p.add_argument("--instance", help="render only this instance")
    _show_secrets(p)
    _output(p)

    p = _subcommand(
        sub,
        "diff",
        help="exit 1 when the cluster differs",
        description="Show how the cluster differs from the catalog (unified diff per object).",
    )
    _catalog_arg(p)
    p.add_argument("--cluster", required=True, help="cluster name")
    _show_secrets(p)
    _kube_args(p)
    _output(p)

    p = _subcommand(
        sub,
        "apply",
        help="one reconcile pass, then exit",
        description="Apply every instance of the cluster once and print what changed.",
    )
    _catalog_arg(p)
    p.add_argument("--cluster", required=True, help="cluster name")
    _apply_option_args(p)
    _kube_args(p)
    _output(p)

    p = _subcommand(
        sub,
        "run",
        help="the daemon (--once: one pass, then exit)",
        description="Keep a cluster equal to the catalog and record status in Git.",
    )
    _repo_args(p)
    p.add_argument("--once", action="store_true", help="do one pass and exit (0 when all Ready)")
    _run_args(p)
    _kube_args(p)
    _output(p)

    p = _subcommand(
        sub,
        "status",
        help="current status from the status branch",
        description="Show each instance's recorded status from the status branch.",
    )
    _repo_args(p)
    _output(p)

    p = _subcommand(
        sub,
        "history",
        help="status changes from commit history",
        description="Show status changes recorded as commits on the status branch.",
    )
    _repo_args(p)
    p.add_argument("instance", nargs="?", help="only this instance")
    p.add_argument("--limit", type=int, default=0, help="show at most N entries (0: all)")
    _output(p)

    p = _subcommand(
        sub,
        "migrations",
        help="the migration ledger from the status branch",
        description=(
            "List each instance's recorded migration runs (name, version that shipped it, "
            "phase, outcome, run and check durations) from the status branch."
        ),
    )
    _repo_args(p)
    p.add_argument("instance", nargs="?", help="only this instance")
    _output(p)

    p = _subcommand(
        sub,
        "channel",
        help="channel pointer commands",
        description="Move channel pointers with one-line commits.",
    )
    csub = p.add_subparsers(dest="channel_command", metavar="SUBCOMMAND", parser_class=_Parser)
    cs = _subcommand(
        csub,
        "set",
        help="commit a channel move",
        description="Point APP's CHANNEL at VERSION and commit the one-line change.",
    )
    cs.add_argument("app")
    cs.add_argument("channel")
    cs.add_argument("version")
    cs.add_argument("--repo", default=".", help="catalog checkout (default: current directory)")
    cs.add_argument("--force", action="store_true", help="allow moving the channel backwards")
    cs.add_argument("--push", action="store_true", help="push the commit to the upstream remote")
    _output(cs)

    _rollout_parser(sub)

    p = _subcommand(
        sub,
        "sandbox",
        help="local Kubernetes API for trying and testing",
        description="Serve a local Kubernetes API on loopback until SIGINT/SIGTERM.",
    )
    p.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument(
        "--write-kubeconfig", metavar="FILE", help="write a kubeconfig for kubectl and clients"
    )
    p.add_argument(
        "--controller-delay",
        type=float,
        default=0.2,
        metavar="SECONDS",
        help="seconds a simulated controller takes to react to a change (default 0.2)",
    )
    p.add_argument(
        "--pod-start-delay",
        type=float,
        metavar="SECONDS",
        help="seconds from scheduling until a pod's containers run (default: --controller-delay)",
    )
    p.add_argument(
        "--job-duration",
        type=float,
        metavar="SECONDS",
        help="seconds a Job's container runs before it exits (default: --controller-delay)",
    )
    p.add_argument(
        "--ready-delay",
        action="append",
        metavar="GLOB=SECONDS",
        help="containers whose image matches GLOB become Ready SECONDS after they start "
        "(repeatable; others are Ready at once)",
    )
    p.add_argument(
        "--nodes",
        type=int,
        default=3,
        metavar="N",
        help="simulated nodes (DaemonSets run one pod on each; default 3)",
    )
    p.add_argument(
        "--fail-image",
        action="append",
        metavar="GLOB",
        help="containers whose image matches GLOB crash (CrashLoopBackOff) and never become ready "
        "(repeatable)",
    )
    p.add_argument(
        "--request-latency",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="delay every API answer this long, as a real API server takes 5-10 ms (default 0)",
    )
    p.add_argument(
        "--max-requests-in-flight",
        type=int,
        default=0,
        metavar="N",
        help="answer 429 with Retry-After: 1 to requests beyond N in flight, like "
        "kube-apiserver's --max-requests-inflight (default 0: no limit)",
    )

    p = _subcommand(
        sub,
        "demo",
        help="everything above on the built-in example",
        description="Run the whole story on the built-in example catalog and a sandbox.",
    )
    p.add_argument("--workdir", help="keep the demo's repositories here (default: a new temp dir)")
    p.add_argument(
        "--serve", action="store_true", help="keep the sandbox running after the story, for kubectl"
    )
    return parser


def _rollout_parser(sub: Any) -> None:
    """``rollout promote|pause|resume|status`` (SPEC section 4, "Gates are commits")."""
    p = _subcommand(
        sub,
        "rollout",
        help="batch rollout gates and progress",
        description=(
            "Gate a batch rollout with one-line commits to the instance file, "
            "and follow its progress on the status branch."
        ),
    )
    rsub = p.add_subparsers(dest="rollout_command", metavar="SUBCOMMAND", parser_class=_Parser)
    gates = {
        "promote": "raise rollout.partition by one batch (remove it at the last batch)",
        "pause": "set rollout.paused: true (no further batch starts)",
        "resume": "remove rollout.paused (the rollout continues)",
    }
    for action, text in gates.items():
        g = _subcommand(
            rsub,
            action,
            help=text,
            description=(
                f"Edit clusters/CLUSTER/instances/INSTANCE.yaml to {text.split(' (')[0]}, "
                "as a one-line commit with trailers Reconciler-Instance and "
                "Reconciler-Rollout-Action. The daemon's next pass picks it up."
            ),
        )
        g.add_argument("instance")
        g.add_argument("--cluster", required=True, help="cluster of the instance")
        g.add_argument("--repo", default=".", help="catalog checkout (default: current directory)")
        g.add_argument("--push", action="store_true", help="push the commit to the upstream remote")
        _output(g)
    st = _subcommand(
        rsub,
        "status",
        help="show a rollout's batches from the status branch",
        description=(
            "Draw INSTANCE's rollout plan as a progress view (batches done, in flight, "
            "waiting for promotion; replicas updated/ready), read from Git only. "
            "Exit 1 when the rollout failed or rolled back."
        ),
    )
    st.add_argument("instance")
    _repo_args(st)
    st.add_argument(
        "--watch", action="store_true", help="follow the rollout until it ends (Ctrl-C stops)"
    )
    st.add_argument(
        "--interval",
        type=duration,
        default=2.0,
        metavar="DURATION",
        help="how often --watch re-reads the status branch (default 2s)",
    )
    _output(st)


def _handler(args: argparse.Namespace) -> Handler:
    name = args.command
    if name == "rollout":
        if args.rollout_command is None:
            raise UsageError("rollout: missing subcommand (try: reconciler rollout --help)")
        name = f"rollout {args.rollout_command}"
    if name == "channel":
        if args.channel_command is None:
            raise UsageError("channel: missing subcommand (try: reconciler channel set --help)")
        name = f"channel {args.channel_command}"
    module, func = COMMANDS[name].split(":")
    handler: Handler = getattr(importlib.import_module(f"reconciler.commands.{module}"), func)
    return handler


def _configure_logging(level: str, fmt: str) -> None:
    from reconciler.daemon.logs import configure_logging

    configure_logging(level=level, fmt=fmt)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        _configure_logging(args.log_level, args.log_format)
        return _handler(args)(args)
    except UsageError as e:
        print(f"reconciler: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ReconcilerError as e:
        print(f"reconciler: {e}", file=sys.stderr)
        return EXIT_PROBLEMS
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    finally:
        logging.shutdown()
