"""The test process itself imports the package (for its pure functions): keep the companion
off here; the tests start their own processes with it on."""

import os

os.environ["VRAMWARDEN_TORCH"] = "0"
