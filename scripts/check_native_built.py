"""CI's check that the native record decoder was built wherever cargo is (.ci/run runs it before the
tests): otherwise the run would test the pure-Python decoder twice, and miss a build that fails for
users too. Without cargo on PATH there is nothing to check.
Usage: python scripts/check_native_built.py [PACKAGE_DIR]   (default: aiokafka_lite)
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

# Where setup.py keeps a failed build's reason (aiokafka_lite/protocol/native.py reads it too).
BUILD_FAILURE_FILE = "_native_build_failure.txt"


def problem(package: Path, cargo: str | None) -> str | None:
    """One line saying why the check fails, or None."""
    if cargo is None or any(package.glob("_native*.so")) or any(package.glob("_native*.pyd")):
        return None
    try:
        text = (package / BUILD_FAILURE_FILE).read_text(encoding="utf-8")
    except OSError:
        text = ""
    kept = [stripped for line in text.splitlines() if (stripped := line.strip())]
    reason = "setup.py kept no reason" if not kept else kept[0] if len(kept) == 1 else f"{kept[0]} ... {kept[-1]}"
    return (f"the native record decoder is not built in {package} although cargo is on PATH ({cargo}): "
            f"{reason} (./dev's log: .venv/native-build.log)")


def main(argv: list[str]) -> int:
    package = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "aiokafka_lite"
    found = problem(package, shutil.which("cargo"))
    if found:
        print(found, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
