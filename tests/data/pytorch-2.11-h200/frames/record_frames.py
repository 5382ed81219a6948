# Records two snapshots with call stacks: a small MLP trained with AdamW, 300 steps with
# stacks="python", then 40 steps with stacks="all" (Python, TorchScript and C++ frames), each
# dumped by torch.cuda.memory._dump_snapshot() and gzipped, into $OUT. Run as /tmp/g.py, the
# name its frames show.
import torch, pickle, gzip, os
print(torch.__version__, torch.cuda.get_device_name())
out = os.environ['OUT']
def work(n):
    m = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512)).cuda()
    opt = torch.optim.AdamW(m.parameters())
    for i in range(n):
        x = torch.randn(64 + (i % 7) * 8, 512, device='cuda')
        m(x).square().mean().backward()
        opt.step(); opt.zero_grad()
    torch.cuda.synchronize()
for stacks, name, n in (("python", "py", 300), ("all", "all", 40)):
    torch.cuda.memory._record_memory_history(max_entries=100000, stacks=stacks)
    work(n)
    p = out + '/' + name + '.pickle'
    torch.cuda.memory._dump_snapshot(p)
    torch.cuda.memory._record_memory_history(enabled=None)
    s = pickle.load(open(p, 'rb'))
    t = s['device_traces'][0]
    a = [e for e in t if e['action'] == 'alloc']
    print(name, len(t), len(a), os.path.getsize(p), a[-1].get('frames', [])[:2] if a else None)
    with open(p, 'rb') as f, gzip.open(p + '.gz', 'wb') as g: g.write(f.read())
    os.remove(p)
