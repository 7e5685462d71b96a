import sys

from recovery.cli import main

sys.exit(main())
