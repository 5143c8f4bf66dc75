"""``python -m rtrigid.io.hil SCENARIO ...``: the same as ``rtrigid serve SCENARIO ...``."""

import sys

from rtrigid.cli import main

if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]]))
