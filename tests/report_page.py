"""report_page.py BROWSER PAGE WORK MIN_FIGURES: loads one page of `allocbench report` in headless
Chromium and checks that it renders as a page to share: nothing logged to the console, no
resource loaded from anywhere (the page is self-contained), every figure drawn (its size on the
page, and its part of a screenshot neither blank nor of one colour), and that it prints (a PDF of
one page or more). Prints one FAIL line per failed check; exits 1 if any.

Chromium is driven by its own flags: --dump-dom runs a copy of the page with a probe script
appended, which writes what it measured into the DOM; --screenshot and --print-to-pdf take the
page itself. The PNG is read with zlib alone (no imaging library)."""
import json, os, re, struct, subprocess, sys, zlib

browser, page, work, min_figures = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
fails = []
def fail(msg): fails.append(msg)

# Any host name resolves to nothing: a page that tried the network could not load it anyway,
# and the probe counts what it tried.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0"]
WIDTH = 1280

def chromium(*args):
    r = subprocess.run([browser] + FLAGS + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")

html = open(page, encoding="utf-8").read()
# The page as written: no script, nothing fetched (the SVG namespaces are names, not fetches).
for what, pattern in (("a script", r"<script"), ("a fetched source", r"\ssrc\s*="), ("a linked file", r"<link"),
                      ("an import", r"@import"), ("an external url()", r"url\((?!#)"),
                      ("an address", r"(?:https?:)?//(?!www\.w3\.org/(?:2000/svg|1999/xlink))[a-z0-9.-]+\.[a-z]{2,}/")):
    m = re.search(pattern, html, re.I)
    if m: fail("the page holds %s: ...%s..." % (what, html[max(0, m.start() - 40):m.end() + 40]))

PROBE = """<script>
(function () {
  var out = {figures: [], resources: performance.getEntriesByType('resource').length,
             height: document.documentElement.scrollHeight};
  document.querySelectorAll('figure').forEach(function (f) {
    var s = f.querySelector('svg'), r = (s || f).getBoundingClientRect();
    out.figures.push({id: f.id, svg: !!s, w: r.width, h: r.height, x: r.left + scrollX, y: r.top + scrollY});
  });
  var p = document.createElement('pre');
  p.id = 'ab-probe';
  p.textContent = JSON.stringify(out);
  document.body.appendChild(p);
})();
</script>"""
probe_page = os.path.join(work, "probe.html")
open(probe_page, "w", encoding="utf-8").write(html.replace("</body>", PROBE + "</body>"))
rc, dom, err = chromium("--window-size=%d,1000" % WIDTH, "--dump-dom", "file://" + probe_page)
console = [l for l in err.splitlines() if ":CONSOLE" in l]
if rc != 0: fail("chromium --dump-dom exited %d: %s" % (rc, err[-500:]))
if console: fail("the console says: %s" % " | ".join(console[:5]))
m = re.search(r'<pre id="ab-probe">(.*?)</pre>', dom, re.S)
if not m:
    fail("the probe wrote nothing: the page did not load (%s)" % err[-300:])
    probe = {"figures": [], "resources": 0, "height": 1000}
else:
    probe = json.loads(m.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
if probe["resources"]: fail("the page loaded %d resources" % probe["resources"])
figs = probe["figures"]
if len(figs) < min_figures: fail("%d figures, expected at least %d" % (len(figs), min_figures))
for f in figs:
    if not f["svg"]: fail("figure %s has no SVG" % f["id"])
    elif f["w"] < 400 or f["h"] < 150: fail("figure %s is drawn %dx%d px" % (f["id"], f["w"], f["h"]))

# The page itself, whole, in one screenshot; each figure's part of it must have ink.
def read_png(path):
    d = open(path, "rb").read()
    if d[:8] != b"\x89PNG\r\n\x1a\n": raise ValueError("not a PNG")
    pos, idat = 8, []
    while pos < len(d):
        n, kind = struct.unpack(">I4s", d[pos:pos + 8])
        body = d[pos + 8:pos + 8 + n]
        if kind == b"IHDR": w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT": idat.append(body)
        pos += 12 + n
    if depth != 8 or ctype not in (2, 6) or interlace: raise ValueError("a PNG of depth %d, type %d" % (depth, ctype))
    bpp = 3 if ctype == 2 else 4
    raw, stride, prev, rows = zlib.decompress(b"".join(idat)), w * bpp, bytearray(w * bpp), []
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride): line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride): line[i] = (line[i] + ((line[i - bpp] if i >= bpp else 0) + prev[i]) // 2) & 255
        elif f == 4:
            for i in range(stride):
                a, b = (line[i - bpp] if i >= bpp else 0), prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows

shot = os.path.join(work, "shot.png")
height = min(int(probe["height"]) + 20, 16000)
# A small device scale keeps the screenshot small enough to read in Python.
rc, _, err = chromium("--window-size=%d,%d" % (WIDTH, height), "--force-device-scale-factor=0.25",
                      "--screenshot=" + shot, "file://" + os.path.abspath(page))
try:
    w, h, bpp, rows = read_png(shot)
except (OSError, ValueError) as e:
    fail("no screenshot (%s): %s" % (e, err[-300:]))
    w = 0
scale = w / WIDTH if w else 0
for f in figs if w else []:
    x0, y0 = int(f["x"] * scale), int(f["y"] * scale)
    x1, y1 = min(w, int((f["x"] + f["w"]) * scale)), min(h, int((f["y"] + f["h"]) * scale))
    colours, ink, total = set(), 0, 0
    for y in range(y0, y1):
        row = rows[y]
        for x in range(x0, x1):
            px = row[x * bpp:x * bpp + 3]
            total += 1
            if px != b"\xff\xff\xff": ink += 1
            if len(colours) < 64: colours.add(px)
    if total == 0 or ink < total / 100 or len(colours) < 4:
        fail("figure %s is blank in the screenshot: %d of %d pixels inked, %d colours" % (f["id"], ink, total, len(colours)))

pdf = os.path.join(work, "page.pdf")
rc, _, err = chromium("--print-to-pdf=" + pdf, "--no-pdf-header-footer", "file://" + os.path.abspath(page))
data = open(pdf, "rb").read() if os.path.exists(pdf) else b""
pages = len(re.findall(rb"/Type\s*/Page\b", data))
if not data.startswith(b"%PDF") or pages < 1: fail("it does not print: %d bytes of PDF, %d pages (%s)" % (len(data), pages, err[-200:]))

for f in fails: print("FAIL: %s: %s" % (os.path.basename(os.path.dirname(page)) or page, f))
print("%s: %d figures, %d px high, %d printed page(s)" % (page, len(figs), probe["height"], pages))
sys.exit(1 if fails else 0)
