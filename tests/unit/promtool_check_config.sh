#!/bin/sh
# `promtool check config FILE` on a Prometheus config the project ships
# (deploy/prometheus/scrape.yml). Without promtool (Debian's `prometheus`
# package, which the test set-up installs): exit 77, which ctest reports as
# skipped, or, under CI=true (or CI=1), a failure naming it
# (tests/support/missing_tool.py is the same rule).
if ! command -v promtool >/dev/null; then
  case "$(printf '%s' "${CI:-}" | tr '[:upper:]' '[:lower:]')" in
    true | 1)
      echo "FAILED: missing promtool (Debian package prometheus), and CI=true requires every tool: bash scripts/setup.sh installs it"
      exit 1
      ;;
  esac
  echo "skipped: missing promtool (Debian package prometheus); bash scripts/setup.sh installs it"
  exit 77
fi
exec promtool check config "$1"
