#!/usr/bin/env python3
"""Kills a `moejit warmup` while NVRTC compiles, and prints how it ended.
  kill_warmup.py MOEJIT SIGNAL SPEC
NVRTC installs handlers for SIGINT and SIGTERM while it compiles (handlers that exit(4)); this
waits until one of the process's threads shows it installed (SigCgt in /proc; at most 10 s, in
case an NVRTC installs none), so the signal lands where it used to end in exit code 4, then
sends SIGNAL and prints the status and stderr.
"""
import glob
import signal
import subprocess
import sys
import time

moejit, name, spec = sys.argv[1:4]
sig = getattr(signal, name)
# The child takes SIGINT with the default action even where this script's parent ignores it.
p = subprocess.Popen([moejit, "warmup", "-q", spec], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
bit = 1 << (sig - 1)
deadline = time.time() + 10
while time.time() < deadline and p.poll() is None:
    caught = 0
    for status in glob.glob(f"/proc/{p.pid}/task/*/status"):
        try:
            lines = open(status).read().splitlines()
        except OSError:
            continue
        caught |= sum(int(l.split()[1], 16) for l in lines if l.startswith("SigCgt:"))
    if caught & bit:
        break
if p.poll() is not None:
    print(f"warmup ended before the signal (exit {p.returncode})")
    sys.exit(1)
p.send_signal(sig)
_, err = p.communicate()
print("status:", f"signal {signal.Signals(-p.returncode).name}" if p.returncode < 0 else f"exit {p.returncode}")
sys.stdout.write(err.decode())
