"""``python -m lineagestore.testing <command>``: the ``lineagestore-testing`` console script."""

import sys

from lineagestore.testing.prepare import main

sys.exit(main())
