"""``reconciler version`` and ``reconciler reconcile``: talk to a running daemon over HTTP.

The daemon serves ``POST /reconcile`` next to its webhooks (``--webhook-address``,
else ``--metrics-address``; ``reconciler.daemon.http``) and ``/version`` on every
port. ``reconcile`` signs its request with the webhook secret, exactly like a
generic webhook, so no second credential is needed and nobody has to compute an
HMAC by hand. Plain ``urllib``: these commands must start fast and need nothing
the standard library lacks.
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from reconciler import version_info
from reconciler.commands.output import is_data, print_data
from reconciler.daemon.webhook import GENERIC_SIGNATURE, reconcile_request_body, sign
from reconciler.model.errors import EXIT_OK, UsageError

SECRET_ENV = "RECONCILER_WEBHOOK_SECRET"
TIMEOUT = 10.0  # seconds; the daemon answers from its own thread, even mid-pass


def webhook_secret(path: str | None) -> str:
    """The webhook secret from ``--webhook-secret-file`` or ``$RECONCILER_WEBHOOK_SECRET``."""
    if path:
        try:
            return Path(path).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise UsageError(f"{path}: cannot read webhook secret ({e.strerror})") from e
    return os.environ.get(SECRET_ENV, "")


def version_command(args: argparse.Namespace) -> int:
    """Print the client's version, and the daemon's with ``--server`` (exit 2 if unreachable)."""
    data: dict[str, Any] = {"clientVersion": version_info()}
    failure: str | None = None
    if args.server:
        try:
            data["serverVersion"] = _request(args.server, "/version")[1]
        except UsageError as e:
            data["serverVersion"] = None
            failure = str(e)
    if is_data(args.output):
        print_data(data, args.output)
    else:
        client = data["clientVersion"]
        print(f"Client Version: {client['version']} (Python {client['python']})")
        server = data.get("serverVersion")
        if server:
            cluster = f", cluster {server['cluster']}" if server.get("cluster") else ""
            print(f"Server Version: {server.get('version', '?')} ({args.server}{cluster})")
    if failure is not None:
        raise UsageError(failure)
    return EXIT_OK


def reconcile_command(args: argparse.Namespace) -> int:
    """Ask the daemon at ``--server`` for a pass of ``--cluster`` now."""
    secret = webhook_secret(args.webhook_secret_file)
    if not secret:
        raise UsageError(
            f"no webhook secret: pass --webhook-secret-file FILE or set ${SECRET_ENV} "
            "(the daemon's own secret; the request is signed with it)"
        )
    body = reconcile_request_body(args.cluster)
    headers = {"Content-Type": "application/json", GENERIC_SIGNATURE: sign(body, secret)}
    status, answer = _request(args.server, "/reconcile", body, headers)
    if is_data(args.output):
        print_data({"server": args.server, "status": status, **answer}, args.output)
    else:
        print(f"reconcile requested: cluster {args.cluster} at {args.server} (a pass starts now)")
    return EXIT_OK


def _request(
    server: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    """GET (or POST ``body``) ``server + path``; a JSON object, or ``UsageError`` saying why not."""
    base = server if "://" in server else f"http://{server}"
    url = base.rstrip("/") + path
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--server {server}: only http:// and https:// addresses are supported")
    request = urllib.request.Request(url, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return response.status, _json(response.read(), url)
    except urllib.error.HTTPError as e:
        try:
            error = _json(e.read(), url).get("error") or e.reason
        except UsageError:
            error = e.reason
        raise UsageError(f"{url}: the daemon refused the request ({e.code}): {error}") from e
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise UsageError(f"{url}: cannot reach the daemon ({reason})") from e


def _json(data: bytes, url: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError as e:
        raise UsageError(f"{url}: the answer is not JSON (is this a reconciler daemon?)") from e
    if not isinstance(value, dict):
        raise UsageError(f"{url}: the answer is not a JSON object (is this a reconciler daemon?)")
    return value
