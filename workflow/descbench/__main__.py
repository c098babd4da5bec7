import sys

from descbench.cli import main

sys.exit(main())
