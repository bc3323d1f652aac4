"""Exit codes (SPEC section 6), diff's like ``kubectl diff``, and the one table that documents them."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli import COMMANDS, main
from tests.conftest import REPO_ROOT
from tests.factories import write_catalog


class _Forbidding(http.server.BaseHTTPRequestHandler):
    """An API server that refuses everything, as one does for a user without RBAC rights."""

    def _refuse(self) -> None:
        body = json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "reason": "Forbidden",
                "code": 403,
                "message": "user cannot list resources",
            }
        ).encode()
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PATCH = _refuse

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def forbidding_kubeconfig(tmp_path: Path) -> Iterator[Path]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Forbidding)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{server.server_address[1]}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    yield path
    server.shutdown()
    server.server_close()
    thread.join()


def test_diff_exits_2_when_an_error_stops_it_so_1_only_means_differs(
    tmp_path: Path,
    sandbox: Any,
    forbidding_kubeconfig: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = str(write_catalog(tmp_path / "catalog"))
    # https://kubernetes.io/docs/reference/access-authn-authz/authorization/ : a
    # request the user is not allowed to make is answered 403 Forbidden
    code = main(["diff", root, "--cluster", "prod", "--kubeconfig", str(forbidding_kubeconfig)])
    assert code == 2
    err = capsys.readouterr().err
    assert "diff failed" in err and "Forbidden" in err
    kubeconfig = ["--kubeconfig", str(sandbox.kubeconfig)]
    assert main(["diff", root, "--cluster", "prod", *kubeconfig]) == 1  # nothing applied yet
    assert main(["apply", root, "--cluster", "prod", *kubeconfig]) == 0
    assert main(["diff", root, "--cluster", "prod", *kubeconfig]) == 0
    assert main(["diff", root, "--cluster", "nope", *kubeconfig]) == 2
    # apply keeps SPEC's 1 for a failed apply, whatever failed
    code = main(["apply", root, "--cluster", "prod", "--kubeconfig", str(forbidding_kubeconfig)])
    assert code == 1


def test_one_table_documents_the_exit_codes_of_every_command() -> None:
    """docs/CLI.md has a row for every registered command (a new one must add its own)."""
    text = (REPO_ROOT / "docs/CLI.md").read_text()
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    documented: set[str] = set()
    for row in section.splitlines():
        if row.startswith("| `"):
            first_cell = row.split("|")[1]
            documented |= {name.strip() for name in re.findall(r"`reconciler ([^`]+)`", first_cell)}
    missing = sorted(name for name in COMMANDS if name not in documented)
    assert not missing, f"docs/CLI.md exit code table lacks {missing}"
    assert "docs/CLI.md" in (REPO_ROOT / "README.md").read_text()
