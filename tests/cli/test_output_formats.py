"""kubectl's output conventions: -o yaml wherever -o json works, -o wide|name and
--no-headers on tables, colour only on a terminal (https://no-color.org)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import yaml

from reconciler.cli import build_parser, main
from reconciler.commands.completion import command_tree
from reconciler.commands.output import Style, colour_wanted
from reconciler.model.table import format_table
from tests.factories import write_catalog

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


class Terminal(io.StringIO):
    """A stdout that says it is a terminal, as a user's shell is."""

    def isatty(self) -> bool:
        return True


def run_on_terminal(monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, str]:
    screen = Terminal()
    with monkeypatch.context() as patch:
        patch.setattr("sys.stdout", screen)
        code = main(list(argv))
    return code, screen.getvalue()


def test_every_command_with_json_has_yaml_and_every_table_has_name_wide_no_headers() -> None:
    """Walks the real parser, so a command added later is held to the same rules."""
    checked = 0
    for command in command_tree(build_parser()):
        outputs = [o for o in command.options if "--output" in o.names]
        if not outputs:
            continue
        choices = set(outputs[0].choices)
        assert "-o" in outputs[0].names, command.path
        assert "json" not in choices or "yaml" in choices, command.path
        if "wide" in choices:
            assert "name" in choices, command.path
            assert any("--no-headers" in o.names for o in command.options), command.path
        checked += 1
    assert checked >= 12


@pytest.mark.parametrize(
    "argv",
    [
        ["validate"],
        ["resolve", "--cluster", "prod"],
        ["resolve", "--cluster", "prod", "--explain"],
        ["render", "--cluster", "prod"],
    ],
)
def test_yaml_is_the_same_document_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    root = write_catalog(tmp_path)
    code_json, out_json, _ = run(capsys, argv[0], str(root), *argv[1:], "-o", "json")
    code_yaml, out_yaml, _ = run(capsys, argv[0], str(root), *argv[1:], "-o", "yaml")
    assert code_json == code_yaml == 0
    assert yaml.safe_load(out_yaml) == json.loads(out_json)
    assert not out_yaml.lstrip().startswith(("{", "["))  # block style, as kubectl prints


def test_resolve_name_wide_and_no_headers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_catalog(tmp_path)
    _, out, _ = run(capsys, "resolve", str(root), "--cluster", "prod", "-o", "name")
    assert out == "api\nweb\n"
    _, plain, _ = run(capsys, "resolve", str(root), "--cluster", "prod")
    _, bare, _ = run(capsys, "resolve", str(root), "--cluster", "prod", "--no-headers")
    assert plain.splitlines()[0].split() == ["INSTANCE", "APP", "SOURCE", "VERSION", "NOTE"]
    assert bare.splitlines() == plain.splitlines()[1:]  # same columns, same offsets
    _, wide, _ = run(capsys, "resolve", str(root), "--cluster", "prod", "-o", "wide")
    header = wide.splitlines()[0].split()
    assert header == ["INSTANCE", "APP", "SOURCE", "VERSION", "DEPLOYED", "FILE", "NOTE"]
    web = next(line for line in wide.splitlines() if line.startswith("web "))
    assert "clusters/prod/instances/web.yaml" in web


def test_namespace_filters_resolve_and_render(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_catalog(tmp_path)
    _, out, _ = run(
        capsys, "resolve", str(root), "--cluster", "prod", "-n", "team-api", "-o", "name"
    )
    assert out == "api\n"
    _, out, _ = run(
        capsys, "render", str(root), "--cluster", "prod", "--namespace", "web", "-o", "json"
    )
    items = json.loads(out)["items"]
    assert items and {i["metadata"].get("namespace", i["metadata"]["name"]) for i in items} == {
        "web"
    }
    _, out, _ = run(capsys, "resolve", str(root), "--cluster", "prod", "-n", "nowhere")
    assert out == "no instances\n"


def test_table_colour_keeps_columns_aligned() -> None:
    rows = [("web", "Ready", "ok"), ("api-long-name", "Failed", "crash")]
    painted = format_table(("NAME", "PHASE", "MESSAGE"), rows, paint=Style(colour=True).cells)
    plain = format_table(("NAME", "PHASE", "MESSAGE"), rows)
    assert "\x1b[32mReady\x1b[0m" in painted and "\x1b[31mFailed\x1b[0m" in painted
    assert ANSI.sub("", painted) == plain
    assert format_table(("A", "B"), [("x", "y")], headers=False) == "x   y"


def test_colour_only_on_a_terminal_and_never_when_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert colour_wanted(stream=Terminal())
    assert not colour_wanted(stream=io.StringIO())
    assert not colour_wanted(no_color=True, stream=Terminal())
    monkeypatch.setenv("NO_COLOR", "")  # no-color.org: an empty value does not count
    assert colour_wanted(stream=Terminal())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not colour_wanted(stream=Terminal())


def test_validate_colours_on_a_terminal_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    root = write_catalog(tmp_path)
    path = root / "apps/podinfo/versions/6.5.0/version.yaml"
    path.write_text(path.read_text().replace("podinfo:6.5.0", "podinfo:latest"))
    code, out = run_on_terminal(monkeypatch, "validate", str(root))
    assert code == 0 and "\x1b[33mwarning\x1b[0m: image" in out
    for refuse in (["--no-color", "validate", str(root)], ["validate", str(root), "--no-color"]):
        code, out = run_on_terminal(monkeypatch, *refuse)
        assert code == 0 and "warning: image" in out and not ANSI.search(out)
    monkeypatch.setenv("NO_COLOR", "1")
    code, out = run_on_terminal(monkeypatch, "validate", str(root))
    assert "warning: image" in out and not ANSI.search(out)
    monkeypatch.delenv("NO_COLOR")
    code, out, _ = run(capsys, "validate", str(root))  # a pipe: never colour
    assert "warning: image" in out and not ANSI.search(out)


def test_diff_lines_coloured_like_git_and_left_alone_without_colour() -> None:
    on, off = Style(colour=True), Style(colour=False)
    lines = ["--- live/Deployment/web/web", "+++ desired/Deployment/web/web", "@@ -1 +1 @@"]
    lines += ["-  replicas: 1", "+  replicas: 5", "   image: x"]
    assert [off.diff_line(line) for line in lines] == lines
    painted = [on.diff_line(line) for line in lines]
    assert (
        painted[3] == "\x1b[31m-  replicas: 1\x1b[0m"
        and painted[4] == "\x1b[32m+  replicas: 5\x1b[0m"
    )
    assert painted[0].startswith("\x1b[2m") and painted[5] == "   image: x"
    assert [ANSI.sub("", line) for line in painted] == lines
