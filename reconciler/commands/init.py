"""``reconciler init DIR``: an empty catalog that passes ``reconciler validate``.

The template in the project shows every feature (4 apps, 18 versions, migrations,
image builds); a team starting out wants the smallest catalog that works: one
app with one version and one channel, one cluster with one instance following
it, CI that validates and previews every change, and the pre-commit hook. The
files are written here, from the names given, so the command works from an
installed package as well as from a source checkout. DIR becomes a Git
repository (``git init``) unless it is inside one already; nothing is committed.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from reconciler import __version__
from reconciler.model.errors import EXIT_OK, UsageError
from reconciler.source.scaffold import init_checkout

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")

README = """\
# {app} catalog

A catalog for [reconciler](https://github.com/example-org/reconciler): apps, their
versions and channels under `apps/`, the clusters that run them under `clusters/`.

    reconciler validate                          # lint every file
    reconciler resolve --cluster {cluster}           # the version each instance runs
    reconciler render --cluster {cluster}            # the Kubernetes objects
    reconciler preview --base main               # what this branch changes

Release a version: add `apps/{app}/versions/<version>/`, then move the channel with
`reconciler channel set {app} {channel} <version>` (a one-line commit).
"""

APP = """\
apiVersion: reconciler/v1
kind: App
name: {app}
description: "{app}: replace with what it does"
owners: [team@example.com]
"""

CHANNELS = """\
apiVersion: reconciler/v1
kind: Channels
app: {app}
channels:
  {channel}: {version}
"""

VERSION = """\
apiVersion: reconciler/v1
kind: AppVersion
app: {app}
version: {version}
images:
  web: ghcr.io/stefanprodan/podinfo:6.5.0   # replace with your image (name:tag)
parameters:
  replicas: {{default: 1}}
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${{instance.name}}
spec:
  replicas: ${{params.replicas}}
  selector:
    matchLabels:
      app.kubernetes.io/instance: ${{instance.name}}
  template:
    metadata:
      labels:
        app.kubernetes.io/instance: ${{instance.name}}
    spec:
      containers:
        - name: web
          image: ${{images.web}}
"""

CLUSTER = """\
apiVersion: reconciler/v1
kind: Cluster
name: {cluster}
# What this cluster's instances may touch (fail closed: nothing else is applied).
allowedNamespaces: [{app}]
allowClusterScoped: false
"""

INSTANCE = """\
apiVersion: reconciler/v1
kind: Instance
name: {app}
app: {app}
channel: {channel}
namespace: {app}
"""

PRE_COMMIT = """\
# Run `reconciler validate` before every commit that touches apps/ or clusters/:
#   pip install pre-commit && pre-commit install
# It uses the reconciler on your PATH (the version your clusters run).
repos:
  - repo: local
    hooks:
      - id: reconciler-validate
        name: reconciler validate
        entry: reconciler validate
        language: system
        pass_filenames: false
        files: ^(apps|clusters)/
"""

GITHUB = """\
# Validate every pull request and push; on a pull request, show what it changes.
name: validate
on:
  pull_request:
  push:
    branches-ignore: ["status/**"]   # the reconcilers' status records, not the catalog
permissions:
  contents: read
env:
  RECONCILER_PIP: "reconciler @ git+https://github.com/example-org/reconciler@v{release}"
jobs:
  validate:
    runs-on: ubuntu-latest
    timeout-minutes: 10
    steps:
      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2
        with:
          fetch-depth: 0
          persist-credentials: false
      - uses: actions/setup-python@a26af69be951a213d495a4c3e4e4022e16d87065 # v5.6.0
        with:
          python-version: "3.12"
      - run: pip install "$RECONCILER_PIP"
      - run: reconciler validate
      - name: What the pull request changes
        if: github.event_name == 'pull_request'
        run: |
          reconciler preview --base "${{{{ github.event.pull_request.base.sha }}}}" \\
            --head HEAD --output markdown >> "$GITHUB_STEP_SUMMARY"
"""

GITLAB = """\
# Validate every merge request and push; on a merge request, show what it changes.
variables:
  RECONCILER_PIP: "reconciler @ git+https://github.com/example-org/reconciler@v{release}"
validate:
  image: python:3.12-slim
  rules:
    - if: $CI_COMMIT_BRANCH =~ /^status\\//
      when: never
    - when: always
  before_script:
    - apt-get update -qq && apt-get install -y -qq git >/dev/null
    - pip install "$RECONCILER_PIP"
  script:
    - reconciler validate
    - |
      if [ -n "$CI_MERGE_REQUEST_DIFF_BASE_SHA" ]; then
        reconciler preview --base "$CI_MERGE_REQUEST_DIFF_BASE_SHA" --head "$CI_COMMIT_SHA"
      fi
"""

# each file's path, as parts (each formatted with the names given)
FILES: dict[tuple[str, ...], str] = {
    ("README.md",): README,
    ("apps", "{app}", "app.yaml"): APP,
    ("apps", "{app}", "channels.yaml"): CHANNELS,
    ("apps", "{app}", "versions", "{version}", "version.yaml"): VERSION,
    ("apps", "{app}", "versions", "{version}", "manifests", "deployment.yaml"): DEPLOYMENT,
    ("clusters", "{cluster}", "cluster.yaml"): CLUSTER,
    ("clusters", "{cluster}", "instances", "{app}.yaml"): INSTANCE,
    (".pre-commit-config.yaml",): PRE_COMMIT,
    (".github", "workflows", "validate.yaml"): GITHUB,
    (".gitlab-ci.yml",): GITLAB,
}


def scaffold(directory: Path, *, app: str, cluster: str, channel: str) -> list[str]:
    """Write the catalog's files into ``directory`` (new or empty); their paths, sorted."""
    for option, value in (("--app", app), ("--cluster", cluster), ("--channel", channel)):
        if not _DNS_LABEL.match(value):
            raise UsageError(f"{option} {value!r}: must be a DNS-1123 label (e.g. web, prod)")
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise UsageError(f"{directory}: exists and is not an empty directory")
    names = {
        "app": app,
        "cluster": cluster,
        "channel": channel,
        "version": "0.1.0",
        "release": __version__,
    }
    written = []
    for parts, text in FILES.items():
        rel = "/".join(part.format(**names) for part in parts)
        target = directory / rel
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text.format(**names), encoding="utf-8")
        except OSError as e:
            raise UsageError(f"{target}: cannot write ({e.strerror or e})") from e
        written.append(rel)
    return sorted(written)


def init_command(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    written = scaffold(directory, app=args.app, cluster=args.cluster, channel=args.channel)
    created = init_checkout(directory)
    print(f"created a catalog in {directory} ({len(written)} files):")
    for rel in written:
        print(f"  {rel}")
    repository = "a new Git repository" if created else "inside a Git repository"
    print(
        f"\n{repository}, nothing committed yet; next:\n"
        f"  cd {directory} && reconciler validate\n"
        "  git add -A && git commit -m 'A catalog'\n"
        f"  reconciler run --repo <its URL> --cluster {args.cluster}   # in the cluster"
    )
    return EXIT_OK
