"""python -m helpers.checks FILE...: grade learners' exercise files (see helpers.checks)."""

import sys

from helpers.checks import main

sys.exit(main())
