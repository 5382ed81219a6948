#!/usr/bin/env bash
# results_untouched.sh RESULTS STAMP: run after every other test (a CTest fixture), fails if
# any of them wrote under RESULTS (the source tree's results/) after STAMP was made before
# them: tests write only into temporary folders of their own.
set -u
results=${1:?usage: results_untouched.sh RESULTS STAMP}
stamp=${2:?usage: results_untouched.sh RESULTS STAMP}
[ -f "$stamp" ] || { echo "FAIL: no stamp $stamp (the fixture's setup did not run)"; exit 1; }
written=$(find "$results" -newer "$stamp" 2>/dev/null)
if [ -n "$written" ]; then
  echo "FAIL: tests wrote into $results:"
  echo "$written"
  exit 1
fi
echo "results_untouched: nothing written under $results"
