"""`python -m real_suite_rank PAYLOAD`: one rank of the launch adapter (real_suite_plugin.py explains it)."""

import sys

from real_suite_plugin import _rank_main

if __name__ == "__main__":
    sys.exit(_rank_main(sys.argv[1]))
