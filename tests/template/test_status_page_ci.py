"""The template's status-page workflow: pinned actions, Pages permissions, a valid command."""

from __future__ import annotations

import re
import shlex
from typing import Any

import yaml

from reconciler.cli import build_parser
from tests.conftest import TEMPLATE

WORKFLOWS = TEMPLATE / ".github/workflows"
PINNED = re.compile(r"^[\w-]+/[\w-]+@[0-9a-f]{40}$")


def _load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    return loaded


def _uses(workflow: dict[str, Any]) -> list[str]:
    return [s["uses"] for job in workflow["jobs"].values() for s in job["steps"] if "uses" in s]


def test_every_action_is_pinned_by_sha_and_shared_ones_match_the_validate_workflow() -> None:
    text = (WORKFLOWS / "status-page.yaml").read_text()
    page = _load("status-page.yaml")
    uses = _uses(page)
    assert {u.split("@")[0] for u in uses} == {
        "actions/setup-python",
        "actions/upload-pages-artifact",
        "actions/deploy-pages",
    }
    for use in uses:
        assert PINNED.match(use), use
        assert re.search(rf"{re.escape(use)} # v\d+\.\d+\.\d+\n", text), f"{use}: name the tag"
    validate = {u.split("@")[0]: u for u in _uses(_load("validate.yaml"))}
    for use in uses:
        name = use.split("@")[0]
        if name in validate:
            assert use == validate[name]


def test_pages_permissions_only_where_the_site_is_deployed() -> None:
    page = _load("status-page.yaml")
    assert page["permissions"] == {"contents": "read"}
    deploy = page["jobs"]["deploy"]
    assert deploy["needs"] == "build"
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    assert "permissions" not in page["jobs"]["build"]
    triggers = page[True] if True in page else page["on"]  # YAML 1.1: on -> True
    assert triggers["push"]["branches"] == ["status/**"]


def test_the_report_step_is_a_command_the_cli_accepts() -> None:
    steps = _load("status-page.yaml")["jobs"]["build"]["steps"]
    run = next(s["run"] for s in steps if "reconciler report" in s.get("run", ""))
    line = run.split("reconciler report", 1)[1].split("\ncode=", 1)[0].replace("\\\n", " ")
    argv = ["report", *shlex.split(line.replace("$", ""))]
    args = build_parser().parse_args(argv)
    assert args.command == "report" and args.html == "_site" and args.cluster == []
    upload = next(s for s in steps if "upload-pages-artifact" in s.get("uses", ""))
    assert upload["with"]["path"] == args.html
