"""How long ``rtrigid serve`` takes to stop on SIGTERM or SIGINT (issue 34: within 100 ms).

    python3 scripts/hil_stop_time.py [SIGTERM|SIGINT] [REPEATS]

Starts ``python3 -m rtrigid.io.hil arm --port 0`` from the current directory, connects a client,
sends the signal, and prints the time until the client reads end of file (the server closed its
connection) and until the process has exited.  Measured, never asserted by a test.
"""
import signal
import socket
import subprocess
import sys
import time


def once(sig):
    p = subprocess.Popen([sys.executable, "-m", "rtrigid.io.hil", "arm", "--port", "0"],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    host, port = line.rsplit(" on ", 1)[1].strip().rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    time.sleep(0.5)
    t0 = time.perf_counter()
    p.send_signal(sig)
    s.settimeout(5)
    d = s.recv(100)
    t_eof = time.perf_counter()
    rc = p.wait()
    t1 = time.perf_counter()
    print(f"{sig.name}: client read {d!r} after {1e3 * (t_eof - t0):.1f} ms; "
          f"exit {rc} after {1e3 * (t1 - t0):.1f} ms")
    s.close()
    p.stdout.close()


if __name__ == "__main__":
    name = sys.argv[1] if len(sys.argv) > 1 else "SIGTERM"
    for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 1):
        once(getattr(signal, name))
