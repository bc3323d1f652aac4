"""Starting and stopping the sandbox server on a socket, and its kubeconfig.

Shared by ``reconciler sandbox`` (foreground, until a signal) and ``testing.py``
(a background thread per test). The kubeconfig points kubectl and the official
client at the plain-HTTP loopback URL with a dummy token (the sandbox checks no
credentials).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from reconciler.sandbox.server import SandboxServer
from reconciler.sandbox.store import DEFAULT_HISTORY_LIMIT
from reconciler.sandbox.timing import Timing
from reconciler.sandbox.watch import DEFAULT_BOOKMARK_INTERVAL

# Open watch streams are cut after this long on shutdown instead of aiohttp's 60 s.
SHUTDOWN_TIMEOUT = 0.5


# The cyclic collector's thresholds in a standalone sandbox (``tune_collector``).
COLLECTOR_THRESHOLDS = (50_000, 20, 100)


def tune_collector() -> None:
    """Make the cyclic garbage collector cheap for a process that serves a sandbox.

    The store keeps every object as a tree of dicts (tracked by the collector) and
    each write allocates a new tree, so with CPython's default thresholds (700, 10,
    10) a young collection ran every few writes and the older ones walked the growing
    store again and again: a fifth of the sandbox's CPU during a 1,000-instance
    install. What a sandbox allocates is freed by reference counting (the stored
    objects are acyclic JSON); the collector only has aiohttp's and asyncio's rare
    cycles left to find, which a young generation of 50,000 objects still finds
    within a few hundred requests. The objects built while starting (modules, the
    client's schemas) live as long as the process: ``gc.freeze`` takes them out of
    every collection.

    Process-wide, so only ``reconciler sandbox`` (a process of its own) calls it;
    an in-process test sandbox leaves its host's collector alone.
    """
    gc.freeze()
    gc.set_threshold(*COLLECTOR_THRESHOLDS)


@dataclass
class RunningServer:
    """A started server: its URL and what stops it (must run on its event loop)."""

    server: SandboxServer
    runner: web.AppRunner
    url: str

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_server(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    controller_delay: float,
    fail_images: Sequence[str] = (),
    history_limit: int = DEFAULT_HISTORY_LIMIT,
    timing: Timing | None = None,
    request_latency: float = 0.0,
    max_requests_in_flight: int = 0,
    bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
) -> RunningServer:
    """Bind ``host:port`` (0: a free port) and serve; raises OSError when the port is taken."""
    server = SandboxServer(
        controller_delay=controller_delay,
        fail_images=fail_images,
        history_limit=history_limit,
        timing=timing,
        request_latency=request_latency,
        max_requests_in_flight=max_requests_in_flight,
        bookmark_interval=bookmark_interval,
    )
    return await serve(server, host, port)


async def serve(server: SandboxServer, host: str = "127.0.0.1", port: int = 0) -> RunningServer:
    """Serve ``server`` on ``host:port`` (0: a free port); raises OSError when it is taken.

    Its controllers run from now on, if they did not already (a copied server's)."""
    server.controllers.start()
    runner = web.AppRunner(server.build_app(), access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    bound_host, bound_port = runner.addresses[0][:2]
    shown = f"[{bound_host}]" if ":" in str(bound_host) else bound_host
    return RunningServer(server, runner, f"http://{shown}:{bound_port}")


# What ``yaml.safe_dump`` of the config wrote, as a template: the pure-Python emitter took
# more CPU than the rest of a test sandbox's start but for the copy of its server
# (tests/sandbox/test_runner.py checks the text loads as that config).
_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: sandbox
  cluster:
    server: {url}
users:
- name: sandbox
  user:
    token: sandbox
contexts:
- name: sandbox
  context:
    cluster: sandbox
    user: sandbox
    namespace: {namespace}
current-context: sandbox
preferences: {{}}
"""


def kubeconfig_text(url: str, namespace: str = "default") -> str:
    """A kubeconfig for ``url`` with one context (``sandbox``) in ``namespace``.

    Each value is written as a JSON string, which YAML reads as the same string (a
    double-quoted scalar), whatever characters it holds.
    """
    return _KUBECONFIG.format(url=json.dumps(url), namespace=json.dumps(namespace))


def write_kubeconfig(path: Path, url: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(kubeconfig_text(url))
    return path
