"""Command line entry point: parse arguments, call one function, map errors to exit codes.

Each subcommand is a plain function ``(args) -> int`` in ``reconciler.commands``;
it is imported only when chosen, so ``reconciler validate`` never pays for the
Kubernetes client. Exit codes (SPEC section 6): 0 success, 1 the command ran and
found problems, 2 usage or environment error.
"""

from __future__ import annotations

import argparse
import copy
import functools
import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from reconciler import __version__
from reconciler.commands.output import TABLE_FORMATS, TEXT_FORMATS, printable_streams
from reconciler.model.errors import (
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_USAGE,
    ReconcilerError,
    UsageError,
)
from reconciler.model.gcpause import gc_paused

DESCRIPTION = """\
GitOps for versioned apps: a catalog repository holds app versions and channel
pointers; reconciler keeps each cluster equal to it and records every step as
commits on a status branch.

Start with `reconciler demo`, or point `validate`/`resolve`/`render` at a
catalog checkout (default: the current directory)."""

EPILOG = """exit codes: 0 success, 1 the command ran and found problems (an invalid catalog,
a diff, a failed apply), 2 usage or environment error. Every command's codes:
docs/CLI.md. Options before the command name apply to it too."""


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one clear line, as SPEC section 6 asks."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _output(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--output",
        "-o",
        choices=TEXT_FORMATS,
        default="text",
        help="print human-readable text (default), JSON or YAML",
    )


def _table_output(p: argparse.ArgumentParser) -> None:
    """``-o`` for commands that print a table: kubectl's wide and name too, ``--no-headers``."""
    p.add_argument(
        "--output",
        "-o",
        choices=TABLE_FORMATS,
        default="text",
        help="text: a table (default); wide: more columns; name: one name a line; json; yaml",
    )
    p.add_argument(
        "--no-headers", action="store_true", help="print the table without its header line"
    )


def _namespace_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--namespace",
        "-n",
        help="only instances installed into this Kubernetes namespace (as their instance "
        "file says; for a status record, the file at the catalog commit it was made from)",
    )


def _show_secrets(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--show-secrets",
        action="store_true",
        help="print Secret data/stringData values (masked as *** by default)",
    )


REPO_HELP = "catalog repository: a checkout path or a Git URL (default: $RECONCILER_REPO, else .)"
CHECKOUT_HELP = "catalog checkout to commit to (default: $RECONCILER_REPO, else .)"
CLUSTER_HELP = (
    "cluster name, clusters/<cluster>/ in the catalog (default: $RECONCILER_CLUSTER, else the "
    "checkout's `reconciler config set-cluster`)"
)


def _catalog_arg(p: argparse.ArgumentParser, *, checkout: bool = False) -> None:
    """``--repo`` plus the positional ``CATALOG``, its short form (same meaning)."""
    p.add_argument(
        "catalog",
        nargs="?",
        default=None,
        metavar="CATALOG",
        help="the catalog, as with --repo (a checkout path or a Git URL)",
    )
    _repo_option(p, checkout=checkout)


def _repo_option(p: argparse.ArgumentParser, *, checkout: bool = False) -> None:
    p.add_argument("--repo", default=None, help=CHECKOUT_HELP if checkout else REPO_HELP)


def _cluster_option(p: argparse.ArgumentParser, text: str = CLUSTER_HELP) -> None:
    p.add_argument("--cluster", default=None, help=text)


def _repo_args(p: argparse.ArgumentParser) -> None:
    _repo_option(p)
    _cluster_option(p)
    p.add_argument("--status-branch", help="status branch (default: status/<cluster>)")


def _watch_args(p: argparse.ArgumentParser, what: str) -> None:
    """``--watch``/``--interval`` of the commands that follow the status branch."""
    p.add_argument("--watch", "-w", action="store_true", help=what)
    p.add_argument(
        "--interval",
        type=duration,
        default=2.0,
        metavar="DURATION",
        help="how often --watch re-reads the status branch (default 2s)",
    )


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
        "--scan-images",
        type=duration,
        default=0.0,
        metavar="INTERVAL",
        help="ask the image registries for new builds this often (e.g. 1h) and commit "
        "apps/<app>/builds.yaml to the catalog branch, as `images scan --push` does; a new "
        "build then rolls out like a new version. Off by default; needs push "
        "access to the catalog branch",
    )
    p.add_argument(
        "--prometheus-url",
        default="",
        metavar="URL",
        help="the Prometheus that rollout analyses without an address of their own query "
        "(e.g. http://prometheus.monitoring:9090); credentials from RECONCILER_PROMETHEUS_TOKEN "
        "or RECONCILER_PROMETHEUS_USERNAME/PASSWORD (or their _FILE forms), a private CA from "
        "RECONCILER_PROMETHEUS_CA_FILE",
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
        "--max-look",
        type=duration,
        default=2.0,  # daemon.loop.DaemonSettings.max_look
        help="a rollout in flight is looked at again at least this often, whatever "
        "--interval says, and the next step of a multi-step upgrade waits no longer "
        "(default 2s; never more often than every 100ms)",
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
        "--shards",
        type=int,
        metavar="N",
        help="split the cluster's instances into N shards by a stable hash of their "
        "names; every replica holds the Leases of its share of shards (about N/replicas), "
        "reconciles only their instances, and takes over the shards of a replica whose "
        "Leases expire. Replaces --leader-elect; every replica must be given the same N",
    )
    p.add_argument(
        "--leader-elect-namespace",
        default="reconciler-system",
        help="namespace of the leader Lease, or of the shard Leases with --shards "
        "(default reconciler-system)",
    )
    p.add_argument(
        "--lease-name",
        help="leader Lease name, or with --shards the prefix of the Leases "
        "<prefix>-shard-<k>-of-<N> and <prefix>-replica-<id> (default reconciler-<cluster>)",
    )
    p.add_argument(
        "--identity",
        help="this replica's name in the Leases (default: $POD_NAME or the host name, "
        "and the process id); unique per running replica",
    )
    p.add_argument(
        "--lease-duration",
        type=duration,
        default=15.0,
        help="a Lease not renewed this long is taken over by another replica (default 15s)",
    )
    p.add_argument(
        "--renew-deadline",
        type=duration,
        default=10.0,
        help="a holder that could not renew this long stops acting (default 10s)",
    )
    p.add_argument(
        "--retry-period",
        type=duration,
        default=2.0,
        help="how often Leases are renewed and free ones tried (default 2s)",
    )
    p.add_argument(
        "--metrics-address",
        default="",
        help="serve /metrics here, e.g. :8080, and also webhooks and probes unless "
        "--webhook-address / --probe-address give them addresses of their own",
    )
    p.add_argument(
        "--webhook-address",
        default="",
        help="serve /hooks/* and /reconcile only here, e.g. :8081, so the port an "
        "Ingress publishes exposes neither /metrics nor the probes (default: on --metrics-address)",
    )
    p.add_argument(
        "--probe-address",
        default="",
        help="serve /healthz and /readyz only here, e.g. :8082 (default: on --metrics-address)",
    )
    p.add_argument(
        "--webhook-secret-file",
        metavar="FILE",
        help="shared secret for webhook signatures (or $RECONCILER_WEBHOOK_SECRET)",
    )
    _commit_url_option(p)


def _commit_url_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--commit-url",
        metavar="URL",
        help="link commit ids on the status page: a base the id is appended to "
        "(https://github.com/ORG/REPO/commit/) or a template with {commit} "
        "(https://gitlab.com/ORG/REPO/-/commit/{commit}); default $RECONCILER_COMMIT_URL",
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
    "get": "get:get_command",
    "history": "ledger:history_command",
    "migrations": "ledger:migrations_command",
    "channel set": "ledger:channel_set_command",
    "rollout promote": "rollout:rollout_gate_command",
    "rollout pause": "rollout:rollout_gate_command",
    "rollout resume": "rollout:rollout_gate_command",
    "rollout status": "rollout:rollout_status_command",
    "wave approve": "waves:wave_approve_command",
    "wave status": "waves:wave_status_command",
    "rollout analyze": "analyze:rollout_analyze_command",
    "preview": "preview:preview_command",
    "report": "report:report_command",
    "sandbox": "sandbox:sandbox_command",
    "demo": "demo:demo_command",
    "version": "client:version_command",
    "reconcile": "client:reconcile_command",
    "completion": "completion:completion_command",
    "init": "init:init_command",
    "__complete": "completion:names_command",
    "config set-cluster": "defaults:config_command",
    "config unset-cluster": "defaults:config_command",
    "config get-cluster": "defaults:config_command",
    "images scan": "images:images_scan_command",
    "images verify": "images:images_verify_command",
}


def _common_options(p: argparse.ArgumentParser, *, top: bool) -> None:
    """Options every command takes, before or after the subcommand name.

    The top-level parser holds the defaults; a subcommand's copy defaults to
    SUPPRESS, so given after the subcommand it overrides the top-level value
    (the later one wins) and absent it leaves that value in place.
    """
    p.add_argument(
        "--log-level",
        default=None if top else argparse.SUPPRESS,
        choices=("debug", "info", "warning", "error"),
        help="log verbosity (default: info for the daemon, which says when it started and "
        "what each pass changed; warning for every other command)",
    )
    p.add_argument(
        "--log-format",
        default="text" if top else argparse.SUPPRESS,
        choices=("text", "json"),
        help="log line format (json carries cluster and instance fields)",
    )
    p.add_argument(
        "--no-color",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="no colour (also: the NO_COLOR environment variable; "
        "colour is only ever used on a terminal)",
    )


def _kube_options(p: argparse.ArgumentParser, *, top: bool) -> None:
    """How to reach the cluster, like kubectl; before or after the subcommand name."""
    unset = None if top else argparse.SUPPRESS
    p.add_argument(
        "--kubeconfig",
        default=unset,
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)",
    )
    p.add_argument("--context", default=unset, help="kubeconfig context to use")
    p.add_argument(
        "--request-timeout",
        type=duration,
        default=unset,
        metavar="DURATION",
        help="give up on a single API request after this long (e.g. 10s; 0: never; default 30s)",
    )


def _parent(*adders: Callable[..., None]) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    for add in adders:
        add(parent, top=False)
    return parent


_COMMON = _parent(_common_options)
_CLUSTER = _parent(_common_options, _kube_options)


def _subcommand(
    sub: Any, name: str, *, kube: bool = False, **kwargs: Any
) -> argparse.ArgumentParser:
    """A subcommand parser with the common options (and the cluster ones with ``kube``)."""
    parents = [_CLUSTER if kube else _COMMON]
    parser: argparse.ArgumentParser = sub.add_parser(name, parents=parents, **kwargs)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="reconciler",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"reconciler {__version__}")
    _common_options(parser, top=True)
    _kube_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = _subcommand(
        sub,
        "validate",
        help="lint a catalog checkout",
        description="Check every file of a catalog and report all problems with file and line.",
    )
    _catalog_arg(p)
    p.add_argument(
        "--allow-uninstalled-migrations",
        action="store_true",
        help="a python: migration that the catalog's own package declares (a pyproject.toml "
        "at its root or one directory down) but that is not installed here is a warning, "
        "not an error; a name nobody declares stays an error. For pre-commit's hook, whose "
        "environment cannot install the catalog's package; CI should install it and omit this",
    )
    _output(p)

    p = _subcommand(
        sub,
        "resolve",
        help="chosen version per instance",
        description="Choose the version each instance of a cluster should run.",
    )
    _catalog_arg(p)
    _cluster_option(p)
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
    _namespace_arg(p)
    _table_output(p)

    p = _subcommand(
        sub,
        "render",
        help="rendered manifests",
        description="Render the Kubernetes objects of a cluster's instances.",
    )
    _catalog_arg(p)
    _cluster_option(p)
    p.add_argument("--instance", help="render only this instance")
    _namespace_arg(p)
    _show_secrets(p)
    _output(p)

    p = _subcommand(
        sub,
        "diff",
        kube=True,
        help="exit 1 when the cluster differs",
        description=(
            "Show how the cluster differs from the catalog (unified diff per object). "
            "Exit codes, like kubectl diff: 0 no differences, 1 differences (or an "
            "instance that cannot be compared, named on stderr), 2 or more an error "
            "that stopped the diff (usage, unreachable cluster, refused request)."
        ),
    )
    _catalog_arg(p)
    _cluster_option(p)
    _namespace_arg(p)
    _show_secrets(p)
    _output(p)

    p = _subcommand(
        sub,
        "apply",
        kube=True,
        help="one reconcile pass, then exit",
        description=(
            "Apply every instance of the cluster once and print what changed. "
            "With --wait, then wait until every applied instance is healthy "
            "(a progress line per instance on a terminal); exit 1 if one is not."
        ),
    )
    _catalog_arg(p)
    _cluster_option(p)
    _apply_option_args(p)
    p.add_argument(
        "--wait",
        action="store_true",
        help="wait until the applied instances are healthy (Deployments rolled out, ...)",
    )
    p.add_argument(
        "--timeout",
        type=duration,
        default=300.0,
        metavar="DURATION",
        help="with --wait: give up after this long, for all instances together (default 5m)",
    )
    _output(p)

    p = _subcommand(
        sub,
        "run",
        kube=True,
        help="the daemon (--once: one pass, then exit)",
        description="Keep a cluster equal to the catalog and record status in Git.",
    )
    _repo_args(p)
    p.add_argument("--once", action="store_true", help="do one pass and exit (0 when all Ready)")
    _run_args(p)
    _table_output(p)

    p = _subcommand(
        sub,
        "status",
        help="current status from the status branch",
        description=(
            "Show each instance's recorded status from the status branch "
            "(read from Git only; no cluster access needed)."
        ),
    )
    _repo_args(p)
    _namespace_arg(p)
    _watch_args(p, "re-read the status branch and redraw when it changes (Ctrl-C stops)")
    _table_output(p)

    p = _subcommand(
        sub,
        "get",
        kube=True,
        help="one instance's live objects as a tree, with health",
        description=(
            "Show INSTANCE's live objects, read from the cluster: every object its inventory "
            "lists, with its health and the reason for anything not Current, and below each "
            "workload what its controller made (Deployment -> ReplicaSets -> Pods). Exit 0 "
            "when every listed object is Current, 1 when one is not (or the instance is not "
            "installed), 2 for an instance neither the catalog nor the cluster knows."
        ),
    )
    p.add_argument("instance", metavar="INSTANCE", help="the instance, as named in the catalog")
    _repo_option(p)
    _cluster_option(p)
    p.set_defaults(catalog=None)  # filled from --repo (a URL is read from a cached clone)
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
    _table_output(p)

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
    _namespace_arg(p)
    _table_output(p)

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
    _repo_option(cs, checkout=True)
    cs.add_argument("--force", action="store_true", help="allow moving the channel backwards")
    cs.add_argument("--push", action="store_true", help="push the commit to the upstream remote")
    _output(cs)

    _rollout_parser(sub)
    _wave_parser(sub)
    _images_parser(sub)
    _preview_parser(sub)
    _report_parser(sub)

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
        "--cron-minute",
        type=float,
        metavar="SECONDS",
        help="how long a minute of CronJob schedules lasts (default: 60; 1 runs "
        "'every minute' CronJobs every second)",
    )
    p.add_argument(
        "--job-backoff",
        type=float,
        metavar="SECONDS",
        help="a Job's first retry delay after a failed pod, doubling up to 36 times it "
        "(default: 10, as on a cluster)",
    )
    p.add_argument(
        "--pod-grace-scale",
        type=float,
        metavar="FACTOR",
        help="how long a deleted pod stays Terminating, as a multiple of its grace period "
        "(default: 1, the real 30 s unless the pod or the DELETE says otherwise; 0.01 makes "
        "it 0.3 s)",
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
        "--load-balancer-ips",
        metavar="CIDR",
        help="play a cloud's load balancer: LoadBalancer Services get an address of CIDR in "
        "status.loadBalancer.ingress (default: none, as on kind or minikube without MetalLB, "
        "where they stay <pending>)",
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
    _daemon_client_parsers(sub)
    _config_parser(sub)
    p = _subcommand(
        sub,
        "init",
        help="scaffold an empty catalog (one app, channel, cluster; CI and pre-commit)",
        description=(
            "Write the smallest catalog that passes `reconciler validate` into DIRECTORY "
            "(new or empty): one app with version 0.1.0 and one channel pointing at it, one "
            "cluster with one instance following the channel, CI for GitHub Actions and "
            "GitLab that validates and previews every change, and a pre-commit config. "
            "DIRECTORY becomes a Git repository unless it is inside one; nothing is committed."
        ),
    )
    p.add_argument("directory", metavar="DIRECTORY")
    p.add_argument("--app", default="hello", help="the app's name (default hello)")
    p.add_argument(
        "--cluster", dest="cluster", default="dev", help="the cluster's name (default dev)"
    )
    p.add_argument("--channel", default="stable", help="the channel's name (default stable)")
    return parser


def _daemon_client_parsers(sub: Any) -> None:
    """``version``, ``reconcile`` and ``completion``: small commands around the daemon."""
    p = _subcommand(
        sub,
        "version",
        help="client version (and a daemon's, with --server)",
        description=(
            "Print this reconciler's version and, with --server, the version a running "
            "daemon reports on its /version endpoint (served on every daemon port)."
        ),
    )
    p.add_argument("--server", metavar="URL", help="a daemon's HTTP address, e.g. http://host:8080")
    _output(p)

    p = _subcommand(
        sub,
        "reconcile",
        help="ask a running daemon for a pass now",
        description=(
            "Ask the daemon serving --cluster at --server for a reconcile pass now, "
            "instead of waiting for its poll interval. The request is signed with the "
            "webhook secret (HMAC-SHA256, like a generic webhook), so the daemon must "
            "run with --webhook-secret-file or $RECONCILER_WEBHOOK_SECRET."
        ),
    )
    _cluster_option(p, "cluster the daemon serves (default: as for status)")
    p.add_argument(
        "--server",
        required=True,
        metavar="URL",
        help="the daemon's webhook address (--webhook-address, else --metrics-address)",
    )
    p.add_argument(
        "--webhook-secret-file",
        metavar="FILE",
        help="the daemon's webhook secret (or $RECONCILER_WEBHOOK_SECRET)",
    )
    _output(p)

    p = _subcommand(
        sub,
        "completion",
        help="shell completion script (bash, zsh, fish)",
        description=(
            "Print a completion script for SHELL, generated from this version's commands. "
            "bash: source <(reconciler completion bash); "
            "zsh: source <(reconciler completion zsh); "
            "fish: reconciler completion fish | source"
        ),
    )
    p.add_argument("shell", choices=("bash", "zsh", "fish"))

    # hidden (no help: not listed): what the completion scripts ask for catalog names
    p = sub.add_parser("__complete", parents=[_COMMON])
    p.add_argument("kind", choices=("clusters", "instances", "apps", "channels"))
    _repo_option(p)
    p.add_argument("--cluster", dest="for_cluster", default=None)
    p.add_argument("--app", default=None)


def _images_parser(sub: Any) -> None:
    """``images scan|verify`` (SPEC section 8): image builds from the registries."""
    p = _subcommand(
        sub,
        "images",
        help="image builds: scan registries, verify images",
        description=(
            "Pin each intermediate image tag's newest build in apps/<app>/builds.yaml, and "
            "check that released images still exist. Registry credentials: "
            "RECONCILER_REGISTRY_USERNAME/PASSWORD (RECONCILER_REGISTRY_HOST limits them to "
            "those hosts) or a docker config.json; RECONCILER_REGISTRY_INSECURE lists hosts "
            "spoken to over plain HTTP (loopback always is)."
        ),
    )
    isub = p.add_subparsers(dest="images_command", metavar="SUBCOMMAND", parser_class=_Parser)
    scan = _subcommand(
        isub,
        "scan",
        help="commit the newest build of every intermediate tag",
        description=(
            "Ask each image's registry for the newest long tag (<intermediate>-b<build>) of "
            "every intermediate tag a non-yanked version names, and commit builds.yaml "
            "changes, one commit per app. Exit 0 (also when nothing changed), 2 when a "
            "registry cannot answer (then nothing is committed)."
        ),
    )
    _catalog_arg(scan, checkout=True)
    scan.add_argument("--app", help="only this app")
    scan.add_argument(
        "--push",
        action="store_true",
        help="push the commits: the current branch to its upstream; with --branch, that "
        "branch to the same remote (else origin)",
    )
    scan.add_argument(
        "--branch",
        metavar="NAME",
        help="commit on a new branch NAME from HEAD (for a pull request); the current "
        "branch and working tree are left untouched",
    )
    _output(scan)
    verify = _subcommand(
        isub,
        "verify",
        help="check that every released image still exists",
        description=(
            "HEAD every image of every non-yanked version in its registry: the tag as "
            "written and the pinned <long tag>@<digest> of builds.yaml. Exit 1 naming each "
            "missing one, 2 when a registry cannot be reached."
        ),
    )
    _catalog_arg(verify)
    verify.add_argument("--app", help="only this app")
    _output(verify)


def _preview_parser(sub: Any) -> None:
    """``preview`` (SPEC section 7): what a pull request changes, from two commits, offline."""
    p = _subcommand(
        sub,
        "preview",
        help="what a pull request changes (offline, from two commits)",
        description=(
            "Compare two commits of a catalog checkout without a cluster: per cluster, the "
            "instances whose version changes (and the selector that moved them), instances "
            "added and removed, object changes, rollout plans and migrations to consider, and "
            "validation problems new on the head. Only commits are compared: uncommitted edits "
            "are not part of a preview. Exit 0 when the head adds no error, 1 when it does, "
            "2 on usage errors, 3 with --exit-code when anything would change."
        ),
    )
    _catalog_arg(p, checkout=True)
    p.add_argument("--base", required=True, metavar="REV", help="the commit before the change")
    p.add_argument(
        "--head", default="HEAD", metavar="REV", help="the commit after it (default HEAD)"
    )
    p.add_argument("--cluster", action="append", default=[], help="only this cluster (repeatable)")
    p.add_argument(
        "--diff", action="store_true", help="unified diff of rendered objects (Secrets masked)"
    )
    p.add_argument("--exit-code", action="store_true", help="exit 3 when anything would change")
    p.add_argument(
        "--output",
        "-o",
        choices=("text", "markdown", "json", "yaml"),
        default="text",
        help="text (default), markdown (a pull-request comment), JSON or YAML",
    )


def _report_parser(sub: Any) -> None:
    """``report``: the status branches as a static HTML site (the same pages as ``/ui``)."""
    p = _subcommand(
        sub,
        "report",
        help="write the status page (HTML) from the status branches",
        description=(
            "Write a static site from the status branches: an index with a clusters x apps "
            "version matrix and a page per instance (versions over time, rollout batches, "
            "migrations). Plain HTML with inline CSS and no script: it works offline. "
            "Read from Git only; exit 1 when a status file is unreadable."
        ),
    )
    _repo_option(p)
    p.add_argument(
        "--cluster",
        action="append",
        default=[],
        help="a cluster to show (repeat or comma-separate; default: every status/* branch)",
    )
    p.add_argument("--status-branch", help="status branch of the one --cluster given")
    p.add_argument("--html", required=True, metavar="DIR", help="directory to write the site to")
    p.add_argument("--title", default="Reconciler status", help="the pages' title")
    _commit_url_option(p)
    p.add_argument(
        "--history-limit",
        type=int,
        default=1000,
        metavar="N",
        help="status commits read per cluster for the timelines (default 1000; 0: all)",
    )


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
        "promote": (
            "approve one more batch of the rollout to the version the instance goes to "
            "(rollout.promoted; the partition stays, so the next release stops there again)"
        ),
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
        _cluster_option(g)
        _repo_option(g, checkout=True)
        g.add_argument("--push", action="store_true", help="push the commit to the upstream remote")
        if action == "promote":
            g.add_argument(
                "--all",
                action="store_true",
                help="approve every remaining batch of this rollout (not of later releases)",
            )
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
    _watch_args(st, "follow the rollout until it ends (Ctrl-C stops)")
    _output(st)
    an = _subcommand(
        rsub,
        "analyze",
        help="run an instance's Prometheus analysis queries once, now",
        description=(
            "Ask Prometheus each query of INSTANCE's rollout.analysis.prometheus once, with "
            "its placeholders filled for the rollout in flight (read from the status "
            "branch) or the next one, and print each value and verdict. Records nothing. "
            "Exit 1 when a query fails or has no data."
        ),
    )
    an.add_argument("instance")
    an.add_argument("--cluster", required=True, help="cluster of the instance")
    an.add_argument("--repo", default=".", help="catalog checkout (default: current directory)")
    an.add_argument(
        "--status-repo",
        help="repository (path or Git URL) holding the status branch, when the checkout has "
        "not fetched it (default: --repo)",
    )
    an.add_argument("--status-branch", help="status branch (default: status/<cluster>)")
    an.add_argument(
        "--prometheus-url",
        default="",
        metavar="URL",
        help="the Prometheus to ask when the analysis names no address; credentials as for run",
    )
    _output(an)


def _wave_parser(sub: Any) -> None:
    """``wave approve|status``: a release through the fleet, gated by status branches."""
    p = _subcommand(
        sub,
        "wave",
        help="waves: approve a wave for a release, show a release's progress",
        description=(
            "Waves (waves.yaml at the catalog root) move a release through the clusters: "
            "a cluster starts a version once earlier waves ran it Ready for their soak. "
            "Approve a wave with a commit; see what each wave waits for."
        ),
    )
    wsub = p.add_subparsers(dest="wave_command", metavar="SUBCOMMAND", parser_class=_Parser)
    ap = _subcommand(
        wsub,
        "approve",
        help="approve a wave for one version of an app (a one-line commit)",
        description=(
            "Add {app, version, wave} to approvals in waves.yaml and commit it with trailers "
            "Reconciler-App, Reconciler-Wave and Reconciler-Version. The approval is bound "
            "to VERSION: the next release needs its own."
        ),
    )
    ap.add_argument("app")
    ap.add_argument("version")
    ap.add_argument("--wave", required=True, help="the wave to approve")
    ap.add_argument("--repo", default=".", help="catalog checkout (default: current directory)")
    ap.add_argument("--push", action="store_true", help="push the commit to the upstream remote")
    _output(ap)
    st = _subcommand(
        wsub,
        "status",
        help="show each wave's gate and clusters for a release, from Git",
        description=(
            "Per wave: its gate (open, waiting for what, halted by which clusters) and each "
            "cluster's instances of APP: the version that runs, its phase, since when. "
            "Read from the catalog branch and every status/<cluster> branch. Exit 1 when "
            "the release is halted."
        ),
    )
    st.add_argument("app")
    st.add_argument("--version", help="the release to show (default: what most instances want)")
    st.add_argument(
        "--repo", required=True, help="catalog repository: local path or Git URL (file, https, ssh)"
    )
    st.add_argument("--branch", help="catalog branch (default: the remote's default branch)")
    _output(st)


def _config_parser(sub: Any) -> None:
    """``config set-cluster|unset-cluster|get-cluster``: a checkout's default cluster."""
    p = _subcommand(
        sub,
        "config",
        help="a checkout's default cluster (like kubectl's current context)",
        description=(
            "Keep a default --cluster in the catalog checkout's own Git config "
            "(reconciler.cluster): every command run against that checkout uses it when "
            "neither --cluster nor $RECONCILER_CLUSTER is given."
        ),
    )
    csub = p.add_subparsers(dest="config_command", metavar="SUBCOMMAND", parser_class=_Parser)
    st = _subcommand(
        csub,
        "set-cluster",
        help="store the default cluster (exit 2 for a cluster the repository does not know)",
    )
    st.add_argument("name", metavar="CLUSTER")
    _repo_option(st, checkout=True)
    for action, text in (
        ("unset-cluster", "remove the default cluster"),
        ("get-cluster", "print the default cluster and where it comes from (exit 1: none)"),
    ):
        _repo_option(_subcommand(csub, action, help=text), checkout=True)


_GROUPS = ("rollout", "images", "channel", "config", "wave")


def command_name(args: argparse.Namespace) -> str:
    """The chosen command, with its subcommand (``rollout promote``); usage error if missing."""
    name: str = args.command
    if name in _GROUPS:
        sub = getattr(args, f"{name}_command")
        if sub is None:
            raise UsageError(f"{name}: missing subcommand (try: reconciler {name} --help)")
        name = f"{name} {sub}"
    return name


def _handler(name: str) -> Handler:
    """The command's handler, its module imported with the cyclic collector paused.

    Importing a command's stack (the daemon's: about 700 modules) allocates objects
    that live as long as the process, and the collector walked them again and again
    while they were being built: 12% of ``reconciler run``'s start-up CPU, 7% of
    ``reconciler sandbox``'s. Paused only for the import, and only if it was running
    (a caller in this process may have its own reasons to have stopped it); what the
    import built goes straight to the oldest generation (``model.gcpause``).
    """
    module, func = COMMANDS[name].split(":")
    with gc_paused(keeps=True):
        handler: Handler = getattr(importlib.import_module(f"reconciler.commands.{module}"), func)
    return handler


def _default_log_level(name: str, args: argparse.Namespace) -> str:
    """The daemon logs at info: silent, it looks hung until someone curls /readyz."""
    return "info" if name == "run" and not args.once else "warning"


def _configure_logging(level: str, fmt: str) -> None:
    from reconciler.daemon.logs import configure_logging

    configure_logging(level=level, fmt=fmt)


@functools.cache
def _shared_parser() -> argparse.ArgumentParser:
    """The parser :func:`main` uses, built once per process.

    Building it (every command's options) costs milliseconds, paid again by each call of
    ``main`` in a process that makes many (the test suite makes hundreds). Parsing does
    not change a parser; what two parses could share is a mutable default (the ``[]``
    of an ``append`` option), which :func:`parse_args` copies."""
    return build_parser()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """``argv`` parsed by the shared parser: every list, dict or set in the result is its
    own (argparse hands out an option's default itself when the option is not given,
    and a command that extended it would leak into the next parse)."""
    args = _shared_parser().parse_args(argv)
    for key, value in vars(args).items():
        if isinstance(value, list | dict | set):
            setattr(args, key, copy.copy(value))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    parser = _shared_parser()
    args = parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    # errors quote catalogs and records too: they are printed inside as well
    with printable_streams(bool(getattr(args, "no_color", False))):
        return _run(parser, args)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        name = command_name(args)
        _configure_logging(args.log_level or _default_log_level(name, args), args.log_format)
        handler = _handler(name)
        from reconciler.commands.defaults import MissingCluster, apply_defaults

        try:
            apply_defaults(name, args)
        except MissingCluster as e:
            parser.error(str(e))  # SystemExit(2) with the usage line, like any missing option
        return handler(args)
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
