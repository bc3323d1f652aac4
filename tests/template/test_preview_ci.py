"""The template's CI jobs post the preview as one pull-request comment (SPEC section 7).

The GitLab job's note script runs here for real against a small stand-in for
GitLab's notes API (``GET/POST/PUT /projects/:id/merge_requests/:iid/notes``,
https://docs.gitlab.com/ee/api/notes.html#merge-requests): a second run edits
the note the first one posted instead of adding another. The GitHub job is
checked for what a reviewer of a workflow looks at: actions pinned by commit SHA,
the token's permissions, and the marker it searches for.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.preview import MARKER
from tests.conftest import TEMPLATE

NOTES = "/api/v4/projects/7/merge_requests/3/notes"


class FakeNotes(BaseHTTPRequestHandler):
    notes: list[dict[str, Any]]
    tokens: list[str]

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, code: int, data: Any) -> None:
        body = json.dumps(data).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        return data

    def do_GET(self) -> None:
        self.tokens.append(self.headers.get("PRIVATE-TOKEN", ""))
        path, _, query = self.path.partition("?")
        params = dict(p.split("=", 1) for p in query.split("&") if p)
        assert path == NOTES
        page, size = int(params.get("page", 1)), int(params.get("per_page", 20))
        self._reply(200, self.notes[(page - 1) * size : page * size])

    def do_POST(self) -> None:
        self.tokens.append(self.headers.get("PRIVATE-TOKEN", ""))
        assert self.path == NOTES
        note = {"id": 100 + len(self.notes), "body": self._body()["body"], "system": False}
        self.notes.append(note)
        self._reply(201, note)

    def do_PUT(self) -> None:
        self.tokens.append(self.headers.get("PRIVATE-TOKEN", ""))
        note_id = int(self.path.rsplit("/", 1)[1])
        note = next(n for n in self.notes if n["id"] == note_id)
        note["body"] = self._body()["body"]
        self._reply(200, note)


@pytest.fixture
def gitlab() -> Iterator[tuple[str, type[FakeNotes]]]:
    handler = type("Handler", (FakeNotes,), {"notes": [], "tokens": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    # polled every 50 ms, not 500: shutdown() waits for serve_forever's next look
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/v4", handler
    finally:
        server.shutdown()
        server.server_close()


def _note_script() -> str:
    job = yaml.safe_load((TEMPLATE / ".gitlab-ci.yml").read_text())["preview"]
    item = next(s for s in job["script"] if "<<'PY'" in s)
    lines = item.splitlines()
    start = next(i for i, line in enumerate(lines) if "<<'PY'" in line)
    end = lines.index("PY")
    return "\n".join(lines[start + 1 : end]) + "\n"


def _post(tmp_path: Path, url: str, body: str, token: str | None = "glpat-test") -> str:
    (tmp_path / "preview.md").write_text(body)
    env = {
        **os.environ,
        "CI_API_V4_URL": url,
        "CI_PROJECT_ID": "7",
        "CI_MERGE_REQUEST_IID": "3",
    }
    env.pop("RECONCILER_PREVIEW_TOKEN", None)
    if token is not None:
        env["RECONCILER_PREVIEW_TOKEN"] = token
    done = subprocess.run(
        [sys.executable, "-c", _note_script()],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_gitlab_job_posts_one_note_and_edits_it_on_the_next_push(
    tmp_path: Path, gitlab: tuple[str, type[FakeNotes]]
) -> None:
    url, server = gitlab
    server.notes.extend(
        {"id": i, "body": f"review comment {i}", "system": False} for i in range(150)
    )  # more than a page: the note is searched on every page
    _post(tmp_path, url, f"{MARKER}\n### reconciler preview: first\n")
    _post(tmp_path, url, f"{MARKER}\n### reconciler preview: second\n")
    ours = [n for n in server.notes if n["body"].startswith(MARKER)]
    assert [n["body"] for n in ours] == [f"{MARKER}\n### reconciler preview: second\n"]
    assert len(server.notes) == 151
    assert set(server.tokens) == {"glpat-test"}


def test_gitlab_job_without_a_token_skips_posting(
    tmp_path: Path, gitlab: tuple[str, type[FakeNotes]]
) -> None:
    url, server = gitlab
    out = _post(tmp_path, url, f"{MARKER}\nx\n", token=None)
    assert "RECONCILER_PREVIEW_TOKEN is not set" in out
    assert server.notes == []


def test_gitlab_job_runs_validate_and_preview_on_merge_requests() -> None:
    job = yaml.safe_load((TEMPLATE / ".gitlab-ci.yml").read_text())["preview"]
    script = "\n".join(job["script"])
    assert "reconciler validate" in script
    assert "reconciler preview --base" in script and "--output markdown" in script
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]


def test_github_preview_job_pins_actions_and_edits_its_comment() -> None:
    text = (TEMPLATE / ".github/workflows/validate.yaml").read_text()
    uses = re.findall(r"uses:\s*(\S+)", text)
    assert uses and all(re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", u) for u in uses), uses
    workflow = yaml.safe_load(text)
    job = workflow["jobs"]["preview"]
    assert job["permissions"] == {"contents": "read", "pull-requests": "write"}
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    assert "reconciler validate" in runs
    assert "reconciler preview --base HEAD^1 --head HEAD --output markdown" in runs
    assert f"marker='{MARKER}'" in runs
    assert "--method PATCH" in runs and "gh pr comment" in runs
    post = next(s for s in job["steps"] if "gh api" in s.get("run", ""))
    assert post["env"]["GH_TOKEN"] == "${{ github.token }}"


def test_images_job_is_opt_in_until_the_example_images_are_replaced() -> None:
    """The example apps name images that do not exist: a new catalog's CI must pass."""
    workflow = yaml.safe_load((TEMPLATE / ".github/workflows/validate.yaml").read_text())
    assert workflow["jobs"]["images"]["if"] == "vars.RECONCILER_VERIFY_IMAGES == 'true'"
    assert "if" not in workflow["jobs"]["validate"]  # validation always runs
    gitlab = yaml.safe_load((TEMPLATE / ".gitlab-ci.yml").read_text())
    assert gitlab["images"]["rules"] == [{"if": '$RECONCILER_VERIFY_IMAGES == "true"'}]
    assert "rules" not in gitlab["validate"]
