"""torch_reduce's version and the torch releases it supports.

setup.py reads this file without importing the package (it has no imports of its own), so the
range is written once: setup.py refuses to build against a torch outside it, and the compiled
library is tied to the one torch minor release it was built against (torch's C++ ABI changes
between minor releases).
"""

__version__ = "0.1.0"

# The oldest and the newest torch minor release that torch_reduce builds and passes its tests on
# (README: "Supported torch versions"). requirements.txt and pyproject.toml repeat TORCH_REQUIREMENT.
TORCH_OLDEST = (2, 11)
TORCH_NEWEST = (2, 15)
TORCH_REQUIREMENT = f"torch>={TORCH_OLDEST[0]}.{TORCH_OLDEST[1]},<{TORCH_NEWEST[0]}.{TORCH_NEWEST[1] + 1}"


def minor_release(version: str) -> tuple[int, int]:
    """(2, 15) for '2.15.0+cu132', '2.15.1' or '2.15.0a0+git...'."""
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()))
