# shellcheck shell=bash
# Sourced by scripts/test.sh, sanitize.sh and tsan.sh: runs ctest, and
# runs once more the failed tests that died of one known crash inside
# librdkafka 2.0.2 itself, when that crash is all that failed.
#
#   run_ctest BUILD_DIR [ctest args...]
#
# The crash: `rd_kafka_broker_destroy_final: Assertion
# thrd_is_current(rkb->rkb_thread) failed`, librdkafka issue 3608, open
# upstream. A broker thread whose connection fails refreshes metadata
# through another broker object; if the client is being destroyed and that
# other broker's thread has just dropped its own reference, the last
# reference goes on the wrong thread and librdkafka aborts. It strikes a
# short-lived client at its destroy, rarely (once in a CI run of thousands of
# such destroys), and the tests' helpers make such clients all the time.
#
# Only that crash earns a second run, only when every failed test shows it,
# and only once: any other failure, or the same crash twice, fails the step.
# The second run is announced with the tests' names.

# The line librdkafka prints when it aborts there.
CTEST_UPSTREAM_CRASH="rd_kafka_broker_destroy_final: Assertion \`thrd_is_current(rkb->rkb_thread)' failed"

# The failed tests of the last ctest run in $1 whose output shows the crash,
# one name a line; the other failed tests go to $2 (a file).
ctest_upstream_crashes() {
  local dir="$1/Testing/Temporary" others="$2"
  awk -v sig="$CTEST_UPSTREAM_CRASH" -v failed_file="$dir/LastTestsFailed.log" -v others="$others" '
    BEGIN {
      while ((getline line < failed_file) > 0) {
        sub(/^[0-9]+:/, "", line)
        if (line != "") failed[line] = 1
      }
    }
    /^[0-9]+\/[0-9]+ Testing: / { name = $0; sub(/^[0-9]+\/[0-9]+ Testing: /, "", name); next }
    index($0, sig) > 0 && name != "" { crashed[name] = 1 }
    END {
      for (n in failed) {
        if (n in crashed) print n
        else print n > others
      }
    }' "$dir/LastTest.log"
}

run_ctest() {
  local build_dir="$1"
  shift
  local rc=0
  ctest --test-dir "$build_dir" "$@" || rc=$?
  ((rc != 0)) || return 0
  local tmp="$build_dir/Testing/Temporary"
  [[ -s "$tmp/LastTestsFailed.log" && -f "$tmp/LastTest.log" ]] || return "$rc"
  local others crashed
  others="$(mktemp)"
  crashed="$(ctest_upstream_crashes "$build_dir" "$others")"
  if [[ -z "$crashed" || -s "$others" ]]; then
    rm -f "$others"
    return "$rc"
  fi
  rm -f "$others"
  printf 'ctest_run: these tests aborted in librdkafka 2.0.2 (issue 3608, %s), and nothing else failed; running them once more:\n' \
    "rd_kafka_broker_destroy_final" >&2
  local names
  mapfile -t names <<<"$crashed"
  printf '  %s\n' "${names[@]}" >&2
  # --rerun-failed keeps the first run's timeout and output settings only if
  # given again; the label filters are not needed, the list is the failed one.
  local args=() a
  for a in "$@"; do
    case "$a" in
      --output-on-failure | --no-tests=error) args+=("$a") ;;
    esac
  done
  ctest --test-dir "$build_dir" "${args[@]}" --timeout 900 --rerun-failed
}
