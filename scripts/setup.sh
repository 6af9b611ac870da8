#!/usr/bin/env bash
# Installs retryd's build dependencies (Debian 12 packages only) and builds it.
#
#   scripts/setup.sh [extra cmake configure args...]
#
# Environment:
#   BUILD_DIR            build directory (default: <repo>/build)
#   SETUP_PACKAGES_ONLY  if 1, install the packages and stop (used by the Dockerfile)
#   SETUP_TEST_PACKAGES  if 0, leave out TEST_PACKAGES (the Dockerfile, which
#                        builds no tests)
#   BUILD_TARGETS        targets to build, space-separated (default: all)
#   SETUP_BROWSER_TOOLS  if 0, leave out the browser test's npm packages (builds
#                        that never run the `browser` label)
#
# Idempotent: apt is touched only when a package is missing, so a second run is
# fast and works offline. Installing needs root; as another user the script
# prints what is missing and exits 1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"

PACKAGES=(
  build-essential g++ cmake pkg-config ninja-build git ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librdkafka-dev libabsl-dev libgtest-dev libgmock-dev
  # The HTTP listener (/metrics): cpp-httplib, and prometheus-cpp's metric
  # families and text format.
  libcpp-httplib-dev prometheus-cpp-dev
  kcat python3-kafka
  # The Python example downstream (client/examples/python/) and its test.
  python3-grpcio python3-protobuf
  # The TLS tests make their certificates with it; scripts/thread_safety.sh
  # (run by scripts/test.sh) compiles with clang; scripts/format.sh --check
  # (run by scripts/test.sh too) needs clang-format.
  openssl clang clang-format
  # The `kafka` label's real broker: scripts/kafka.sh fetches Apache Kafka's
  # jars from Maven Central with maven and runs them on Java 17.
  openjdk-17-jre-headless maven
  # libFuzzer, for scripts/fuzz.sh: clang only recommends it, and we install
  # without recommends.
  libclang-rt-14-dev
  # tests/deploy/check_deploy.py reads the YAML under deploy/ with it.
  python3-yaml
)

# What retryd and retryctl need at run time, and nothing more: the shared
# libraries they link (Debian 12 names; libgrpc++1.51 pulls libgrpc29,
# librdkafka++1 pulls librdkafka1) and the CA bundle for TLS to Kafka and
# to a downstream. deploy/Dockerfile's runtime image installs exactly
# these; tests/deploy/check_deploy.py compares the two lists. Installed
# here too, as the -dev packages above depend on them.
RUNTIME_PACKAGES=(
  libgrpc++1.51 libprotobuf32 librdkafka++1 libabsl20220623 libcpp-httplib0.11
  libprometheus-cpp-core1.0 ca-certificates
)

# For the tests only, never for running retryd: `promtool check metrics`
# judges a live /metrics scrape (control.MetricsPromtoolTest). A test whose
# tool is missing is skipped, and fails under CI=true
# (tests/support/missing_tool.py).
TEST_PACKAGES=(
  prometheus
  # The console's browser test (label `browser`) drives Debian's Chromium.
  chromium
  # systemd-analyze verifies the systemd unit (deploy_systemd_unit).
  systemd
)

say() { printf 'setup.sh: %s\n' "$*"; }
die() { printf 'setup.sh: error: %s\n' "$*" >&2; exit 1; }

# ---- packages ------------------------------------------------------------------
command -v dpkg-query >/dev/null 2>&1 \
  || die "dpkg-query not found: this script expects Debian 12 (bookworm)"

PACKAGES+=("${RUNTIME_PACKAGES[@]}")
missing=()
wanted=("${PACKAGES[@]}")
if [[ "${SETUP_TEST_PACKAGES:-1}" != "0" ]]; then
  wanted+=("${TEST_PACKAGES[@]}")
fi
for pkg in "${wanted[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  say "all ${#wanted[@]} packages already installed, skipping apt"
elif [[ "$(id -u)" -ne 0 ]]; then
  {
    printf 'setup.sh: missing packages: %s\n' "${missing[*]}"
    printf 'setup.sh: install them as root, then run this script again:\n'
    printf '  sudo apt-get update && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends %s\n' "${missing[*]}"
    printf '  (or run this script as root)\n'
  } >&2
  exit 1
else
  say "installing missing packages: ${missing[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  say "packages installed"
fi

# The browser test's driver runs on Node.js with npm: Debian's, unless the
# machine has them already (a packaged Node.js may bring its own npm).
if [[ "${SETUP_TEST_PACKAGES:-1}" != "0" ]] && ! { command -v node && command -v npm; } >/dev/null 2>&1; then
  if [[ "$(id -u)" -ne 0 ]]; then
    die "node and npm are missing: install Debian's nodejs and npm as root, or run this script as root"
  fi
  say "installing nodejs and npm"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm
fi

if [[ "${SETUP_PACKAGES_ONLY:-0}" == "1" ]]; then
  say "SETUP_PACKAGES_ONLY=1: not building"
  exit 0
fi

# ---- configure -----------------------------------------------------------------
generator_args=(-G Ninja)
cache="$BUILD_DIR/CMakeCache.txt"
if [[ -f "$cache" ]]; then
  cached_src="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$cache")"
  if [[ -n "$cached_src" && "$(cd "$cached_src" 2>/dev/null && pwd -P)" != "$(cd "$ROOT" && pwd -P)" ]]; then
    die "$BUILD_DIR was configured for another source tree ($cached_src); remove it or set BUILD_DIR"
  fi
  cached_gen="$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$cache")"
  if [[ -n "$cached_gen" && "$cached_gen" != "Ninja" ]]; then
    # CMake cannot switch generators in place; keep the existing one rather
    # than deleting someone's build directory.
    say "note: $BUILD_DIR already uses the '$cached_gen' generator; keeping it (remove the directory to switch to Ninja)"
    generator_args=()
  fi
fi

# The CMake File API query that ctest's build_layers reads the targets
# through (tests/unit/CMakeLists.txt writes it too, but a configure answers
# only the queries there before it starts): so the first configure answers
# it, and build_layers need not configure the build again while tests run.
mkdir -p "$BUILD_DIR/.cmake/api/v1/query"
: >"$BUILD_DIR/.cmake/api/v1/query/codemodel-v2"
say "configuring $ROOT -> $BUILD_DIR"
cmake -S "$ROOT" -B "$BUILD_DIR" "${generator_args[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"

# ---- build ---------------------------------------------------------------------
jobs="$(nproc 2>/dev/null || echo 2)"
read -r -a targets <<<"${BUILD_TARGETS:-all}"
say "building ${targets[*]} with $jobs jobs"
cmake --build "$BUILD_DIR" -j"$jobs" --target "${targets[@]}"
say "build done: $BUILD_DIR"

# ---- test tools from npm ---------------------------------------------------------
# playwright-core at the version tests/console/package-lock.json pins, for the
# browser test; never its own browser download (it drives /usr/bin/chromium).
# Builds that never run the `browser` label (the sanitizers', the
# thread-safety one) set SETUP_BROWSER_TOOLS=0.
if [[ "${SETUP_TEST_PACKAGES:-1}" != "0" && "${SETUP_BROWSER_TOOLS:-1}" != "0" ]]; then
  tools="$BUILD_DIR/console-tools"
  lock="$ROOT/tests/console/package-lock.json"
  if ! cmp -s "$lock" "$tools/package-lock.json" || [[ ! -d "$tools/node_modules/playwright-core" ]]; then
    say "installing the browser test's npm packages into $tools"
    installed=0
    for attempt in 1 2 3; do
      rm -rf "$tools" && mkdir -p "$tools"
      cp "$ROOT/tests/console/package.json" "$lock" "$tools/"
      if (cd "$tools" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --ignore-scripts); then
        installed=1
        break
      fi
      say "npm ci failed (attempt $attempt of 3)"
      sleep $((attempt * 5))
    done
    ((installed)) || die "npm ci of tests/console's packages failed 3 times"
  fi
fi
