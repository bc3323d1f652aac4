"""reconciler: a GitOps reconciler for versioned apps shipped through release channels.

The package follows the data flow (see ARCHITECTURE.md in the project docs):
``catalog`` loads a checkout into ``model`` objects, ``resolve`` chooses versions,
``render`` turns them into Kubernetes objects, ``kube`` applies them, ``source``
talks to Git and ``daemon`` composes the stages.
"""

__version__ = "0.1.0"  # the one place: pyproject.toml reads it, /version and --version print it


def version_info() -> dict[str, str]:
    """This build's version, as ``reconciler version`` and the daemon's ``/version`` show it."""
    import platform

    return {"version": __version__, "python": platform.python_version()}
