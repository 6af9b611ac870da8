#!/usr/bin/env bash
# scripts/ctest_run.sh on a small ctest project of its own: a test that
# aborts once in librdkafka's known crash is run once more and passes; the
# same crash twice, a crash beside another failure, and any other failure
# fail.
#
#   ctest_run_self_test.sh ROOT CMAKE GENERATOR
set -euo pipefail

ROOT="$1" CMAKE="$2" GENERATOR="$3"
# shellcheck source=scripts/ctest_run.sh
source "$ROOT/scripts/ctest_run.sh"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# A test that prints the crash line and aborts while $work/crash-NAME holds
# a count above zero, counting down each run.
cat >"$work/crash.sh" <<'EOF'
#!/usr/bin/env bash
counter="$1"
n="$(cat "$counter" 2>/dev/null || echo 0)"
if ((n > 0)); then
  echo $((n - 1)) >"$counter"
  echo "e2e_tests: rdkafka_broker.c:4616: rd_kafka_broker_destroy_final: Assertion \`thrd_is_current(rkb->rkb_thread)' failed." >&2
  kill -ABRT $$
fi
exit 0
EOF
cat >"$work/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.25)
project(ctest_run_self_test NONE)
enable_testing()
add_test(NAME passes COMMAND /bin/true)
add_test(NAME crashes COMMAND /usr/bin/bash $work/crash.sh $work/crash-count)
add_test(NAME other COMMAND /usr/bin/bash -c "test ! -e $work/other-fails")
EOF
"$CMAKE" -S "$work" -B "$work/build" -G "$GENERATOR" >/dev/null

failures=0
# check WHAT VERDICT CRASHING-RUNS OTHER-FAILURE SECOND-RUN: runs run_ctest
# with that many runs of `crashes` aborting in the crash, and `other`
# failing or not; wants the verdict (passes/fails) and a second run or not.
check() {
  local what="$1" want="$2" crashes="$3" other="$4" want_rerun="$5"
  echo "$crashes" >"$work/crash-count"
  rm -f "$work/other-fails"
  if [[ "$other" == yes ]]; then touch "$work/other-fails"; fi
  local rc=0
  run_ctest "$work/build" --output-on-failure --no-tests=error >"$work/out" 2>&1 || rc=$?
  local got=passes reran=no
  ((rc == 0)) || got=fails
  if grep -q "running them once more" "$work/out"; then reran=yes; fi
  if [[ "$got" != "$want" || "$reran" != "$want_rerun" ]]; then
    echo "FAIL: $what: run_ctest $got (second run: $reran), want $want (second run: $want_rerun)"
    sed 's/^/  | /' "$work/out"
    failures=$((failures + 1))
  else
    echo "ok: $what: $got (second run: $reran)"
  fi
}

check "nothing fails" passes 0 no no
check "the crash once" passes 1 no yes
check "the crash twice" fails 2 no yes
check "the crash beside another failure" fails 1 yes no
check "another failure alone" fails 0 yes no

if ((failures > 0)); then
  echo "ctest_run_self_test: $failures case(s) failed"
  exit 1
fi
echo "ctest_run_self_test: every case as expected"
