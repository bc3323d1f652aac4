"""One module per command group; each command is ``(args) -> exit code``.

``cli.py`` only parses arguments and maps errors to exit codes; the functions
here compose the stages (mostly through ``reconciler.daemon``) and render
results as text or JSON. Layering: cli -> commands -> daemon -> stages -> model.
"""
