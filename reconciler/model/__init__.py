"""Pure data shared by every stage: catalog objects, versions, problems and errors.

Nothing in this package does I/O; stages exchange these values so that logs,
status files and commit messages can all be rendered from the same results.
"""

# The apiVersion of every file reconciler reads or writes (catalog files, status
# records). Here, not in ``model.catalog``: a status record's reader (``reconciler
# status``) needs this string, not the catalog model and what it imports.
API_VERSION = "reconciler/v1"
