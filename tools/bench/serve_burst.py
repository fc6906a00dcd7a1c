#!/usr/bin/env python3
"""serve_burst.py PORT N [PATH]: N clients connect to a running `qkv serve` at the same moment, each
sends one POST (Connection: close) and reads the answer. Prints the status lines counted and the
p50 / max time from connect to the end of the answer. A burst like this overflows a short accept
queue: the kernel drops the SYNs past it and those clients wait out a retransmit (1 s, then 3, 7).

PATH is /v1/score (default; a one-pair body) or /v1/translate (a one-sentence body); the served
model must take "a b c". Example, with a model directory M:
  build/qkv serve --model mt=M --port 0 --max-concurrent 512 &   # prints the port
  /usr/bin/python3 tools/bench/serve_burst.py PORT 100
"""
import json
import socket
import sys
import threading
import time
from collections import Counter


def main():
    port, n = int(sys.argv[1]), int(sys.argv[2])
    path = sys.argv[3] if len(sys.argv) > 3 else "/v1/score"
    body = json.dumps({"sources": ["a b c"], "targets": ["a b c"]} if path == "/v1/score" else {"text": "a b c"})
    request = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}").encode()
    results = {}
    barrier = threading.Barrier(n)

    def client(i):
        barrier.wait()
        start = time.time()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
                s.sendall(request)
                data = b""
                while chunk := s.recv(65536):
                    data += chunk
            results[i] = (data.split(b"\r\n")[0].decode(), time.time() - start)
        except OSError as e:
            results[i] = ("error " + repr(e), time.time() - start)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(dict(Counter(r[0] for r in results.values())))
    seconds = sorted(r[1] for r in results.values())
    print("p50 %.2f s, max %.2f s" % (seconds[len(seconds) // 2], seconds[-1]))


if __name__ == "__main__":
    main()
