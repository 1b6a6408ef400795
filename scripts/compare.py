"""Compare a sweep's runs: table (Markdown/CSV/JSON), PNGs and a TensorBoard layout. See ffn_zoo/compare.py.

    python scripts/compare.py logs/multiruns/<time> [--baseline gelu] [--paper] [--out DIR]
"""

import sys

from ffn_zoo.compare import main

if __name__ == "__main__":
    sys.exit(main())
