"""`python -m tui` runs the console script."""

import sys

from tui.cli import main

sys.exit(main())
