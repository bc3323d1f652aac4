"""reconciler: a GitOps reconciler for versioned apps shipped through release channels.

The package follows the data flow (see ARCHITECTURE.md in the project docs):
``catalog`` loads a checkout into ``model`` objects, ``resolve`` chooses versions,
``render`` turns them into Kubernetes objects, ``kube`` applies them, ``source``
talks to Git and ``daemon`` composes the stages.
"""

__version__ = "0.1.0"
