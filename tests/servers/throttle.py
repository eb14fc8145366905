#!/usr/bin/env python3
"""throttle.py --listen PORT --to HOST:PORT --rate BYTES_PER_S [--log FILE]

A TCP relay (Python stdlib) that caps each connection's server-to-client
bytes at RATE per second, as a long or lossy path caps each TCP flow (its
congestion window) whatever the others do. The bytes pass through untouched
(TLS included), so the client still talks to the server behind it. One line
per connection to --log when it closes: the bytes it carried down. Used by
bench/pull_h2.sh to show what separate connections buy over streams of one.
"""
import argparse, socket, sys, threading, time


def pump(src, dst, rate, count):
    """Copies src to dst until EOF; rate > 0 paces it (a token bucket)."""
    start, sent = time.monotonic(), 0
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
            sent += len(data)
            if rate > 0:
                ahead = sent / rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
    except OSError:
        pass
    finally:
        count[0] += sent
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve(client, target, rate, log):
    try:
        up = socket.create_connection(target)
    except OSError:
        client.close()
        return
    count = [0]
    t = threading.Thread(target=pump, args=(client, up, 0, [0]), daemon=True)
    t.start()
    pump(up, client, rate, count)
    t.join()
    client.close()
    up.close()
    if log:
        with open(log, 'a') as f:
            f.write('%d\n' % count[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--listen', type=int, required=True)
    ap.add_argument('--to', required=True)
    ap.add_argument('--rate', type=float, required=True)
    ap.add_argument('--log')
    a = ap.parse_args()
    host, port = a.to.rsplit(':', 1)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(('127.0.0.1', a.listen))
    ls.listen(64)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c, (host, int(port)), a.rate, a.log), daemon=True).start()


if __name__ == '__main__':
    sys.exit(main())
