#!/usr/bin/env python3
"""compare.py ALLOCBENCH [OUT]: allocbench's predictions for the capped job beside what PyTorch
measured (measured.txt, from run.sh), into OUT/comparison.csv (default: this folder).

For each recording (gc.pickle.gz, nogc.pickle.gz at 17 GB; *_16GB at 16 GB):
  replay   `allocbench replay REC --cap CAP` under the recorded settings (on the simulated
           card, each cudaMalloc at the address the recorded run got), against PyTorch's
           run again and against the recorded run itself (record_*.txt: what the job printed
           while it was recorded);
  tune     every row of `allocbench tune -w replay:REC --cap CAP` whose setting PyTorch ran;
  what-if  `allocbench replay REC -s caching -c CONF --cap CAP` for every setting PyTorch ran
           that tune does not try (where the card places every segment itself);
and the uncapped what-ifs of ../job.pickle.gz (`replay -c CONF`), where the card places every
segment itself. A row is equal when peak reserved bytes and device allocations both are.
"""
import csv
import io
import os
import re
import subprocess
import sys
import tempfile

ab = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[2] if len(sys.argv) > 2 else here
tmp = tempfile.mkdtemp()


def norm(conf):
    return ",".join(sorted(p for p in conf.split(",") if p))


measured = {}  # (cap or None, normalised conf) -> stats
key = None
for line in open(os.path.join(here, "measured.txt")):
    m = re.match(r"== (?:cap (\d+)|uncapped) conf '(.*)'", line)
    if m:
        key = (m.group(1), norm(m.group(2)))
        measured[key] = {}
        continue
    parts = line.split()
    if key and len(parts) == 2 and parts[1].isdigit():
        measured[key][parts[0]] = int(parts[1])


def run(args):
    p = subprocess.run([ab] + args + ["--device", "sim:h200", "--format", "csv", "--out", tmp, "-q"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("compare.py: %s exited %d: %s" % (" ".join(args), p.returncode, p.stderr.strip()))
    return list(csv.DictReader(io.StringIO(p.stdout)))


rows = []


def recorded_run(name):
    stats = {}
    for line in open(os.path.join(here, "record_%s.txt" % name)):
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            stats[parts[0]] = int(parts[1])
    return stats


def add(recording, cap, conf, how, pred, want=None):
    want = want or measured.get((cap, norm(conf)))
    if not want or "reserved_bytes.all.peak" not in want:
        return
    got = (int(pred["peak_reserved_bytes"]), int(pred["num_device_alloc"]))
    ref = (want["reserved_bytes.all.peak"], want["num_device_alloc"])
    rows.append([recording, cap or "", conf or "(defaults)", how, got[0], ref[0], got[1], ref[1], int(got == ref)])


recorded = {"gc": "garbage_collection_threshold:0.7,max_split_size_mb:128", "nogc": ""}
for cap, suffix in (("17000000000", ""), ("16000000000", "_16GB")):
    for name, conf in recorded.items():
        rec = os.path.join(here, name + suffix + ".pickle.gz")
        replayed = run(["replay", rec, "--cap", cap + "B", "--no-timeline"])[-1]
        add(name + suffix, cap, conf, "replay", replayed)
        add(name + suffix, cap, conf, "replay, against the recorded run", replayed, recorded_run(name + suffix))
        tried = set()
        for row in run(["tune", "-w", "replay:" + rec, "--cap", cap + "B"]):
            if row["strategy"] == "caching":
                add(name + suffix, cap, row["conf"], "tune", row)
                tried.add(norm(row["conf"]))
        for (at, conf) in measured:
            if at == cap and conf not in tried:
                add(name + suffix, cap, conf, "what-if",
                    run(["replay", rec, "-s", "caching", "-c", conf, "--cap", cap + "B", "--no-timeline"])[-1])
for (cap, conf) in measured:
    if cap is None:
        job = os.path.join(os.path.dirname(here), "job.pickle.gz")
        add("../job", None, conf, "replay -c", run(["replay", job, "-s", "caching", "-c", conf, "--no-timeline"])[-1])

with open(os.path.join(out, "comparison.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["recording", "cap_bytes", "conf", "how", "predicted_peak_reserved_bytes", "measured_peak_reserved_bytes",
                "predicted_num_device_alloc", "measured_num_device_alloc", "equal"])
    w.writerows(rows)
equal = sum(r[-1] for r in rows)
print("compare.py: %d of %d predictions equal PyTorch's peak reserved bytes and device allocations" % (equal, len(rows)))
for r in rows:
    if not r[-1]:
        print("  differs: %s cap %s %s (%s): predicted %d bytes, %d allocations; PyTorch %d, %d"
              % (r[0], r[1] or "none", r[2], r[3], r[4], r[6], r[5], r[7]))
