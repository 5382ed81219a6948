"""figures.py OUT: for each PyTorch run in OUT (NAME.json with its memory_stats, NAME.pickle
with its snapshot), its device allocations, peak reserved bytes and the offsets of its first
24 segments from its first one, in units of 2 MiB. Called by run.sh and eager.sh."""
import glob, json, os, pickle, sys

for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    st = json.load(open(f))["stats"]
    tr = pickle.load(open(f[:-5] + ".pickle", "rb"))["device_traces"][0]
    segs = [e["addr"] for e in tr if e["action"] == "segment_alloc"]
    print(os.path.basename(f)[:-5], "device allocations", st["num_device_alloc"], "peak reserved", st["reserved_bytes.all.peak"])
    print("   ", " ".join("%+x" % ((a - segs[0]) >> 21) for a in segs[:24]))
