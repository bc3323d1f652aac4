"""``reconciler images scan|verify`` (SPEC section 8): image builds from the registries.

``scan`` asks each image's registry for the newest build of every intermediate
tag and commits ``builds.yaml`` changes, one commit per app (``--branch`` for a
pull request, ``--push`` to publish). ``verify`` checks that every released image
still resolves. A registry that cannot answer is an environment problem (exit 2)
and stops ``scan`` before anything is committed.
"""

from __future__ import annotations

import argparse

from reconciler.commands.output import eprint, is_data, print_data
from reconciler.model.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, UsageError
from reconciler.registry import RegistryError, scan_catalog, verify_catalog
from reconciler.source import commit_builds


def _root(args: argparse.Namespace) -> str:
    if args.repo is not None and args.catalog not in (".", args.repo):
        raise UsageError("give the catalog either as CATALOG or with --repo, not both")
    return str(args.repo or args.catalog)


def images_scan_command(args: argparse.Namespace) -> int:
    """Pin the newest build of every intermediate tag; one commit per app that changed."""
    root = _root(args)
    commit_builds(root, [])  # a checkout to commit to, before any registry is asked
    try:
        result = scan_catalog(root, app=args.app)
    except RegistryError as e:
        eprint(f"reconciler: error: {e}; nothing was committed")
        return EXIT_USAGE
    for warning in result.warnings:
        eprint(f"warning: {warning}")
    commits = commit_builds(root, result.file_changes(), branch=args.branch, push=args.push)
    if is_data(args.output):
        print_data({**result.to_dict(), **commits.to_dict()}, args.output)
        return EXIT_OK
    if not result.changed:
        print(f"no new image builds ({result.images} intermediate tags checked)")
        return EXIT_OK
    for app in result.changed:
        for c in app.changes:
            print(
                f"{c.app} {c.version} {c.image}: {c.from_tag} -> {c.build.tag} "
                f"({c.build.digest[:19]})"
            )
    where = f" on branch {commits.branch}" if commits.branch else ""
    for commit in commits.commits:
        print(f"committed {commit.commit[:12]}{where}: {commit.subject}")
    if commits.pushed_to:
        print(f"pushed to {commits.pushed_to}")
    return EXIT_OK


def images_verify_command(args: argparse.Namespace) -> int:
    """Exit 1 naming every released image (or pinned build) its registry no longer has."""
    root = _root(args)
    try:
        result = verify_catalog(root, app=args.app)
    except RegistryError as e:
        eprint(f"reconciler: error: {e}")
        return EXIT_USAGE
    if is_data(args.output):
        print_data(result.to_dict(), args.output)
    else:
        for missing in result.missing:
            print(missing)
        if result.missing:
            print(f"{len(result.missing)} of {result.checked} image references are missing")
        else:
            print(f"all {result.checked} image references resolve")
    return EXIT_PROBLEMS if result.missing else EXIT_OK
