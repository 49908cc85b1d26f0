"""`python -m codeward.cli` is the `codeward` command, as `python -m codeward` is."""

import sys

from codeward.cli import main

sys.exit(main())
