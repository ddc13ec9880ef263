"""The release files hold what users need (scripts/python_matrix.sh runs this on what it built):
the sdist carries the Rust sources, without which a wheel built from it (python -m build builds the
wheel from the sdist) or a source install with cargo has no native decoder; the wheel is the one abi3
wheel for every Python from 3.11, repaired to a manylinux tag, with the native decoder inside.
Usage: python scripts/check_dist.py DIST_DIR    (one line per problem on stderr, exit 1 if any)
"""

from __future__ import annotations

import sys
import tarfile
import zipfile
from pathlib import Path

SDIST_MEMBERS = ("setup.py", "pyproject.toml", "LICENSE", "native/Cargo.toml", "native/Cargo.lock",
                 "native/src/lib.rs", "aiokafka_lite/py.typed")
WHEEL_MEMBERS = ("aiokafka_lite/__init__.py", "aiokafka_lite/py.typed", "aiokafka_lite/_native.abi3.so")
WHEEL_TAG = "-cp311-abi3-manylinux_"


def sdist_problems(path: Path) -> list[str]:
    with tarfile.open(path) as archive:
        # Members are under one top directory, aiokafka_lite-VERSION/.
        names = {name.partition("/")[2] for name in archive.getnames()}
    return [f"{path.name} lacks {member}" for member in SDIST_MEMBERS if member not in names]


def wheel_problems(path: Path) -> list[str]:
    problems = [] if WHEEL_TAG in path.name else [f"{path.name} is not a cp311-abi3 manylinux wheel"]
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
    problems += [f"{path.name} lacks {member}" for member in WHEEL_MEMBERS if member not in names]
    if not any(name.endswith(".dist-info/licenses/LICENSE") for name in names):
        problems.append(f"{path.name} lacks the license file")
    return problems


def problems(dist: Path) -> list[str]:
    sdists, wheels = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
    if len(sdists) != 1 or len(wheels) != 1:
        return [f"{dist} should hold one sdist and one wheel, not {[p.name for p in sdists + wheels]}"]
    return sdist_problems(sdists[0]) + wheel_problems(wheels[0])


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    found = problems(Path(argv[0]))
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
