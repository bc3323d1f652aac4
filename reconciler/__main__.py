"""Allow ``python -m reconciler`` as well as the ``reconciler`` console script."""

from reconciler.cli import main

raise SystemExit(main())
