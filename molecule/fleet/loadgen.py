# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A bounded load through the router: fixed concurrency, at most --max-requests and --max-seconds.

    LOADGEN_API_KEY=<router client key> loadgen.py --url http://ROUTER:30000 --stop-file F --out R.json

Only loopback and private (docker bridge) addresses are accepted. Each worker thread sends
streaming chat completions one after another; a request fails when the answer is not 200,
the stream ends without [DONE], or the connection breaks. Stops at the first of: the stop
file appears, --max-requests sent, --max-seconds passed. Writes counts and latencies (ms).
"""

import argparse
import ipaddress
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request


def percentile(values, fraction):
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))], 1)


def one_request(url, key, model, max_tokens, timeout):
    body = json.dumps({"model": model, "stream": True, "max_tokens": max_tokens,
                       "messages": [{"role": "user", "content": "Say something about the lab."}]}).encode()
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    request = urllib.request.Request(url + "/v1/chat/completions", data=body, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        if response.status != 200:
            return "status %d" % response.status
        done = False
        for line in response:
            if line.strip() == b"data: [DONE]":
                done = True
        return None if done else "stream ended without [DONE]"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", default="glm-5")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-requests", type=int, default=20000)
    parser.add_argument("--max-seconds", type=float, default=600)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--pause-after-failure", type=float, default=0.2)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--marks-file", help="lines '<name> <epoch>' that split the latencies into phases")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    host = urllib.parse.urlsplit(args.url).hostname
    address = ipaddress.ip_address(host)
    if not (address.is_loopback or address.is_private):
        sys.exit("loadgen: %s is neither loopback nor a private (docker bridge) address" % host)
    if not 1 <= args.concurrency <= 32 or not 1 <= args.max_requests <= 100000 or not 0 < args.max_seconds <= 1800:
        sys.exit("loadgen: concurrency 1-32, max-requests 1-100000, max-seconds up to 1800")
    key = os.environ.get("LOADGEN_API_KEY", "")
    lock = threading.Lock()
    started = time.time()
    state = {"sent": 0}
    results = []  # (start epoch, latency ms, error or None)

    def worker():
        while True:
            with lock:
                if (state["sent"] >= args.max_requests or time.time() - started >= args.max_seconds
                        or os.path.exists(args.stop_file)):
                    return
                state["sent"] += 1
            begin = time.time()
            try:
                error = one_request(args.url, key, args.model, args.max_tokens, args.timeout)
            except urllib.error.HTTPError as exc:
                error = "status %d" % exc.code
            except (urllib.error.URLError, OSError, ValueError) as exc:
                error = "%s: %s" % (type(exc).__name__, exc)
            with lock:
                results.append((begin, (time.time() - begin) * 1000.0, error))
            if error:
                # A refused connection fails in a millisecond: without a pause, as a real client's
                # backoff, a router that is down for a minute would use up --max-requests and end
                # the load before the router is back.
                time.sleep(args.pause_after_failure)

    threads = [threading.Thread(target=worker) for _worker in range(args.concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    marks = {}
    if args.marks_file and os.path.exists(args.marks_file):
        for line in open(args.marks_file):
            name, _space, epoch = line.strip().partition(" ")
            if epoch:
                marks[name] = float(epoch)

    def phase(lo, hi):
        chosen = [r for r in results if lo <= r[0] < hi]
        ok = [r[1] for r in chosen if r[2] is None]
        return {"requests": len(chosen), "failed": len(chosen) - len(ok),
                "p50_ms": percentile(ok, 0.50), "p99_ms": percentile(ok, 0.99)}

    errors = {}
    for _begin, _latency, error in results:
        if error:
            errors[error] = errors.get(error, 0) + 1
    report = {"duration_s": round(time.time() - started, 1), "concurrency": args.concurrency,
              "all": phase(0, float("inf")), "errors": errors,
              # When the first failed requests began and ended (epoch), to set beside the node's history.
              "failures": [{"began": round(begin, 3), "ended": round(begin + latency / 1000.0, 3), "error": error}
                           for begin, latency, error in sorted(results) if error][:10]}
    if "rollout_start" in marks:
        report["before"] = phase(0, marks["rollout_start"])
        report["during"] = phase(marks["rollout_start"], marks.get("rollout_end", float("inf")))
    if "rollout_end" in marks:
        report["after"] = phase(marks["rollout_end"], float("inf"))
    with open(args.out, "w") as handle:
        json.dump(report, handle, indent=2)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
