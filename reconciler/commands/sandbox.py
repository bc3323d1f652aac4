"""``reconciler sandbox``: serve a local Kubernetes API until SIGINT/SIGTERM.

Thin: parse nothing more than cli.py did, start the server from
``reconciler.sandbox.runner``, print where it is, wait for a signal, stop.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from ipaddress import ip_network
from pathlib import Path
from typing import Any

from reconciler.model.errors import UsageError
from reconciler.sandbox.controllers import DEFAULT_DELAY
from reconciler.sandbox.runner import start_server, tune_collector, write_kubeconfig
from reconciler.sandbox.timing import DEFAULT_JOB_BACKOFF, Timing, parse_ready_delay


def sandbox_command(args: argparse.Namespace) -> int:
    port = int(getattr(args, "port", 0) or 0)
    if not 0 <= port <= 65535:
        raise UsageError(f"sandbox: --port {port} is not a TCP port (0-65535)")
    fail_images = tuple(getattr(args, "fail_image", None) or ())
    kubeconfig = getattr(args, "write_kubeconfig", None)
    timing = timing_of(args)
    latency = float(getattr(args, "request_latency", 0.0) or 0.0)
    in_flight = int(getattr(args, "max_requests_in_flight", 0) or 0)
    if latency < 0 or in_flight < 0:
        raise UsageError(
            "sandbox: --request-latency and --max-requests-in-flight must not be negative"
        )
    host = str(args.host or "127.0.0.1")
    limits = {"request_latency": latency, "max_requests_in_flight": in_flight}
    return asyncio.run(_serve(host, port, timing, fail_images, kubeconfig, limits))


def timing_of(args: argparse.Namespace) -> Timing:
    """The simulated cluster's delays from the command line; UsageError names the bad option."""
    delay = float(getattr(args, "controller_delay", DEFAULT_DELAY) or 0.0)
    if delay < 0:
        raise UsageError("sandbox: --controller-delay must not be negative")
    for option in ("pod_start_delay", "job_duration", "job_backoff", "pod_grace_scale"):
        value = getattr(args, option, None)
        if value is not None and value < 0:
            raise UsageError(f"sandbox: --{option.replace('_', '-')} must not be negative")
    cron_minute = getattr(args, "cron_minute", None)
    if cron_minute is not None and cron_minute <= 0:
        raise UsageError("sandbox: --cron-minute must be more than 0")
    nodes = int(getattr(args, "nodes", 3) or 0)
    if nodes < 1:
        raise UsageError("sandbox: --nodes must be at least 1")
    try:
        ready = tuple(parse_ready_delay(text) for text in getattr(args, "ready_delay", None) or ())
    except ValueError as e:
        raise UsageError(f"sandbox: {e}") from None
    backoff = getattr(args, "job_backoff", None)
    grace_scale = getattr(args, "pod_grace_scale", None)
    addresses = getattr(args, "load_balancer_ips", None)
    if addresses is not None:
        try:
            ip_network(addresses, strict=False)
        except ValueError:
            raise UsageError(
                f"sandbox: --load-balancer-ips {addresses!r} is not a CIDR range "
                "(e.g. 172.18.255.200/29)"
            ) from None
    return Timing(
        controller_delay=delay,
        pod_start=getattr(args, "pod_start_delay", None),
        job_duration=getattr(args, "job_duration", None),
        ready_delays=ready,
        nodes=nodes,
        job_backoff=DEFAULT_JOB_BACKOFF if backoff is None else backoff,
        cron_minute=60.0 if cron_minute is None else cron_minute,
        pod_grace_scale=1.0 if grace_scale is None else grace_scale,
        load_balancer_ips=addresses,
    )


async def _serve(
    host: str,
    port: int,
    timing: Timing,
    fail_images: tuple[str, ...],
    kubeconfig: str | None,
    limits: dict[str, Any],
) -> int:
    try:
        running = await start_server(
            host=host,
            port=port,
            controller_delay=timing.controller_delay,
            fail_images=fail_images,
            timing=timing,
            request_latency=float(limits["request_latency"]),
            max_requests_in_flight=int(limits["max_requests_in_flight"]),
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
        tune_collector()
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
