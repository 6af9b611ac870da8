#!/usr/bin/env bash
# Turns the benches' CSVs into PNG charts with gnuplot (Debian: gnuplot-nox).
#
#   bench/charts.sh [dir]        (default: bench/results; charts go there too)
#
# For each <name>.csv in the directory, a function chart_<name> below draws
# <name>*.png from it; a CSV without one is listed and skipped. To chart a new
# bench, add its function.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${1:-$ROOT/bench/results}"

say() { printf 'charts.sh: %s\n' "$*"; }

command -v gnuplot >/dev/null 2>&1 || { say "gnuplot not found (apt-get install gnuplot-nox)"; exit 1; }

# Settings every chart shares: a PNG of a fixed size, CSV input with a header.
common() {
  cat <<EOF
set terminal pngcairo size 900,500 noenhanced font "sans,10"
set datafile separator ","
set key top right
set grid ytics
set style fill solid 0.6 border -1
EOF
}

# B1: median records/s of each side, bars from the slowest to the fastest run.
chart_relay_bench() {
  local csv="$1"
  gnuplot <<EOF
$(common)
set output "$DIR/relay_bench.png"
set title "B1 primary path: records/s relayed to an output topic (median of the runs; bars: slowest..fastest)"
set ylabel "records/s"
set yrange [0:*]
set boxwidth 0.5
set xrange [-0.6:1.6]
plot "$csv" skip 1 using 0:4:xtic(1) with boxes title "median", \
     "" skip 1 using 0:4:5:6 with yerrorbars lc rgb "black" pt 0 title "slowest..fastest"
EOF
}

# B2: healthy throughput with flaky keys over the same run without failures,
# per case, against the target; and the healthy records' p99 latency.
chart_head_of_line_bench() {
  local csv="$1"
  gnuplot <<EOF
$(common)
set output "$DIR/head_of_line_bench.png"
set title "B2 head-of-line: healthy records/s with 10 % flaky keys / without failures"
set ylabel "x the run without failures"
set yrange [0:1.6]
set key top left
set xtics rotate by -35
set boxwidth 0.6
set bmargin 7
set rmargin 10
plot "$csv" skip 1 using 0:7:xtic(sprintf("%s %sk %st", strcol(1), \
       gprintf("%.0f", column(2) / 1000.0), strcol(3))) with boxes title "healthy throughput ratio (median)", \
     "" skip 1 using 0:7:14:15 with yerrorbars lc rgb "black" pt 0 title "least..greatest pair", \
     0.9 with lines lw 2 lc rgb "red" title "target 0.9 (not for IN_ORDER)"
EOF
  gnuplot <<EOF
$(common)
set output "$DIR/head_of_line_latency.png"
set title "B2 head-of-line: p99 end-to-end latency of healthy records (log scale)"
set ylabel "ms"
set logscale y
set key top left
set style data histogram
set style histogram clustered gap 1
set xtics rotate by -35
set bmargin 7
set rmargin 10
plot "$csv" skip 1 using 9:xtic(sprintf("%s %sk %st", strcol(1), \
       gprintf("%.0f", column(2) / 1000.0), strcol(3))) title "no failures", \
     "" skip 1 using 11 title "10 % flaky keys"
EOF
}

# B3: scaling efficiency of n retry threads, one line per processor.
chart_retry_drain_bench() {
  local csv="$1" plots="" name
  while IFS= read -r name; do
    plots+="${plots:+, }\"$csv\" skip 1 using 2:(strcol(1) eq \"$name\" ? column(7) : NaN) with linespoints lw 2 title \"$name\""
  done < <(tail -n +2 "$csv" | cut -d, -f1 | sort -u)
  gnuplot <<EOF
$(common)
set output "$DIR/retry_drain_bench.png"
set title "B3 retry drain: scaling efficiency T1 / (n x Tn), 2 ms per call"
set xlabel "retry threads"
set ylabel "efficiency"
set logscale x 2
set yrange [0:1.3]
set key bottom left
plot $plots, 0.8 with lines lw 2 lc rgb "red" title "target 0.8 at 8 threads"
EOF
}

# B4: GetStatus latency idle and under load; engine throughput beside the
# watchers and a GetStatus loop, as a ratio to the engine alone.
chart_control_plane_latency() {
  local csv="$1"
  gnuplot <<EOF
$(common)
set output "$DIR/control_plane_latency.png"
set title "B4 control plane: GetStatus latency over loopback gRPC"
set ylabel "ms"
set yrange [0:*]
set style data histogram
set style histogram clustered gap 1
plot "$csv" skip 1 using 3:xtic(1) title "p50", "" skip 1 using 4 title "p99", \
     2 with lines lw 2 lc rgb "red" title "target: p99 < 2 ms"
EOF
}

chart_control_plane_throughput() {
  local csv="$1"
  gnuplot <<EOF
$(common)
set output "$DIR/control_plane_throughput.png"
set title "B4 control plane: engine records/s beside control-plane clients / alone (medians)"
set ylabel "x the engine alone"
set yrange [0:1.3]
set boxwidth 0.5
set key bottom right
plot "$csv" skip 1 using 0:6:xtic(1) with boxes title "x alone", \
     0.95 with lines lw 2 lc rgb "red" title "target: watchers cost < 5 %"
EOF
}

# B5: peak (held) or resident (idle) memory above the process's baseline.
chart_memory_bench() {
  local csv="$1"
  gnuplot <<EOF
$(common)
set output "$DIR/memory_bench.png"
set title "B5 memory: MiB above the baseline (peak while 50,000 records are held; RSS when idle)"
set ylabel "MiB"
set yrange [0:*]
set boxwidth 0.5
set xtics rotate by -20
set bmargin 6
plot "$csv" skip 1 using 0:4:xtic(1) with boxes title "above baseline"
EOF
}

# The peers bench (scripts/bench.sh peers), one chart per workload: each
# side's healthy records/s and CPU per record over the best peer's and over
# the bare relay's (the latter in the no-failure, 0 ms workload only). A
# ratio no row has (no bare relay, no peer run) is left out.
chart_peers() {
  local csv="$1" name="$2" plots="" series title column
  for series in "healthy_x_best_peer:healthy records/s x best peer" \
    "cpu_x_best_peer:CPU per record x best peer" "healthy_x_bare:healthy records/s x bare relay" \
    "cpu_x_bare:CPU per record x bare relay"; do
    title="${series#*:}"
    column="$(head -n 1 "$csv" | tr ',' '\n' | grep -n -x "${series%%:*}" | cut -d: -f1)"
    [[ -n "$column" ]] || continue
    awk -F, -v c="$column" 'NR > 1 && $c != "-" { found = 1 } END { exit !found }' "$csv" ||
      continue
    plots+="${plots:+, }\"$csv\" skip 1 using $column:xtic(2) title \"$title\""
  done
  if [[ -z "$plots" ]]; then
    say "no ratios in $name.csv (no peer and no bare relay ran): no chart"
    return 1
  fi
  gnuplot <<EOF
$(common)
set datafile missing "-"
set output "$DIR/$name.png"
set title "retryd and its peers, ${name#peers_}: ratios, log scale (1 = the best peer; CPU: lower is better)"
set ylabel "ratio"
set logscale y
set yrange [0.005:*]
set key below horizontal
set style data histogram
set style histogram clustered gap 1
set xtics rotate by -20
set bmargin 6
plot $plots, 1 with lines lw 1 lc rgb "black" notitle
EOF
}

# B6 (scripts/bench.sh peers): retryd's CPU per record and healthy
# records/s over the bare relay's, by the partition count of every topic.
chart_b6_partitions() {
  local csv="$1"
  gnuplot <<EOF
$(common)
set datafile missing "-"
set output "$DIR/b6_partitions.png"
set title "B6 partitions: retryd (unordered) over the bare relay, no failures, 0 ms"
set ylabel "x the bare relay"
set yrange [0:*]
set style data histogram
set style histogram clustered gap 1
set key below horizontal
plot "$csv" skip 1 using 5:xtic(1) title "CPU per record", \
     "" skip 1 using 8 title "healthy records/s", \
     1.1 with lines lw 2 lc rgb "red" title "CPU target: 1.1 x"
EOF
}

# B6: CPU with held work over the same scenario without (size 0): idle CPU
# with a retry backlog, CPU per healthy record with keys parked; and the
# engine's memory: RSS over its start, as it stands and trimmed, beside what
# the retry threads hold by their own count.
chart_held_work_bench() {
  local csv="$1"
  gnuplot <<EOF
$(common)
set terminal pngcairo size 1200,500 noenhanced font "sans,10"
set output "$DIR/held_work_bench.png"
set multiplot layout 1,2 title "B6 held work (medians of the rounds)"
set style data histogram
set style histogram clustered gap 1
set xtics rotate by -20
set bmargin 6
set key top left
set title "CPU x size 0 (idle ms/s; us per healthy record)"
set yrange [0:1.6]
plot "$csv" skip 1 using 10:xtic(sprintf("%s %s", strcol(1), strcol(2))) title "CPU", \
     1 with lines lw 2 lc rgb "red" title "size 0"
set title "engine memory, MiB"
set yrange [0:*]
plot "$csv" skip 1 using 13:xtic(sprintf("%s %s", strcol(1), strcol(2))) title "RSS over start", \
     "" skip 1 using 16 title "trimmed (in use)", \
     "" skip 1 using 5 title "held by the retry threads' count"
unset multiplot
EOF
}

shopt -s nullglob
drawn=0
for csv in "$DIR"/*.csv; do
  name="$(basename "$csv" .csv)"
  if [[ "$name" == peers_* ]]; then
    if chart_peers "$csv" "$name"; then
      drawn=$((drawn + 1))
      say "charted $name"
    fi
  elif declare -F "chart_$name" >/dev/null; then
    "chart_$name" "$csv"
    drawn=$((drawn + 1))
    say "charted $name"
  else
    say "no chart for $name.csv (add chart_$name to bench/charts.sh)"
  fi
done
say "$drawn CSV files charted in $DIR"
