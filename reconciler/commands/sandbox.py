"""``reconciler sandbox``: serve a local Kubernetes API until SIGINT/SIGTERM.

Thin: parse nothing more than cli.py did, start the server from
``reconciler.sandbox.runner``, print where it is, wait for a signal, stop.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from reconciler.model.errors import UsageError
from reconciler.sandbox.controllers import DEFAULT_DELAY
from reconciler.sandbox.runner import start_server, write_kubeconfig


def sandbox_command(args: argparse.Namespace) -> int:
    port = int(getattr(args, "port", 0) or 0)
    if not 0 <= port <= 65535:
        raise UsageError(f"sandbox: --port {port} is not a TCP port (0-65535)")
    delay = float(getattr(args, "controller_delay", DEFAULT_DELAY) or 0.0)
    if delay < 0:
        raise UsageError("sandbox: --controller-delay must not be negative")
    fail_images = tuple(getattr(args, "fail_image", None) or ())
    kubeconfig = getattr(args, "write_kubeconfig", None)
    return asyncio.run(_serve(str(args.host or "127.0.0.1"), port, delay, fail_images, kubeconfig))


async def _serve(
    host: str, port: int, delay: float, fail_images: tuple[str, ...], kubeconfig: str | None
) -> int:
    try:
        running = await start_server(
            host=host, port=port, controller_delay=delay, fail_images=fail_images
        )
    except OSError as e:
        raise UsageError(f"sandbox: cannot listen on {host}:{port}: {e.strerror or e}") from e
    try:
        if kubeconfig:
            try:
                write_kubeconfig(Path(kubeconfig), running.url)
            except OSError as e:
                raise UsageError(
                    f"sandbox: cannot write kubeconfig {kubeconfig}: {e.strerror or e}"
                ) from e
        print(f"sandbox API server listening on {running.url}", flush=True)
        if kubeconfig:
            print(f"try: kubectl --kubeconfig {kubeconfig} get ns", flush=True)
        else:
            print(f"try: kubectl --server {running.url} get ns", flush=True)
        await _wait_for_signal()
        print("sandbox: stopping", file=sys.stderr, flush=True)
    finally:
        await running.stop()
    return 0


async def _wait_for_signal() -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
