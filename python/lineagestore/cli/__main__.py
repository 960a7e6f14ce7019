"""``python -m lineagestore.cli``: the same as the ``lineagestore`` command."""

from lineagestore.cli.program import main

raise SystemExit(main())
