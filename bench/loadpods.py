"""``python -m bench.loadpods FIRST COUNT RATE``: metric servers for the load benchmark, in
a process of their own (so the scraper's figures are not the servers' GIL).

One HTTP server per address 127.0.0.FIRST .. 127.0.0.(FIRST+COUNT-1), port 19153, each
serving a CoreDNS-shaped page (its ~160 lines, the counter split over two series) whose
counter grows at RATE per second. A line ``RATE`` on stdin sets a new rate for all;
EOF on stdin ends the process. Prints ``ready`` once every server listens.
"""

from __future__ import annotations

import sys
import threading

from tests.integration.metricpods import Counter, _Server


def main() -> None:
    first, count, rate = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    servers = []
    for index in range(count):
        server = _Server(f"127.0.0.{first + index}", Counter(rate))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    print("ready", flush=True)
    for line in sys.stdin:
        for server in servers:
            server.counter.set_rate(float(line))
    for server in servers:
        server.shutdown()


if __name__ == "__main__":
    main()
