"""``python -m ffn_zoo.analysis.compare`` = ``ffn-zoo-compare``."""

import sys

from ffn_zoo.analysis.compare.cli import main

sys.exit(main())
