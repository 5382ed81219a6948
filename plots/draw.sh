#!/usr/bin/env bash
# draw.sh [RESULTS_DIR]: draws every figure from the CSVs in RESULTS_DIR (default
# results/latest) into RESULTS_DIR, as NAME.png and NAME.svg. Each figure is one gnuplot
# script of this folder, run as `gnuplot -c SCRIPT INPUT... OUT FMT`; a figure whose CSV is
# missing is passed over with a one-line note. Without gnuplot it says so and draws nothing.
# Each strategy's colour follows its place in the registry, which ALLOCBENCH lists (default:
# the build's binary beside this folder, else an installed one, PREFIX/bin beside
# PREFIX/lib/allocbench/plots, else the one on PATH); without a binary, its place in each file.
set -u
dir=${1:-results/latest}
here=$(cd "$(dirname "$0")" && pwd)
allocbench=${ALLOCBENCH:-$here/../build/allocbench}
[ -x "$allocbench" ] || allocbench=$here/../../../bin/allocbench
[ -x "$allocbench" ] || allocbench=$(command -v allocbench || true)
# The workload whose memory over time is drawn.
timeline_workload=${TIMELINE_WORKLOAD:-dynamic-shapes}

if ! command -v gnuplot >/dev/null 2>&1; then
  echo "plots: gnuplot is not installed (sudo apt-get install -y gnuplot-nox); no figures drawn"
  exit 0
fi
if [ ! -d "$dir" ]; then
  echo "plots: no directory $dir (run make bench first, or give RESULTS=DIR)" >&2
  exit 1
fi

registry=""
if [ -n "$allocbench" ]; then
  registry=$("$allocbench" list --strategies | tr '\n' ' ') || { echo "plots: $allocbench list --strategies failed" >&2; exit 1; }
else
  echo "plots: no allocbench binary (set ALLOCBENCH): each strategy coloured by its place in each file"
fi

status=0
drawn=0
# draw NAME SCRIPT INPUT...: DIR/NAME.png and DIR/NAME.svg from the script over the inputs.
draw() {
  local name=$1 script=$2
  shift 2
  for fmt in png svg; do
    if ! gnuplot -e "REGISTRY = '${registry% }'" -c "$here/$script" "$@" "$dir/$name" "$fmt"; then
      echo "plots: $script failed on $*" >&2
      status=1
      return
    fi
  done
  drawn=$((drawn + 1))
  echo "plots: $dir/$name.png (and .svg)"
}
# have FILE FIGURE: true when FILE is there; otherwise a note that FIGURE is passed over.
have() {
  [ -s "$1" ] && return 0
  echo "plots: no $(basename "$1") in $dir: $2 not drawn"
  return 1
}

# A folder of tune's results alone has none of the bench's files: no notes for them then.
bench=
for f in summary.csv oom.csv micro.csv; do [ -s "$dir/$f" ] && bench=yes; done
[ -s "$dir/tune.csv" ] || bench=yes
if [ -n "$bench" ]; then
  have "$dir/summary.csv" "peak reserved per strategy" && draw peak_reserved peak_reserved.gp "$dir/summary.csv"
  first_timeline=$(ls "$dir"/timeline_"$timeline_workload"_*.csv 2>/dev/null | head -n 1)
  have "${first_timeline:-$dir/timeline_${timeline_workload}_STRATEGY.csv}" "memory over time on $timeline_workload" &&
    draw "timeline_$timeline_workload" timeline.gp "$dir" "$timeline_workload"
  have "$dir/summary.csv" "allocation latency" && draw latency latency.gp "$dir/summary.csv"
  # ZeRO per rank, one GPU against several: results of `run --ranks` (summary.csv) beside those
  # of `run --ranks 1` (one_gpu.csv).
  [ -s "$dir/one_gpu.csv" ] && have "$dir/summary.csv" "ZeRO per rank" &&
    draw zero_ranks zero_ranks.gp "$dir/summary.csv" "$dir/one_gpu.csv"
  have "$dir/oom.csv" "smallest budget per strategy" && draw min_budget min_budget.gp "$dir/oom.csv"
  have "$dir/micro.csv" "micro-benchmarks" && draw micro micro.gp "$dir/micro.csv"
  # The memory map at the fragmenter's OOM (the failing probe of its budget search): the map
  # under caching, PyTorch's allocator, where there is one, else the newest.
  segment_map=$(ls -t "$dir"/oommap_fragmenter*_caching.csv 2>/dev/null | head -n 1)
  [ -n "$segment_map" ] || segment_map=$(ls -t "$dir"/oommap_fragmenter*.csv 2>/dev/null | head -n 1)
  have "${segment_map:-$dir/oommap_fragmenter_STRATEGY.csv}" "memory map at the fragmenter's OOM" &&
    draw oommap_fragmenter oommap.gp "$segment_map"
fi

# The cap maps of `oom --search cap`: the status at every cap, one figure per map.
for map in "$dir"/capmap_*.csv; do
  [ -s "$map" ] || continue
  name=$(basename "$map" .csv)
  draw "$name" capmap.gp "$map"
done

# allocbench tune's figures: its ranking (the last run of tune.csv), and the recorded
# configuration against the recommended one over the job and at the peak.
if [ -s "$dir/tune.csv" ]; then
  draw tune_ranking tune_ranking.gp "$dir/tune.csv"
  have "$dir/tune_timeline.csv" "memory over the job under tune's configurations" &&
    draw tune_timeline tune_timeline.gp "$dir/tune_timeline.csv" "$dir/tune.csv"
  have "$dir/tune_segments.txt" "segment maps at the peak under tune's configurations" &&
    draw tune_segments tune_segments.gp "$dir/tune_segments_recorded.csv" "$dir/tune_segments_recommended.csv" \
      "$dir/tune_segments.txt" "$dir/tune.csv"
fi

echo "plots: $drawn figure(s) in $dir"
exit $status
