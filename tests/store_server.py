#!/usr/bin/env python3
"""store_server.py [--libuv | --old [--slow-first S]] [--port N]: a TCPStore server speaking
PyTorch's protocol as harness/ranks/store.h (Note [TCPStore's protocol]) writes it down, for the
tests where no PyTorch is installed and to exercise the protocol with the handshake, which
Debian's PyTorch (1.13) does not speak. One thread; prints its port on the first line, then
serves until killed.

By default, 2.x's: a connection's first query must be VALIDATE with the magic number; the
classic server closes a connection whose first query is anything else, and with --libuv it
leaves that query unread until more bytes come, then reads it as an ordinary query, as the
libuv server does. With --old, 1.13's: no handshake, the commands numbered without VALIDATE;
--slow-first S answers each connection's first query S seconds late, holding every other one
meanwhile, as a busy server of one thread does.
"""
import argparse
import selectors
import socket
import struct
import sys
import time

VALIDATE, SET, COMPARE_SET, GET, ADD, CHECK, WAIT, GETNUMKEYS, DELETE_KEY = range(9)
# 1.13's numbers, as the 2.x ones above: SET 0, COMPARE_SET 1, GET 2, ..., WATCH_KEY 7, DELETE_KEY 8.
OLD = {0: SET, 1: COMPARE_SET, 2: GET, 3: ADD, 4: CHECK, 5: WAIT, 6: GETNUMKEYS, 8: DELETE_KEY}
MAGIC = 0x3C85F7CE


class Client:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.validated = False
        self.held = False  # --libuv: a stray first query, held until more bytes come
        self.answered = False  # --slow-first: its first query has been answered


class Server:
    def __init__(self, libuv, old, slow_first):
        self.libuv = libuv
        self.old = old
        self.slow_first = slow_first
        self.keys = {}
        self.waiting = []  # (client, [keys])

    def answer(self, c, data):
        if self.slow_first and not c.answered:
            time.sleep(self.slow_first)
        c.answered = True
        try:
            c.sock.sendall(data)
        except OSError:
            pass

    def wake(self):
        still = []
        for c, keys in self.waiting:
            if all(k in self.keys for k in keys):
                self.answer(c, b"\x00")  # STOP_WAITING
            else:
                still.append((c, keys))
        self.waiting = still

    # Each parser returns the bytes it took, or 0 when the query is not complete yet.
    def string(self, b, at):
        if len(b) < at + 8:
            return None, 0
        (n,) = struct.unpack_from("<Q", b, at)
        if len(b) < at + 8 + n:
            return None, 0
        return b[at + 8:at + 8 + n], at + 8 + n

    def query(self, c):
        b = c.buf
        cmd = b[0]
        if self.old:
            if cmd not in OLD:
                raise ConnectionError("unknown query %d" % cmd)
            cmd = OLD[cmd]
            c.validated = True
        if not c.validated:
            if cmd == VALIDATE:
                if len(b) < 5:
                    return 0
                (magic,) = struct.unpack_from("<I", b, 1)
                if magic != MAGIC:
                    raise ConnectionError("bad magic")
                c.validated = True
                return 5
            if not self.libuv:
                raise ConnectionError("the first query is not VALIDATE")
            if not c.held:  # read again, as an ordinary query, once more bytes come
                c.held = True
                c.validated = True
                raise BlockingIOError
        if cmd in (SET, GET, ADD, DELETE_KEY):
            key, at = self.string(b, 1)
            if not at:
                return 0
            if cmd == SET:
                value, at = self.string(b, at)
                if not at:
                    return 0
                self.keys[key] = value
                self.wake()
            elif cmd == GET:
                value = self.keys.get(key, b"")
                self.answer(c, struct.pack("<Q", len(value)) + value)
            elif cmd == ADD:
                if len(b) < at + 8:
                    return 0
                (delta,) = struct.unpack_from("<q", b, at)
                at += 8
                total = int(self.keys.get(key, b"0")) + delta
                self.keys[key] = str(total).encode()
                self.answer(c, struct.pack("<q", total))
                self.wake()
            else:
                self.answer(c, struct.pack("<q", 1 if self.keys.pop(key, None) is not None else 0))
            return at
        if cmd in (CHECK, WAIT):
            if len(b) < 9:
                return 0
            (n,) = struct.unpack_from("<Q", b, 1)
            at, keys = 9, []
            for _ in range(n):
                key, at = self.string(b, at)
                if not at:
                    return 0
                keys.append(key)
            ready = all(k in self.keys for k in keys)
            if cmd == CHECK:
                self.answer(c, b"\x00" if ready else b"\x01")
            elif ready:
                self.answer(c, b"\x00")
            else:
                self.waiting.append((c, keys))
            return at
        if cmd == GETNUMKEYS:
            self.answer(c, struct.pack("<q", len(self.keys)))
            return 1
        raise ConnectionError("unknown query %d" % cmd)

    def feed(self, c, data):
        c.buf += data
        while c.buf:
            try:
                took = self.query(c)
            except BlockingIOError:
                return
            if not took:
                return
            c.buf = c.buf[took:]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--libuv", action="store_true")
    p.add_argument("--old", action="store_true")
    p.add_argument("--slow-first", type=float, default=0)
    p.add_argument("--port", type=int, default=0)
    a = p.parse_args()
    srv = Server(a.libuv, a.old, a.slow_first)
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", a.port))
    lsock.listen(128)
    print(lsock.getsockname()[1], flush=True)
    sel = selectors.DefaultSelector()
    sel.register(lsock, selectors.EVENT_READ, None)
    while True:
        for key, _ in sel.select():
            if key.data is None:
                sock, _ = lsock.accept()
                sel.register(sock, selectors.EVENT_READ, Client(sock))
                continue
            c = key.data
            try:
                data = c.sock.recv(1 << 20)
                if not data:
                    raise ConnectionError("closed")
                srv.feed(c, data)
            except (ConnectionError, OSError):
                sel.unregister(c.sock)
                c.sock.close()
                srv.waiting = [(w, k) for w, k in srv.waiting if w is not c]


if __name__ == "__main__":
    sys.exit(main())
