"""The start-up hook of `allocbench record` (harness/cli/cmd_record.c, Note [Recording a job]).

The build copies this file beside the allocbench binary, into allocbench_record/, and
`allocbench record` puts that folder first on the program's PYTHONPATH, so every Python
process of the job imports it at start-up. In a process that has AB_RECORD_OUT in its
environment, and only there:

  1. torch is imported, and PyTorch's allocator history is switched on as soon as the process
     initialises CUDA (torch.cuda._lazy_call), so before its first allocation; a process that
     never uses CUDA (torchrun's launcher, a tool) records nothing and writes nothing.
  2. The snapshot is dumped once, at the first of: the interpreter's exit; an uncaught
     torch.OutOfMemoryError (from sys.excepthook, while the memory is still held); SIGTERM,
     SIGINT or SIGHUP, after which the signal does what it would have done: the default
     action of SIGTERM and SIGHUP, SIGINT's KeyboardInterrupt; so that the process still dies of the signal unless the
     program catches it, and its parent sees that.
  3. The snapshot is dumped into the private folder AB_RECORD_STATE, and `allocbench record`
     writes it where it belongs once the job has ended, by the rules of every output of
     allocbench (a device or a FIFO written straight to, a link written through, a file
     replaced whole keeping its mode and owner). Its name there is AB_RECORD_OUT with the
     rank inserted under torchrun (RANK, else LOCAL_RANK: job.rank1.pickle), and with the pid
     for any further process of the job that records under a name already taken. Each
     process's start, the start of its recording, each file dumped, and each reason why
     nothing was, is one line of AB_RECORD_STATE/manifest, with the process's pid: that is
     how allocbench record learns what to write and report, and which processes ended
     without the interpreter's exit path (os._exit, a crash, SIGKILL), where no hook runs.
     The folder is beside AB_RECORD_OUT, so that a job whose allocbench record was killed
     still dumps where the next record (or record --recover) finds it.

Then the sitecustomize this file shadows, if the program had one, runs as it would have.
"""

import os
import sys


def _manifest_line(kind, text=""):
    """Appends one line, KIND<tab>PID<tab>TEXT, to the manifest; O_APPEND and one write keep
    lines whole when several processes of the job write at once."""
    state = os.environ.get("AB_RECORD_STATE")
    if not state:
        return
    line = "%s\t%d\t%s\n" % (kind, os.getpid(), text.replace("\n", " "))
    try:
        fd = os.open(os.path.join(state, "manifest"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except OSError:
        pass


class _Recorder:
    def __init__(self, torch, out, max_entries):
        self.torch = torch
        self.out = out
        self.max_entries = max_entries
        self.pid = os.getpid()  # a forked child inherits this object but must not dump
        self.path = None  # set when recording starts
        self.dumping = False
        self.done = False

    def _claim(self, path):
        """True when this process is the first of the job to take path."""
        state = os.environ.get("AB_RECORD_STATE")
        if not state:
            return True
        import hashlib

        claim = os.path.join(state, "claim-" + hashlib.sha256(path.encode()).hexdigest())
        try:
            os.close(os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            return True
        except FileExistsError:
            return False

    def _name(self):
        root, ext = os.path.splitext(self.out)
        rank = os.environ.get("RANK") or os.environ.get("LOCAL_RANK")
        if rank is not None and rank.isdigit():
            root += ".rank" + rank
        path = root + ext
        return path if self._claim(path) else "%s.pid%d%s" % (root, os.getpid(), ext)

    def start(self):
        """Runs when the process initialises CUDA."""
        if os.getpid() != self.pid or self.path is not None:
            return
        # Note [Stacks of a trace] (workloads/events/stacks.h): the stack of each allocation
        # (context="alloc"), Python's frames by default, C++'s too with --stacks all; none with
        # --no-stacks (AB_RECORD_STACKS=none), as PyTorch's own context=None.
        stacks = os.environ.get("AB_RECORD_STACKS") or "python"
        if stacks == "none":
            kwargs = {"enabled": "all", "context": None, "stacks": "python"}
        else:
            kwargs = {"enabled": "all", "context": "alloc", "stacks": stacks}
        if self.max_entries:
            kwargs["max_entries"] = self.max_entries
        self.torch.cuda.memory._record_memory_history(**kwargs)
        self.path = self._name()
        _manifest_line("recording", self.path)

    def dump(self, why):
        if os.getpid() != self.pid or self.done:
            return
        self.done = True
        if self.path is None:
            _manifest_line("note", "%s (pid %d) never used CUDA: nothing to record" % (sys.executable, os.getpid()))
            return
        self.dumping = True
        state = os.environ.get("AB_RECORD_STATE")
        tmp = os.path.join(state, "dump.%d.pickle" % os.getpid()) if state else "%s.tmp.%d" % (self.path, os.getpid())
        try:
            self.torch.cuda.memory._dump_snapshot(tmp)
            if state:  # allocbench record writes it to self.path (item 3)
                _manifest_line("wrote", "%s\t%s\t%s" % (why, self.path, tmp))
            else:
                os.replace(tmp, self.path)
                _manifest_line("wrote", "%s\t%s" % (why, self.path))
        except BaseException as e:  # the program's own outcome matters more than the record
            try:
                os.unlink(tmp)
            except OSError:
                pass
            _manifest_line("note", "pid %d could not write %s: %s: %s" % (os.getpid(), self.path, type(e).__name__, e))
        finally:
            self.dumping = False


def _start():
    out = os.environ.get("AB_RECORD_OUT")
    if not out:
        return
    _manifest_line("start", sys.executable)
    try:
        import torch
    except Exception as e:
        _manifest_line("note", "%s (pid %d) cannot import torch: %s: %s" % (sys.executable, os.getpid(), type(e).__name__, e))
        return
    max_entries = int(os.environ.get("AB_RECORD_MAX_ENTRIES") or 0)
    rec = _Recorder(torch, out, max_entries)

    lazy_call = getattr(torch.cuda, "_lazy_call", None)
    if lazy_call is not None:
        lazy_call(rec.start)
    else:
        rec.start()

    import atexit

    atexit.register(rec.dump, "at exit")

    oom = tuple(t for t in (getattr(torch, "OutOfMemoryError", None), getattr(torch.cuda, "OutOfMemoryError", None)) if t)
    previous_hook = sys.excepthook

    def excepthook(kind, value, tb):
        if oom and issubclass(kind, oom):
            rec.dump("on an uncaught OutOfMemoryError")
        previous_hook(kind, value, tb)

    sys.excepthook = excepthook

    import signal

    previous = {}

    def on_signal(signum, frame):
        # A second signal while the snapshot is being written waits for it to be whole.
        if rec.dumping:
            return
        rec.dump("on " + signal.Signals(signum).name)
        # Then what the signal would have done: Python's own handler (SIGINT raises
        # KeyboardInterrupt, which the program may catch; uncaught, Python dies of SIGINT), or
        # the default action, a death by the signal.
        handler = previous[signum]
        signal.signal(signum, handler)
        if callable(handler):
            handler(signum, frame)
        else:
            os.kill(os.getpid(), signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        # A signal the job was started ignoring stays ignored, as Python itself leaves it.
        previous[sig] = signal.getsignal(sig)
        if previous[sig] not in (signal.SIG_IGN, None):
            signal.signal(sig, on_signal)


def _chain():
    """Runs the sitecustomize this one shadows: the next one on sys.path."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


# The program's own sitecustomize first: it may be what makes torch importable.
try:
    _chain()
except Exception as err:  # reported as site.py reports a failing sitecustomize
    sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s\n" % (type(err).__name__, err))
try:
    _start()
except Exception as err:
    _manifest_line("note", "pid %d: the recording hook failed: %s: %s" % (os.getpid(), type(err).__name__, err))
