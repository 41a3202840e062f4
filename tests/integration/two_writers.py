#!/usr/bin/env python3
"""two_writers.py FILE - one file open by two writers and a reader at once, as
several processes of a job open one output (a log, a shared result file).

The first writer creates FILE and writes 1,000 'A's; the second opens it without
O_TRUNC and must read those 'A's, then writes 1,000 'B's after them; a reader
opened meanwhile must read both.  The first close uploads what both wrote; the
second writer then adds 10 'C's and closes; with the reader still open, the file
is renamed away and back, and the reader reads all of it.  Prints one line per check that
failed ("FAIL: ..."), and "ok" when none did; the caller checks FILE's bytes
on the server: 'A' * 1000 + 'B' * 1000 + 'C' * 10.
"""
import os
import sys

path = sys.argv[1]
failed = []

w1 = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.pwrite(w1, b"A" * 1000, 0)
w2 = os.open(path, os.O_RDWR)
got = os.pread(w2, 4096, 0)
if got != b"A" * 1000:
    failed.append(f"the second writer read {len(got)} bytes, not the first's 1,000 'A's")
os.pwrite(w2, b"B" * 1000, 1000)
r = os.open(path, os.O_RDONLY)
got = os.pread(r, 4096, 0)
if got != b"A" * 1000 + b"B" * 1000:
    failed.append(f"a reader read {len(got)} bytes, not both writers' 2,000")
if os.fstat(r).st_size != 2000:
    failed.append(f"fstat of the reader says {os.fstat(r).st_size} bytes, not 2,000")
os.close(w1)
os.pwrite(w2, b"C" * 10, 2000)
os.close(w2)
# the writers closed: a reader still open holds up no rename (mv and back)
try:
    os.rename(path, path + ".moved")
    os.rename(path + ".moved", path)
except OSError as e:
    failed.append(f"a rename with only a reader open failed: {e}")
if os.pread(r, 4096, 0) != b"A" * 1000 + b"B" * 1000 + b"C" * 10:
    failed.append("the reader no longer reads what the writers wrote")
os.close(r)
print("\n".join("FAIL: " + f for f in failed) if failed else "ok")
