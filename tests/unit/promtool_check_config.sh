#!/bin/sh
# `promtool check config FILE` on a Prometheus config the project ships
# (deploy/prometheus/scrape.yml); exit 77, which ctest reports as skipped,
# where Debian's `prometheus` package (the test set-up installs it) is absent.
command -v promtool >/dev/null || { echo "promtool not found: skipped"; exit 77; }
exec promtool check config "$1"
