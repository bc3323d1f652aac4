"""``reconciler completion bash|zsh|fish``: shell completion generated from the parser.

The scripts are built by walking ``reconciler.cli.build_parser()``: every
subcommand, option, option value list (``-o text|json|yaml``) and positional
choice comes from argparse, so a new command or flag completes as soon as it
is registered, with nothing to keep in sync by hand.

* bash: plain functions and ``case`` statements (bash 3.2 of macOS works too),
  ``complete -F``; options that take a file (``--kubeconfig``) complete files.
* zsh: the bash script through zsh's ``bashcompinit`` (what kubectl did for years).
* fish: ``complete -c reconciler`` lines with ``__fish_seen_subcommand_from``.

Names come from the catalog, like kubectl completes resource names: ``--cluster``
completes the catalog's clusters, ``--instance`` and the INSTANCE of ``rollout``,
``history``, ``migrations`` and ``get`` the cluster's instances, ``--app`` and ``channel
set APP CHANNEL`` apps and their channels. The scripts ask the hidden command
``reconciler __complete KIND`` (``names_command``), which lists directories and
reads ``channels.yaml`` of the checkout given by ``--repo`` on the line (else
$RECONCILER_REPO, else the current directory): no validation, no network, and
nothing printed but names, so a TAB is instant and never shows an error.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from reconciler.model.errors import EXIT_OK

KINDS = ("clusters", "instances", "apps", "channels")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_MAX_CHANNELS_FILE = 256 * 1024  # a channels file is a few lines; never parse a huge one


@dataclass
class Option:
    names: tuple[str, ...]
    takes_value: bool
    choices: tuple[str, ...]
    help: str


@dataclass
class Command:
    """One node of the command tree: ``path`` is ``""`` (top level), ``"rollout status"``..."""

    path: str
    help: str = ""
    subcommands: dict[str, str] = field(default_factory=dict)  # name -> help
    options: list[Option] = field(default_factory=list)
    positional_choices: tuple[str, ...] = ()


def command_tree(
    parser: argparse.ArgumentParser, path: str = "", help: str = ""
) -> Iterator[Command]:
    """Every command reachable from ``parser``, depth first, ``parser`` itself first."""
    node = Command(path, help)
    children: list[tuple[str, argparse.ArgumentParser, str]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                if name.startswith("__"):
                    continue  # hidden: the scripts' own helper
                node.subcommands[name] = helps.get(name, "")
                children.append((name, sub, helps.get(name, "")))
        elif action.option_strings:
            if action.help == argparse.SUPPRESS:
                continue
            choices = tuple(str(c) for c in action.choices) if action.choices else ()
            node.options.append(
                Option(tuple(action.option_strings), action.nargs != 0, choices, action.help or "")
            )
        elif action.choices:
            node.positional_choices += tuple(str(c) for c in action.choices)
    yield node
    for name, sub, text in children:
        yield from command_tree(sub, f"{path} {name}".strip(), text)


def completion_command(args: argparse.Namespace) -> int:
    from reconciler.cli import build_parser

    tree = list(command_tree(build_parser()))
    script = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[args.shell](tree)
    print(script, end="")
    return EXIT_OK


def names_command(args: argparse.Namespace) -> int:
    """``reconciler __complete KIND``: one catalog name a line, for the completion scripts."""
    from reconciler.commands.defaults import default_cluster

    repo = Path(args.repo)
    if repo.is_dir():  # a URL, or a path that is not there: nothing to offer
        cluster = args.for_cluster or default_cluster(args.repo)
        for name in catalog_names(repo, args.kind, cluster=cluster, app=args.app):
            print(name)
    return EXIT_OK


def catalog_names(root: Path, kind: str, *, cluster: str | None, app: str | None) -> list[str]:
    """The names of ``kind`` in the catalog at ``root``, sorted; DNS labels only."""
    if kind == "clusters":
        found = _dirs(root / "clusters")
    elif kind == "apps":
        found = _dirs(root / "apps")
    elif kind == "instances":
        clusters = [cluster] if cluster else _dirs(root / "clusters")
        found = [
            f.stem
            for c in clusters
            for f in _files(root / "clusters" / c / "instances")
            if f.suffix in (".yaml", ".yml")
        ]
    else:
        apps = [app] if app else _dirs(root / "apps")
        found = [name for a in apps for name in _channels(root / "apps" / a / "channels.yaml")]
    return sorted({name for name in found if _NAME.match(name)})


def _dirs(path: Path) -> list[str]:
    return [p.name for p in _files(path) if p.is_dir()]


def _files(path: Path) -> list[Path]:
    try:
        return list(path.iterdir()) if path.is_dir() else []
    except OSError:
        return []


def _channels(path: Path) -> list[str]:
    try:
        if not path.is_file() or path.stat().st_size > _MAX_CHANNELS_FILE:
            return []
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return []
    channels = data.get("channels") if isinstance(data, dict) else None
    return [str(k) for k in channels] if isinstance(channels, dict) else []


def _case(tree: list[Command], value: dict[str, str]) -> str:
    arms = [f'        "{c.path}") echo "{value[c.path]}" ;;' for c in tree if value.get(c.path)]
    return "\n".join(['    case "$1" in', *arms, "    esac"])


def bash_script(tree: list[Command]) -> str:
    words = {c.path: " ".join([*c.subcommands, *c.positional_choices]) for c in tree}
    options = {c.path: " ".join(n for o in c.options for n in o.names) for c in tree}
    valued = {
        c.path: " ".join(n for o in c.options if o.takes_value for n in o.names) for c in tree
    }
    choices = [
        f'        "{c.path}|{name}") echo "{" ".join(o.choices)}" ;;'
        for c in tree
        for o in c.options
        if o.choices
        for name in o.names
    ]
    return f"""# bash completion for reconciler (generated by `reconciler completion bash`)
# load it: source <(reconciler completion bash)

__reconciler_words() {{
{_case(tree, words)}
}}

__reconciler_options() {{
{_case(tree, options)}
}}

__reconciler_valued() {{
{_case(tree, valued)}
}}

__reconciler_choices() {{
    case "$1|$2" in
{chr(10).join(choices)}
    esac
}}

# options taking a value at $1: its own and the top-level ones (given before the command)
__reconciler_valued_here() {{
    echo "$(__reconciler_valued "$1") $(__reconciler_valued "")"
}}

# the value of option $1 given earlier on the line (--repo R or --repo=R), if any
__reconciler_flag() {{
    local i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in
            "$1") echo "${{COMP_WORDS[i+1]}}"; return ;;
            "$1"=*) echo "${{COMP_WORDS[i]#*=}}"; return ;;
        esac
    done
}}

# names from the catalog: $1 is clusters, instances, apps or channels ($2: the app)
__reconciler_names() {{
    local repo cluster
    repo="$(__reconciler_flag --repo)"
    cluster="$(__reconciler_flag --cluster)"
    "${{COMP_WORDS[0]}}" __complete "$1" ${{repo:+--repo "$repo"}} \
        ${{cluster:+--cluster "$cluster"}} ${{2:+--app "$2"}} 2>/dev/null
}}

__reconciler_has() {{
    local word
    for word in $1; do
        [ "$word" = "$2" ] && return 0
    done
    return 1
}}

_reconciler() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="" path="" word i skip="" first="" args=0
    [ "$COMP_CWORD" -gt 0 ] && prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    # the command path so far: words that name a subcommand, skipping options and their values
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        if [ -n "$skip" ]; then
            skip=""
            continue
        fi
        case "$word" in
            --*=*) continue ;;
            -*)
                __reconciler_has "$(__reconciler_valued_here "$path")" "$word" && skip=1
                continue
                ;;
        esac
        if __reconciler_has "$(__reconciler_words "$path")" "$word"; then
            path="${{path:+$path }}$word"
        else
            [ "$args" -eq 0 ] && first="$word"
            args=$((args + 1))
        fi
    done
    local values
    values="$(__reconciler_choices "$path" "$prev")"
    [ -z "$values" ] && values="$(__reconciler_choices "" "$prev")"
    if [ -n "$values" ]; then
        COMPREPLY=($(compgen -W "$values" -- "$cur"))
        return 0
    fi
    local kind=""
    case "$prev" in
        --cluster) [ "$path" != "init" ] && kind=clusters ;;
        --instance) kind=instances ;;
        --app) [ "$path" != "init" ] && kind=apps ;;
    esac
    if [ -n "$kind" ]; then
        COMPREPLY=($(compgen -W "$(__reconciler_names "$kind")" -- "$cur"))
        return 0
    fi
    if __reconciler_has "$(__reconciler_valued_here "$path")" "$prev"; then
        COMPREPLY=($(compgen -f -- "$cur"))
        return 0
    fi
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$(__reconciler_options "$path")" -- "$cur"))
        return 0
    fi
    case "$path|$args" in
        "rollout promote|0" | "rollout pause|0" | "rollout resume|0" | "rollout status|0" | \
            "history|0" | "migrations|0" | "get|0")
            COMPREPLY=($(compgen -W "$(__reconciler_names instances)" -- "$cur"))
            return 0
            ;;
        "channel set|0")
            COMPREPLY=($(compgen -W "$(__reconciler_names apps)" -- "$cur"))
            return 0
            ;;
        "channel set|1")
            COMPREPLY=($(compgen -W "$(__reconciler_names channels "$first")" -- "$cur"))
            return 0
            ;;
    esac
    local commands
    commands="$(__reconciler_words "$path")"
    if [ -n "$commands" ]; then
        COMPREPLY=($(compgen -W "$commands" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
    return 0
}}

complete -o default -F _reconciler reconciler
"""


def zsh_script(tree: list[Command]) -> str:
    return (
        "#compdef reconciler\n"
        "# zsh completion for reconciler (generated by `reconciler completion zsh`)\n"
        "# load it: source <(reconciler completion zsh)\n"
        "autoload -U +X compinit && compinit\n"
        "autoload -U +X bashcompinit && bashcompinit\n\n" + bash_script(tree)
    )


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish_script(tree: list[Command]) -> str:
    lines = [
        "# fish completion for reconciler (generated by `reconciler completion fish`)",
        "# load it: reconciler completion fish | source",
        "complete -c reconciler -f",
    ]
    for c in tree:
        parts = c.path.split()
        if not parts:
            when = "__fish_use_subcommand"
        else:
            when = f"__fish_seen_subcommand_from {parts[-1]}"
            if c.subcommands:
                when += f"; and not __fish_seen_subcommand_from {' '.join(c.subcommands)}"
        for name, text in c.subcommands.items():
            lines.append(
                f"complete -c reconciler -n {_fish_quote(when)} -a {name} -d {_fish_quote(text)}"
            )
        if c.positional_choices:
            lines.append(
                f"complete -c reconciler -n {_fish_quote(when)} "
                f"-a {_fish_quote(' '.join(c.positional_choices))}"
            )
        for o in c.options:
            flags = " ".join(
                f"-l {n[2:]}" if n.startswith("--") else f"-s {n[1:]}" for n in o.names
            )
            value = ""
            if o.choices:
                value = f" -x -a {_fish_quote(' '.join(o.choices))}"
            elif o.takes_value:
                value = " -r -F"
            help_text = " ".join(o.help.replace("%%", "%").split())[:80]
            lines.append(
                f"complete -c reconciler -n {_fish_quote(when)} {flags}{value}"
                f" -d {_fish_quote(help_text)}"
            )
    return "\n".join(lines) + "\n"
