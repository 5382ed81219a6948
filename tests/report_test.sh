#!/usr/bin/env bash
# report_test.sh ALLOCBENCH DATA_DIR: the page of each kind of results folder (tune of the
# recorded job with --report; matrix, oom and compare through `allocbench report`) holds the
# answer, the table and its figures, stays within the size budget of results/README.md, and loads
# in headless Chromium with nothing on the console, nothing fetched, every figure drawn and
# inked, and prints (report_page.py). Skipped (77) without a browser, gnuplot or python3.
set -u
ab=${1:?usage: report_test.sh ALLOCBENCH DATA_DIR}
data=${2:?usage: report_test.sh ALLOCBENCH DATA_DIR}
here=$(cd "$(dirname "$0")" && pwd)
browser=
for b in chromium-headless-shell chromium; do command -v $b >/dev/null 2>&1 && browser=$b && break; done
[ -n "$browser" ] || { echo "skipped: no headless Chromium (sudo apt-get install -y chromium-headless-shell)"; exit 77; }
command -v gnuplot >/dev/null 2>&1 || { echo "skipped: no gnuplot to draw the figures (sudo apt-get install -y gnuplot-nox)"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "skipped: no python3 to read the page"; exit 77; }
py=$(python3 -c 'import sys; print(sys.executable)')
source "$here/lib.sh"
# The budget of results/README.md, "One page to share".
budget=$((1536 * 1024))

# page KIND DIR MIN_FIGURES SAYS...: DIR/report.html exists, is within the budget, holds each
# SAYS, a table and MIN_FIGURES figures, and renders in the browser.
page() {
  local kind=$1 dir=$2 figures=$3 size
  shift 3
  [ -s "$dir/report.html" ] || { fail "$kind: no report.html"; return; }
  size=$(wc -c <"$dir/report.html")
  [ "$size" -le $budget ] || fail "$kind: the page is $size bytes, over the budget of $budget"
  for says in "<table>" "allocbench report $dir" "Written by allocbench 0." "$@"; do
    grep -qF -- "$says" "$dir/report.html" || fail "$kind: the page does not say '$says'"
  done
  mkdir -p "$work/browser-$kind"
  "$py" "$here/report_page.py" "$browser" "$dir/report.html" "$work/browser-$kind" "$figures" || fail "$kind: in $browser"
}

# tune --report on the recorded job: the line to paste first, the saving, the ranking, three
# figures, what the trace holds, the command.
trace=$data/pytorch-2.11-h200/cnn_dyn.default.pickle.gz
"$ab" tune -w "replay:$trace" --report --out "$work/tune" >"$work/out" 2>"$work/err" || fail "tune --report: $(cat "$work/err")"
grep -q "the page to share: $work/tune/report.html" "$work/err" || fail "tune --report does not name its page: $(tail -n 3 "$work/err")"
page tune "$work/tune" 3 "export PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'" \
  "2.98 GiB less (28.8%) at the peak" "<tr class=\"win\"><td class=\"n\">2</td><td>caching</td><td class=\"conf\">expandable_segments:True</td>" \
  'id="tune_ranking"' 'id="tune_timeline"' 'id="tune_segments"' "pytorch-snapshot" \
  "allocbench tune -w replay:$trace --report --out $work/tune"
# The answer comes first, before the table.
"$py" - "$work/tune/report.html" <<'PY' || fail "tune: the answer is not before the table"
import sys
t = open(sys.argv[1]).read()
sys.exit(0 if 0 < t.find("export PYTORCH_CUDA_ALLOC_CONF") < t.find("<table>") else 1)
PY

# A job of two traces (two recorded programs, as two ranks): a panel per trace over the job,
# the worst trace named in the table. Two small runs of tests/data: the page of a job is made
# alike for any size of trace, and tune of the ResNet-50 run above takes twenty times as long.
"$ab" tune -w "replay:$data/pytorch-2.11-h200/blame/frag.pickle" -w "replay:$data/pytorch-2.11-h200/pools/compiled.pickle.gz" \
  --report --out "$work/job" >/dev/null 2>"$work/err" || fail "tune --report of two traces: $(cat "$work/err")"
[ "$(cut -d, -f1 "$work/job/tune_timeline.csv" | sort -u | grep -c '^replay:')" -eq 2 ] || fail "tune_timeline.csv of two traces has not both"
page job "$work/job" 3 "<th>worst trace</th>" "on every trace of the job"

# With --format csv stdout keeps to the rows: the drawing's progress goes to stderr.
"$ab" tune -w random:ops=2000 --report --format csv --out "$work/csv" >"$work/rows.csv" 2>"$work/err" ||
  fail "tune --report --format csv: $(cat "$work/err")"
grep -q "^plots: " "$work/rows.csv" && fail "tune --report --format csv printed the drawing's progress among the rows"
cmp -s "$work/rows.csv" "$work/csv/tune.csv" || fail "tune --report --format csv printed other than tune.csv: $(head -n 3 "$work/rows.csv")"
[ -s "$work/csv/report.html" ] || fail "tune --report --format csv wrote no page"

# A matrix folder, an oom folder and a compare folder, each through `allocbench report`.
"$ab" matrix --quick -w random -w fragmenter -s caching,expandable --device sim --out "$work/matrix" >/dev/null 2>"$work/err" ||
  fail "matrix: $(cat "$work/err")"
"$ab" report "$work/matrix" >"$work/out" 2>"$work/err" || fail "report of the matrix: $(cat "$work/err")"
grep -q "allocbench report: $work/matrix/report.html" "$work/out" || fail "report does not name its page: $(cat "$work/out")"
page matrix "$work/matrix" 3 "<b>fragmenter</b>:" "runs in the smallest budget" 'id="peak_reserved"' 'id="min_budget"' \
  'id="oommap_fragmenter"' "allocbench matrix --quick -w random -w fragmenter -s caching,expandable --device sim --out $work/matrix"
"$ab" oom -w fragmenter -s caching,expandable --device sim --out "$work/oom" >/dev/null 2>"$work/err" || fail "oom: $(cat "$work/err")"
"$ab" report "$work/oom" >/dev/null 2>"$work/err" || fail "report of oom: $(cat "$work/err")"
page oom "$work/oom" 1 "allocbench oom: 1 workload, 2 strategies" 'id="min_budget"'
"$ab" compare -w random:ops=2000 -s caching,raw --device sim --out "$work/compare" >/dev/null 2>"$work/err" ||
  fail "compare: $(cat "$work/err")"
"$ab" report "$work/compare" -o "$work/compare.html" >/dev/null 2>"$work/err" || fail "report -o: $(cat "$work/err")"
cp "$work/compare.html" "$work/compare/report.html"
page compare "$work/compare" 2 "allocbench compare: 1 workload, 2 strategies" "for memory and time, <b>caching</b>" \
  "For reference: raw (the baseline"

# Refused: no folder, a folder without results, a results file that is not CSV.
refuse "the results folder is required" report
mkdir -p "$work/empty"
refuse "holds no results of tune, compare, matrix, oom or blame" report "$work/empty"
mkdir -p "$work/broken"
printf 'workload,strategy\n"unclosed,raw\n' >"$work/broken/summary.csv"
refuse "summary.csv: line 2: a quoted field is not closed" report "$work/broken"
# Another program's CSV under a results file's name: the column the page needs, named.
mkdir -p "$work/foreign"
printf 'workload,strategy\nrandom,raw\n' >"$work/foreign/summary.csv"
refuse "summary.csv: line 1: no column 'conf' (expected the header allocbench writes for summary.csv)" report "$work/foreign"
[ "$(ls "$work/foreign")" = summary.csv ] || fail "a refused report wrote into the folder: $(ls "$work/foreign")"

# set_field FILE LINE COLUMN VALUE: the field of the CSV FILE at LINE (1: the header) in COLUMN
# becomes VALUE, written as allocbench writes its files.
set_field() {
  "$py" - "$@" <<'PY'
import csv, sys
path, line, column, value = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = list(csv.reader(open(path, newline="")))
rows[line - 1][rows[0].index(column)] = value
csv.writer(open(path, "w", newline=""), lineterminator="\n").writerows(rows)
PY
}

# A malformed number is refused before anything is drawn, naming the file, the line and the
# column: read as strtoull reads it, 'abc' would show as 0 B and '-5' as 16 EiB.
mkdir -p "$work/number"
for value in abc -5 12abc 1e9 " 12" 18446744073709551616 ""; do
  cp "$work/csv/tune.csv" "$work/number/tune.csv"
  set_field "$work/number/tune.csv" 3 peak_reserved_bytes "$value"
  refuse "number/tune.csv: line 3, column 'peak_reserved_bytes': '$value' is not a whole number of bytes" report "$work/number"
  [ "$(ls "$work/number")" = tune.csv ] || fail "a refused report wrote into the folder: $(ls "$work/number")"
done
cp "$work/matrix/summary.csv" "$work/number/summary.csv"
rm "$work/number/tune.csv"
set_field "$work/number/summary.csv" 2 alloc_ns_p50 1.5e3
refuse "number/summary.csv: line 2, column 'alloc_ns_p50': '1.5e3' is not a number, whole or with decimals" report "$work/number"
# What allocbench itself writes stays accepted: an empty budget (a search that found none), a
# time with decimals.
set_field "$work/number/summary.csv" 2 alloc_ns_p50 1234.5
cp "$work/oom/oom.csv" "$work/number/oom.csv"
set_field "$work/number/oom.csv" 2 min_budget_bytes ""
AB_PLOTS_DIR=$work/empty "$ab" report "$work/number" >/dev/null 2>"$work/err" || fail "report of empty and decimal fields: $(cat "$work/err")"

# Every text of a results file goes into the page escaped.
inject='<script>alert(1)</script>'
mkdir -p "$work/inject"
cp "$work/csv/tune.csv" "$work/inject/tune.csv"
set_field "$work/inject/tune.csv" 2 status "$inject"
set_field "$work/inject/tune.csv" 2 strategy "$inject"
set_field "$work/inject/tune.csv" 2 note "$inject"
AB_PLOTS_DIR=$work/empty "$ab" report "$work/inject" >/dev/null 2>"$work/err" || fail "report of text to escape: $(cat "$work/err")"
grep -qF "&lt;script&gt;alert(1)&lt;/script&gt;" "$work/inject/report.html" || fail "tune: the injected status is not on the page"
grep -qF "<script>" "$work/inject/report.html" && fail "tune: a field of tune.csv went into the page unescaped"
"$ab" blame "$data/pytorch-2.11-h200/blame/frag.pickle" --out "$work/blame" >/dev/null 2>"$work/err" || fail "blame: $(cat "$work/err")"
# Each text where the page shows it: the site and its stack on a site's row, the change and the
# kind of cap on a change's row, the trace and the strategy on every row (the page shows the
# last blame, the rows at the end with one trace).
"$py" - "$work/blame/blame.csv" "$inject" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
h = rows[0]
for row in rows[1:]:
    change = row[h.index("change")] != ""
    for column in ("trace", "strategy") + (("change", "cap_kind") if change else ("site", "stack")):
        row[h.index(column)] = sys.argv[2]
csv.writer(open(sys.argv[1], "w", newline=""), lineterminator="\n").writerows(rows)
PY
AB_PLOTS_DIR=$work/empty "$ab" report "$work/blame" >/dev/null 2>"$work/err" || fail "report of blame: $(cat "$work/err")"
grep -qF "&lt;script&gt;alert(1)&lt;/script&gt;" "$work/blame/report.html" || fail "blame: the injected fields are not on the page"
grep -qF "<script>" "$work/blame/report.html" && fail "blame: a field of blame.csv went into the page unescaped"

# A NUL byte is refused, not taken for the end of the file, which would drop every row after it.
mkdir -p "$work/nul"
"$py" -c 'import sys; d = open(sys.argv[1], "rb").read(); open(sys.argv[2], "wb").write(d.replace(b"\n", b"\n\0", 1))' \
  "$work/csv/tune.csv" "$work/nul/tune.csv"
refuse "nul/tune.csv: line 2: a NUL byte (expected text)" report "$work/nul"

# More workloads than a table of fixed size would hold: every one of them is on the page.
mkdir -p "$work/many"
"$py" - "$work/matrix/summary.csv" "$work/many/summary.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
column = rows[0].index("workload")
many = [rows[0]] + [rows[1 + i % (len(rows) - 1)][:column] + ["replay:w%02d.pickle" % i] + rows[1 + i % (len(rows) - 1)][column + 1:]
                    for i in range(70)]
csv.writer(open(sys.argv[2], "w", newline=""), lineterminator="\n").writerows(many)
PY
AB_PLOTS_DIR=$work/empty "$ab" report "$work/many" >/dev/null 2>"$work/err" || fail "report of 70 workloads: $(cat "$work/err")"
grep -qF "allocbench matrix: 70 workloads" "$work/many/report.html" || fail "the page of 70 workloads does not count them"
[ "$(grep -o '<tr><td>replay:w[0-9]*' "$work/many/report.html" | sort -u | wc -l)" -eq 70 ] ||
  fail "the table of 70 workloads has $(grep -o '<tr><td>replay:w[0-9]*' "$work/many/report.html" | sort -u | wc -l) rows"

# draw.sh failing: the page is written (exit 0) and says that a figure is missing.
mkdir -p "$work/failing"
printf 'echo "plots: one.gp failed" >&2\nexit 3\n' >"$work/failing/draw.sh"
AB_PLOTS_DIR=$work/failing "$ab" report "$work/oom" >/dev/null 2>"$work/err" || fail "report with draw.sh failing: $(cat "$work/err")"
grep -qF "plots/draw.sh exited 3: a figure it failed to draw is missing here" "$work/oom/report.html" ||
  fail "the page does not say that draw.sh failed"

finish report_test
