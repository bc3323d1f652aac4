"""Pure data shared by every stage: catalog objects, versions, problems and errors.

Nothing in this package does I/O; stages exchange these values so that logs,
status files and commit messages can all be rendered from the same results.
"""
