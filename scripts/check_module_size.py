"""The size rule of `./dev check`: no module of the package over 500 lines.

A module past that is more than one sitting's read; split it by responsibility (ARCHITECTURE.md says
where things go). A module that must stay longer is listed in ALLOWED with the reason.
Usage: python scripts/check_module_size.py [PACKAGE_DIR]   (default: aiokafka_lite)
"""

from __future__ import annotations

import sys
from pathlib import Path

LIMIT = 500
# Path relative to the package directory -> why it may be longer.
ALLOWED: dict[str, str] = {}


def oversized(package: Path) -> list[str]:
    """One line per module over the limit and not allowed, sorted by path."""
    problems = []
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > LIMIT and name not in ALLOWED:
            problems.append(f"{package.name}/{name}: {lines} lines (limit {LIMIT}): split it by responsibility, "
                            f"or list it in ALLOWED in {Path(__file__).name} with the reason")
    return problems


def main(argv: list[str]) -> int:
    package = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "aiokafka_lite"
    problems = oversized(package)
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
