"""``reconciler preview``: what moving the catalog from one commit to another would do.

Exit codes (SPEC section 7): 0 when the head adds no error, whatever changes;
1 when the head has errors the base did not have; 2 usage or environment (a
revision that names no commit, a path that is not a Git checkout); with
``--exit-code``, 3 when anything would change and the head adds no error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reconciler.commands.output import is_data, print_data
from reconciler.model.errors import EXIT_OK, EXIT_PROBLEMS
from reconciler.preview import build_preview, format_markdown, format_text

EXIT_CHANGES = 3


def preview_command(args: argparse.Namespace) -> int:
    repo = Path(args.repo if args.repo is not None else args.catalog)
    clusters = [c for given in args.cluster for c in given.split(",") if c]
    preview = build_preview(repo, args.base, args.head, clusters=clusters, diff=args.diff)
    if is_data(args.output):
        print_data(preview.to_dict(), args.output)
    elif args.output == "markdown":
        sys.stdout.write(format_markdown(preview))
    else:
        sys.stdout.write(format_text(preview))
    if preview.new_errors:
        return EXIT_PROBLEMS
    if args.exit_code and preview.anything_changes:
        return EXIT_CHANGES
    return EXIT_OK
