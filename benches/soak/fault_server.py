#!/usr/bin/env python3
"""robots.txt that fails now and then, for the soak run (benches/soak/soak.sh).

nginx proxies /robots.txt of the "fault" origins here, naming the origin in the X-Fault-Origin
header. Each origin cycles through PHASES, PHASE_SECONDS each, starting at its own offset so the
origins are out of step:

  ok     200 with `User-agent: *` / `Disallow: /private/`     -> fresh rules
  503    503 Service Unavailable                               -> unreachable: stale copy, or
  429    429 Too Many Requests                                    disallow all without one
  404    404 Not Found                                         -> unavailable: allow all (drops
                                                                  the cached copy, so the next
                                                                  failures disallow all)
  close  the connection is closed without an answer            -> nginx turns it into 444, a
                                                                  closed connection, for the proxy
  hang   no answer for HANG_SECONDS (longer than the proxy's   -> fetch timeout: unreachable
         robots.fetch_timeout), then closed

Every request is logged as one line: `<unix time> <origin> <phase>` to --log.
Standard library only.
"""

import argparse
import http.server
import sys
import threading
import time

PHASES = ["ok", "503", "429", "404", "close", "hang"]
ROBOTS = b"User-agent: *\nDisallow: /private/\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--listen", default="127.0.0.1:18120")
    ap.add_argument("--phase-seconds", type=float, default=15.0)
    ap.add_argument("--hang-seconds", type=float, default=10.0)
    ap.add_argument(
        "--offsets",
        default="",
        help="origin=phase-index offsets, comma-separated (e.g. 18117=0,18118=2,18119=4); "
        "others start at 0",
    )
    ap.add_argument("--log", default="-")
    args = ap.parse_args()

    offsets = {}
    for item in filter(None, args.offsets.split(",")):
        origin, _, index = item.partition("=")
        offsets[origin.strip()] = int(index)
    start = time.time()
    log = sys.stdout if args.log == "-" else open(args.log, "a", buffering=1)
    lock = threading.Lock()

    def phase_of(origin):
        n = int((time.time() - start) // args.phase_seconds) + offsets.get(origin, 0)
        return PHASES[n % len(PHASES)]

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self):
            origin = self.headers.get("X-Fault-Origin", "?")
            phase = phase_of(origin)
            with lock:
                log.write(f"{time.time():.3f} {origin} {phase}\n")
            if phase == "ok":
                self.answer(200, ROBOTS)
            elif phase in ("503", "429", "404"):
                self.answer(int(phase), f"robots.txt fault: {phase}\n".encode())
            elif phase == "hang":
                time.sleep(args.hang_seconds)
                self.close_connection = True
            else:  # close: nothing at all
                self.close_connection = True

        def answer(self, status, body):
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            if status == 429:
                self.send_header("Retry-After", "5")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    host, _, port = args.listen.rpartition(":")
    server = http.server.ThreadingHTTPServer((host, int(port)), Handler)
    server.daemon_threads = True
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
