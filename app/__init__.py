"""HTTP service and command line. Imports ``solver`` and ``models``."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("layoutsat")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
