"""``python -m ffn_zoo.tools.device_check``: the same as the ``ffn-zoo-device-check`` console script."""

import sys

from ffn_zoo.tools.device_check.cli import main

if __name__ == "__main__":
    sys.exit(main())
