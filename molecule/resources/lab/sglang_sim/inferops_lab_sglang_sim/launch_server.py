# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Simulated ``sglang.launch_server`` for the lab node (see README.md beside this package)."""

import argparse
import hashlib
import hmac
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Aggregate output rates measured on the target machine (8x RTX PRO 6000, no P2P).
BASELINE_TOK_S = 1867.0
FUSION_WITHOUT_P2P_TOK_S = 236.0
BASELINE_LOAD = {"power_w": 250, "util_pct": 35}
FUSION_WITHOUT_P2P_LOAD = {"power_w": 125, "util_pct": 15}
LOAD_FILE = "/run/inferops-lab/gpu-load.json"
# Run-to-run noise: the rate wanders by this relative standard deviation, a new draw every
# NOISE_WINDOW_S seconds from a generator seeded with INFEROPS_LAB_SIM_SEED (a real node drifts
# by a few percent between identical benchmark runs: clocks, thermals, other tenants).
NOISE_STDEV = 0.02
NOISE_WINDOW_S = 0.5
# Token slots a request thread missed while the lab's CPU served other work are made up, up to
# this long, as a GPU keeps its pace whatever the host's scheduler does: on a loaded machine a
# benchmark then measures the simulated rate rather than the CPU's spare time.
CATCH_UP_S = 2.0
# Greedy answers come from this vocabulary, chosen by a hash of the prompt and the position.
VOCAB = ("the", "sum", "of", "seventeen", "and", "twenty", "three", "is", "three", "hundred", "ninety", "one",
         "def", "fib", "return", "while", "loop", "prime", "two", "five", "seven", "eleven", "GPU", "PCIe",
         "allreduce", "host", "memory", "copies", "every", "step", "because", "no", "peer", "access")
TOKENS_PER_CHUNK = 4
# KV-cache size the simulated scheduler reports (sglang:max_total_num_tokens); token_usage is
# the share of it held by the requests in flight.
SIM_MAX_TOTAL_NUM_TOKENS = 1048576
WORDS = ("the", "lab", "node", "streams", "simulated", "tokens", "at", "a", "measured", "rate")


class Server(ThreadingHTTPServer):
    # A benchmark opens dozens of connections at once; the default backlog of 5 resets them.
    request_queue_size = 1024
    daemon_threads = True


def log(message):
    print("[sglang-sim] %s" % message, flush=True)


class InFlight:
    """The requests the server holds, as SGLang's TokenizerManager.rid_to_state keeps them."""

    def __init__(self):
        self._lock = threading.Lock()
        self._requests = {}

    @property
    def count(self):
        with self._lock:
            return len(self._requests)

    def describe(self):
        """The requests held, as SGLang logs its remaining rids: what each is and for how long."""
        now = time.monotonic()
        with self._lock:
            return ", ".join("%s for %.1f s" % (what, now - since) for what, since in self._requests.values())

    def hold(self, what):
        """A context in which the request ``what`` (method and path) counts as held."""
        requests, lock = self._requests, self._lock

        class Held:
            def __enter__(self):
                with lock:
                    requests[id(self)] = (what, time.monotonic())

            def __exit__(self, *_exc):
                with lock:
                    requests.pop(id(self), None)

        return Held()


def drain_then_exit(server, state, poll):
    """SIGTERM as SGLang 0.5.9 and 0.5.23 take it (TokenizerManager.sigterm_handler and
    sigterm_watchdog): /health answers 503 from now on, and the process exits once no request is
    left, looking every ``poll`` seconds (SGLang: 5), with no time limit of its own; systemd's
    TimeoutStopSec is the bound."""
    state["draining"] = True
    log("SIGTERM received. Draining requests and shutting down...")
    while state["in_flight"].count > 0:
        log("Gracefully exiting... Remaining number of requests %d: %s."
            % (state["in_flight"].count, state["in_flight"].describe()))
        time.sleep(poll)
    server.shutdown()


def installed_release():
    """The SGLang release installed beside the simulator, as (0, 5, 23); (0, 5, 9) where none is:
    the simulator answers the endpoints and metrics of the release the role validated the flags against."""
    try:
        import importlib.metadata
        version = importlib.metadata.version("sglang")
    except Exception:
        return (0, 5, 9)
    numbers = []
    for part in version.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        numbers.append(int(digits or 0))
    return tuple(numbers)


def release_has_ready_endpoint():
    """Whether the installed release serves /ready (0.5.23 does, 0.5.9 does not)."""
    return installed_release() >= (0, 5, 23)


def warm_kernel_cache():
    """Stand in for the kernels the real server compiles at start: the first start with a cache
    folder (SGLANG_CACHE_DIR) takes INFEROPS_LAB_SIM_COMPILE_SECONDS longer and leaves a file in
    it, later starts find it. Returns "compiled", "reused", or "none" without a cache folder."""
    folder = os.environ.get("SGLANG_CACHE_DIR")
    if not folder:
        return "none"
    marker = os.path.join(os.environ.get("TRITON_CACHE_DIR") or os.path.join(folder, "triton"),
                          "inferops-lab-sim", "kernel.cubin")
    if os.path.isfile(marker):
        log("compiled kernels found in %s" % marker)
        return "reused"
    time.sleep(float(os.environ.get("INFEROPS_LAB_SIM_COMPILE_SECONDS", "0")))
    os.makedirs(os.path.dirname(marker), exist_ok=True)
    with open(marker, "wb") as handle:
        handle.write(b"\0" * 4096)
    log("compiled kernels into %s" % marker)
    return "compiled"


def parse_args(argv):
    # Same names as sglang's parser (allow_abbrev keeps `--tp 8` working); everything else is ignored.
    parser = argparse.ArgumentParser(prog="inferops_lab_sglang_sim.launch_server")
    parser.add_argument("--model-path", "--model", required=True)
    parser.add_argument("--served-model-name")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--tensor-parallel-size", "--tp-size", type=int, default=1)
    parser.add_argument("--api-key")
    parser.add_argument("--enable-flashinfer-allreduce-fusion", action="store_true")
    parser.add_argument("--enable-metrics", action="store_true")
    parser.add_argument("--max-running-requests", type=int, default=None)
    parser.add_argument("--node-rank", type=int, default=0)
    args, ignored = parser.parse_known_args(argv)
    return args, ignored


def topology_has_p2p():
    """False when the (simulated) driver reports GPU pairs without peer-to-peer reads."""
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is None:
        return None
    try:
        out = subprocess.run([nvidia_smi, "topo", "-p2p", "r"], capture_output=True, text=True,
                             timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    cells = []
    for line in out.splitlines():
        fields = line.split()
        # Matrix rows carry the diagonal X; the header row does not.
        if fields and fields[0].startswith("GPU") and "X" in fields[1:]:
            cells.extend(f for f in fields[1:] if f != "X")
    if not cells:
        return None
    return all(cell == "OK" for cell in cells)


# SGLang's metric names, types, help texts and default buckets, as 0.5.9's
# sglang/srt/metrics/collector.py and 0.5.23's sglang/srt/observability/metrics_collector.py declare
# them (TokenizerMetricsCollector, SchedulerMetricsCollector): the same names in both for these.
TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
               0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000)
COUNTERS = (
    ("sglang:prompt_tokens_total", "Number of prefill tokens processed."),
    ("sglang:generation_tokens_total", "Number of generation tokens processed."),
    ("sglang:num_requests_total", "Number of requests processed."),
    ("sglang:num_aborted_requests_total", "Number of requests aborted."),
)
HISTOGRAMS = (
    ("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS),
    ("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS),
    ("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", E2E_BUCKETS),
)
# 0.5.23 only: each request's time per output token, beside the inter-token latency both have.
REQUEST_TPOT = ("sglang:request_time_per_output_token_seconds",
                "Per-request TPOT in seconds: (finished_time - first_token_time) / (completion_tokens - 1).",
                ITL_BUCKETS)
# 0.5.23 labels these series of the tokenizer with is_streaming ("true" or "false") as well.
STREAMING_LABELLED = ("sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:num_requests_total",
                      "sglang:time_to_first_token_seconds", "sglang:e2e_request_latency_seconds",
                      "sglang:request_time_per_output_token_seconds")
GAUGES = (
    ("sglang:num_running_reqs", "The number of running requests."),
    ("sglang:num_used_tokens", "The number of used tokens."),
    ("sglang:token_usage", "The token usage."),
    ("sglang:gen_throughput", "The generation throughput (token/s)."),
    ("sglang:num_queue_reqs", "The number of requests in the waiting queue."),
    ("sglang:cache_hit_rate", "The prefix cache hit rate."),
    ("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool."),
)
THROUGHPUT_WINDOW_S = 5.0


def _number(value):
    return repr(float(value))


class Metrics:
    """What SGLang's /metrics reports with --enable-metrics, kept as the simulated server serves.

    Counters and histograms grow as requests finish (tokenizer-side labels: model_name);
    gauges describe the scheduler now (labels: model_name, engine_type, tp_rank, pp_rank,
    moe_ep_rank), like the prometheus_client multiprocess output of the real server.
    """

    def __init__(self, served, max_running, release=(0, 5, 9)):
        self.lock = threading.Lock()
        self.histogram_specs = HISTOGRAMS + ((REQUEST_TPOT,) if release >= (0, 5, 23) else ())
        self.streaming_labelled = release >= (0, 5, 23)
        self.tokenizer_labels = (("model_name", served),)
        self.scheduler_labels = (("model_name", served), ("engine_type", "unified"), ("tp_rank", "0"),
                                 ("pp_rank", "0"), ("moe_ep_rank", "0"))
        self.max_running = max_running
        # Every series by its name and is_streaming ("" where the release or the family has no such label).
        self.counters = {}
        self.histograms = {}
        self.bounds = dict((name, bounds) for name, _help, bounds in self.histogram_specs)
        self.requests = {}
        self.generated = []

    def _stream_label(self, name, stream):
        return ("true" if stream else "false") if self.streaming_labelled and name in STREAMING_LABELLED else ""

    def _count(self, name, value, stream=False):
        key = (name, self._stream_label(name, stream))
        self.counters[key] = self.counters.get(key, 0) + value

    def _observe(self, name, value, times=1, total=None, stream=False):
        key = (name, self._stream_label(name, stream))
        histogram = self.histograms.setdefault(key, {"buckets": [0] * len(self.bounds[name]), "count": 0, "sum": 0.0})
        for i, bound in enumerate(self.bounds[name]):
            if value <= bound:
                histogram["buckets"][i] += times
                break
        histogram["count"] += times
        histogram["sum"] += value * times if total is None else total

    def start(self, ident, prompt_tokens, stream=False):
        with self.lock:
            self.requests[ident] = {"prompt": prompt_tokens, "generated": 0, "started": time.monotonic(),
                                    "last": None, "first": None, "stream": bool(stream)}

    def tokens(self, ident, count):
        now = time.monotonic()
        with self.lock:
            request = self.requests[ident]
            if request["last"] is None:
                request["first"] = now
                self._observe("sglang:time_to_first_token_seconds", now - request["started"], stream=request["stream"])
            else:
                interval = now - request["last"]
                self._observe("sglang:inter_token_latency_seconds", interval / count, times=count, total=interval)
            request["last"] = now
            request["generated"] += count
            self.generated.append((now, count))

    def finish(self, ident, aborted=False):
        with self.lock:
            request = self.requests.pop(ident)
            if aborted:
                self._count("sglang:num_aborted_requests_total", 1)
                return
            stream, now = request["stream"], time.monotonic()
            self._count("sglang:prompt_tokens_total", request["prompt"], stream)
            self._count("sglang:generation_tokens_total", request["generated"], stream)
            self._count("sglang:num_requests_total", 1, stream)
            self._observe("sglang:e2e_request_latency_seconds", now - request["started"], stream=stream)
            if "sglang:request_time_per_output_token_seconds" in self.bounds and request["generated"] > 1:
                self._observe("sglang:request_time_per_output_token_seconds",
                              (now - request["first"]) / (request["generated"] - 1), stream=stream)

    def _gauges(self):
        now = time.monotonic()
        self.generated = [(at, count) for at, count in self.generated if now - at <= THROUGHPUT_WINDOW_S]
        in_flight = len(self.requests)
        running = in_flight if self.max_running is None else min(in_flight, self.max_running)
        used = sum(r["prompt"] + r["generated"] for r in self.requests.values())
        return {
            "sglang:num_running_reqs": running,
            "sglang:num_used_tokens": used,
            "sglang:token_usage": round(used / float(SIM_MAX_TOTAL_NUM_TOKENS), 4),
            "sglang:gen_throughput": sum(count for _at, count in self.generated) / THROUGHPUT_WINDOW_S,
            "sglang:num_queue_reqs": in_flight - running,
            "sglang:cache_hit_rate": 0.0,
            "sglang:max_total_num_tokens": SIM_MAX_TOTAL_NUM_TOKENS,
        }

    @staticmethod
    def _labels(pairs):
        return "{" + ",".join('%s="%s"' % (key, value.replace("\\", "\\\\").replace('"', '\\"'))
                              for key, value in pairs) + "}"

    def exposition(self):
        lines = []
        with self.lock:
            gauges = self._gauges()
            for name, help_text in GAUGES:
                lines += ["# HELP %s %s" % (name, help_text), "# TYPE %s gauge" % name,
                          "%s%s %s" % (name, self._labels(self.scheduler_labels), _number(gauges[name]))]
            for name, help_text in COUNTERS:
                lines += ["# HELP %s %s" % (name, help_text), "# TYPE %s counter" % name]
                # A labelled series appears once it has counted, as prometheus_client's do; an
                # unlabelled family (0.5.9) shows its zero from the start.
                series = sorted(stream for (family, stream) in self.counters if family == name) \
                    or ([] if self._stream_label(name, False) else [""])
                for stream in series:
                    labels = self.tokenizer_labels + ((("is_streaming", stream),) if stream else ())
                    lines.append("%s%s %s" % (name, self._labels(labels), _number(self.counters.get((name, stream), 0))))
            for name, help_text, bounds in self.histogram_specs:
                lines += ["# HELP %s %s" % (name, help_text), "# TYPE %s histogram" % name]
                series = sorted(stream for (family, stream) in self.histograms if family == name) \
                    or ([] if self._stream_label(name, False) else [""])
                for stream in series:
                    empty = {"buckets": [0] * len(bounds), "count": 0, "sum": 0.0}
                    histogram = self.histograms.get((name, stream)) or empty
                    own = self.tokenizer_labels + ((("is_streaming", stream),) if stream else ())
                    cumulative = 0
                    for bound, count in zip(bounds, histogram["buckets"]):
                        cumulative += count
                        labels = self._labels((("le", _number(bound)),) + own)
                        lines.append("%s_bucket%s %s" % (name, labels, _number(cumulative)))
                    labels = self._labels((("le", "+Inf"),) + own)
                    lines.append("%s_bucket%s %s" % (name, labels, _number(histogram["count"])))
                    lines.append("%s_count%s %s" % (name, self._labels(own), _number(histogram["count"])))
                    lines.append("%s_sum%s %s" % (name, self._labels(own), _number(histogram["sum"])))
        return "\n".join(lines) + "\n"


class _NoMetrics:
    """Without --enable-metrics the server keeps no metrics (and /metrics answers 404)."""

    def start(self, ident, prompt_tokens, stream=False):
        pass

    def tokens(self, ident, count):
        pass

    def finish(self, ident, aborted=False):
        pass


NO_METRICS = _NoMetrics()


def running_requests_factor(max_running):
    """Throughput relative to --max-running-requests 1024 (the known-good server).

    Larger batches amortise each PCIe allreduce over more tokens, up to about 2048; beyond it
    KV-cache pressure (preemption, recomputation) takes part of the gain back.
    """
    if not max_running:
        return 1.0
    if max_running <= 2048:
        return max(0.2, 1.0 + 0.2 * math.log2(max_running / 1024.0))
    return 1.2 - 0.08 * math.log2(max_running / 2048.0)


def nccl_channels_factor(channels):
    """Throughput relative to NCCL_MIN_NCHANNELS=8: more channels overlap more host-memory copies
    up to about 16; beyond that they take SMs from the model for little gain."""
    try:
        channels = int(channels)
    except (TypeError, ValueError):
        return 1.0
    if channels < 1:
        return 1.0
    if channels <= 16:
        return 1.0 + 0.15 * math.log2(channels / 8.0)
    return 1.15 - 0.06 * math.log2(channels / 16.0)


def noise_factor(seed, window, stdev=NOISE_STDEV):
    """The rate's relative wander in one time window: the same seed and window, the same draw."""
    return max(0.5, random.Random("%s:%d" % (seed, window)).gauss(1.0, stdev))


class TokenBudget:
    """One output rate shared by every request in flight, like a saturated GPU batch."""

    def __init__(self, rate, load, seed="0", stdev=NOISE_STDEV):
        self.rate = rate
        self.load = load
        self.seed = seed
        self.stdev = stdev
        self.lock = threading.Lock()
        self.next_slot = time.monotonic()
        self.active = 0

    def take(self, tokens):
        with self.lock:
            now = time.monotonic()
            start = max(now - CATCH_UP_S, self.next_slot)
            rate = self.rate * noise_factor(self.seed, int(time.time() / NOISE_WINDOW_S), self.stdev)
            self.next_slot = start + tokens / rate
            ready = self.next_slot
        delay = ready - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def enter(self):
        with self.lock:
            self.active += 1
            if self.active == 1:
                # An idle spell is no missed slot: the first request after it starts the pace afresh.
                self.next_slot = time.monotonic()
                self._write_load()

    def leave(self):
        with self.lock:
            self.active -= 1
            if self.active == 0:
                try:
                    os.unlink(LOAD_FILE)
                except OSError:
                    pass

    def _write_load(self):
        try:
            tmp = LOAD_FILE + ".tmp"
            with open(tmp, "w") as handle:
                json.dump(self.load, handle)
            os.replace(tmp, LOAD_FILE)
        except OSError as exc:
            log("cannot write %s: %s" % (LOAD_FILE, exc))


def greedy_answer(prompt, max_tokens, diverge_at=None):
    """The deterministic "greedy" answer to ``prompt``: tokens with their log-probabilities.

    From token ``diverge_at`` on (INFEROPS_LAB_SIM_DIVERGE_AT, a kernel that computes wrong
    sums), the tokens and their log-probabilities change, as a wrong allreduce would change them.
    """
    tokens = []
    for position in range(max_tokens):
        wrong = diverge_at is not None and position >= diverge_at
        digest = hashlib.sha256(("%s|%d|%s" % (prompt, position, "wrong" if wrong else "")).encode()).digest()
        word = VOCAB[digest[0] % len(VOCAB)]
        logprob = -round(0.02 + (digest[1] / 255.0) * (2.5 if wrong else 0.6), 4)
        tokens.append((" " + word if position else word, logprob))
    return tokens


def logprobs_content(tokens, top):
    return {"content": [{"token": token, "bytes": list(token.encode()), "logprob": logprob,
                         "top_logprobs": [{"token": token, "bytes": list(token.encode()), "logprob": logprob}][:top]}
                        for token, logprob in tokens]}


def count_prompt_tokens(messages):
    text = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    return max(1, len(text.split()))


def make_handler(state):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "inferops-lab-sglang-sim"

        def log_message(self, fmt, *args):
            pass

        def _send_json(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self):
            key = state["api_key"]
            if not key:
                return True
            given = self.headers.get("Authorization", "")
            scheme, _separator, token = given.partition(" ")
            if scheme.lower() == "bearer" and hmac.compare_digest(token.encode(), key.encode()):
                return True
            self._send_json(401, {"error": "Unauthorized"})
            return False

        def _answered_as_rank_above_0(self):
            # SGLang 0.5.9 (entrypoints/engine.py): a node of rank 1 or more of a replica across
            # nodes runs only its schedulers and launch_dummy_health_check_server, which answers
            # /ping, /health and /health_generate (and /metrics with --enable-metrics) without an
            # API key check, and nothing else.
            if state["node_rank"] < 1:
                return False
            path = self.path.split("?")[0].rstrip("/")
            if self.command == "GET" and path in ("/ping", "/health", "/health_generate"):
                self._send_json(200 if state["ready"].is_set() else 503, {})
                return True
            if self.command == "GET" and path == "/metrics" and state["metrics"] is not None:
                return False
            self._send_json(404, {"detail": "Not Found"})
            return True

        def do_GET(self):
            if self._answered_as_rank_above_0():
                return
            if self.path.split("?")[0] == "/ready" and state.get("has_ready"):
                # SGLang 0.5.23: up, and neither paused nor draining.
                self._send_json(200 if state["ready"].is_set() and not state["draining"] else 503, {})
                return
            if self.path.startswith("/health"):
                if state["draining"]:
                    self._send_json(503, {})
                elif state["ready"].is_set():
                    self._send_json(200, {})
                else:
                    self._send_json(503, {"error": "server is loading"})
                return
            # SGLang 0.5.9 serves /metrics only with --enable-metrics, and never behind the API key
            # (sglang/srt/utils/auth.py lets /health* and /metrics* through).
            if self.path.split("?")[0].rstrip("/") == "/metrics" and state["metrics"] is not None:
                data = state["metrics"].exposition().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            if not self._authorized():
                return
            if self.path == "/v1/models":
                if not state["ready"].is_set():
                    self._send_json(503, {"error": "server is loading"})
                    return
                self._send_json(200, {"object": "list", "data": [
                    {"id": state["served"], "object": "model", "owned_by": "sglang", "root": state["model"],
                     "max_model_len": 202752}]})
                return
            if self.path == "/server_info":
                self._send_json(200, {"simulator": True, "rate_tok_s": state["budget"].rate,
                                      "kernel_cache": state["kernel_cache"], **state["info"]})
                return
            self._send_json(404, {"error": "not found"})

        def do_POST(self):
            if self._answered_as_rank_above_0():
                return
            with state["in_flight"].hold("POST %s" % self.path):
                self._post()

        def _post(self):
            if not self._authorized():
                return
            if self.path != "/v1/chat/completions":
                self._send_json(404, {"error": "not found"})
                return
            if not state["ready"].is_set():
                self._send_json(503, {"error": "server is loading"})
                return
            try:
                length = int(self.headers.get("Content-Length", "0"))
                request = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._send_json(400, {"error": "body is not JSON"})
                return
            if request.get("model") not in (None, state["served"], state["model"]):
                self._send_json(404, {"error": "model %r is not served here" % request.get("model")})
                return
            max_tokens = int(request.get("max_completion_tokens") or request.get("max_tokens") or 128)
            usage = {"prompt_tokens": count_prompt_tokens(request.get("messages") or []),
                     "completion_tokens": max_tokens}
            usage["total_tokens"] = usage["prompt_tokens"] + max_tokens
            budget = state["budget"]
            budget.enter()
            metrics = state["metrics"] or NO_METRICS
            ident = uuid.uuid4().hex
            metrics.start(ident, usage["prompt_tokens"], bool(request.get("stream")))
            aborted = True
            try:
                if request.get("stream"):
                    self._stream(request, max_tokens, usage, budget, lambda count: metrics.tokens(ident, count))
                else:
                    budget.take(max_tokens)
                    metrics.tokens(ident, max_tokens)
                    prompt = " ".join(str(m.get("content", "")) for m in request.get("messages") or []
                                      if isinstance(m, dict))
                    tokens = greedy_answer(prompt, max_tokens, state["diverge_at"])
                    choice = {"index": 0, "message": {"role": "assistant", "content": "".join(t for t, _lp in tokens)},
                              "finish_reason": "length"}
                    if request.get("logprobs"):
                        choice["logprobs"] = logprobs_content(tokens, int(request.get("top_logprobs") or 0))
                    self._send_json(200, {
                        "id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion",
                        "created": int(time.time()), "model": state["served"],
                        "choices": [choice], "usage": usage})
                aborted = False
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                metrics.finish(ident, aborted=aborted)
                budget.leave()

        def _stream(self, request, max_tokens, usage, budget, on_tokens):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            ident = "chatcmpl-" + uuid.uuid4().hex
            created = int(time.time())

            def event(body):
                self.wfile.write(b"data: " + json.dumps(body).encode() + b"\n\n")
                self.wfile.flush()

            sent = 0
            while sent < max_tokens:
                tokens = min(TOKENS_PER_CHUNK, max_tokens - sent)
                budget.take(tokens)
                on_tokens(tokens)
                text = "".join(WORDS[(sent + i) % len(WORDS)] + " " for i in range(tokens))
                sent += tokens
                event({"id": ident, "object": "chat.completion.chunk", "created": created,
                       "model": state["served"],
                       "choices": [{"index": 0, "delta": {"content": text},
                                    "finish_reason": "length" if sent >= max_tokens else None}]})
            if (request.get("stream_options") or {}).get("include_usage"):
                event({"id": ident, "object": "chat.completion.chunk", "created": created,
                       "model": state["served"], "choices": [], "usage": usage})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


def main(argv=None):
    args, ignored = parse_args(sys.argv[1:] if argv is None else argv)
    served = args.served_model_name or args.model_path
    fusion = args.enable_flashinfer_allreduce_fusion
    p2p = topology_has_p2p()
    slow = fusion and p2p is False
    channels = os.environ.get("NCCL_MIN_NCHANNELS")
    base = float(os.environ.get("INFEROPS_LAB_SIM_RATE") or (FUSION_WITHOUT_P2P_TOK_S if slow else BASELINE_TOK_S))
    settings_factor = running_requests_factor(args.max_running_requests) * nccl_channels_factor(channels)
    rate = base * settings_factor
    # Busier GPUs draw more power, but less than in proportion: tokens per joule improve with speed.
    load = FUSION_WITHOUT_P2P_LOAD if slow else {
        "power_w": round(BASELINE_LOAD["power_w"] * (0.4 + 0.6 * settings_factor)),
        "util_pct": min(100, round(BASELINE_LOAD["util_pct"] * settings_factor))}
    diverge = os.environ.get("INFEROPS_LAB_SIM_DIVERGE_AT")
    noise = float(os.environ.get("INFEROPS_LAB_SIM_NOISE") or NOISE_STDEV)
    state = {
        "model": args.model_path,
        "served": served,
        "api_key": args.api_key,
        "node_rank": args.node_rank,
        "ready": threading.Event(),
        "draining": False,
        "has_ready": release_has_ready_endpoint(),
        "in_flight": InFlight(),
        "kernel_cache": "none",
        "budget": TokenBudget(rate, load, os.environ.get("INFEROPS_LAB_SIM_SEED", "0"), noise),
        "metrics": Metrics(served, args.max_running_requests, installed_release()) if args.enable_metrics else None,
        "diverge_at": int(diverge) if diverge not in (None, "") else None,
        "info": {"model_path": args.model_path, "served_model_name": served, "tp_size": args.tensor_parallel_size,
                 "enable_flashinfer_allreduce_fusion": fusion, "p2p": p2p, "ignored_flags": len(ignored),
                 "max_running_requests": args.max_running_requests, "nccl_min_nchannels": channels,
                 "noise_stdev": noise, "answers_diverge_at": diverge},
    }
    log("SIMULATED server (no GPU, no model): model=%s served as %s, tp=%d, allreduce fusion=%s, P2P=%s, "
        "max running requests=%s, NCCL_MIN_NCHANNELS=%s, %.0f tok/s +/- %.0f%% noise, answers diverge at %s, "
        "auth=%s, metrics=%s, %d other flags accepted"
        % (args.model_path, served, args.tensor_parallel_size, fusion, p2p, args.max_running_requests, channels,
           rate, noise * 100, diverge or "never", "on" if args.api_key else "off",
           "on" if args.enable_metrics else "off", len(ignored)))
    server = Server((args.host, args.port), make_handler(state))

    def load_model():
        if os.environ.get("INFEROPS_LAB_SIM_NEVER_HEALTHY") == "1":
            log("INFEROPS_LAB_SIM_NEVER_HEALTHY=1: /health will stay 503")
            return
        time.sleep(float(os.environ.get("INFEROPS_LAB_SIM_LOAD_SECONDS", "3")))
        state["kernel_cache"] = warm_kernel_cache()
        state["ready"].set()
        log("The server is fired up and ready to roll!")

    threading.Thread(target=load_model, daemon=True).start()
    # The real server looks every 5 s; the lab looks more often so that its many restarts stay short.
    poll = float(os.environ.get("INFEROPS_LAB_SIM_DRAIN_POLL_SECONDS", "0.5"))
    signal.signal(signal.SIGTERM, lambda _signum, _frame: threading.Thread(
        target=drain_then_exit, args=(server, state, poll), daemon=True).start())
    log("listening on %s:%d" % (args.host, args.port))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    if installed_release() >= (0, 5, 23):
        # As SGLang 0.5.23's launch_server.py warns when run as a module.
        warnings.warn("'python -m sglang.launch_server' is still supported, but 'sglang serve' is the recommended "
                      "entrypoint.\n  Example: sglang serve --model-path <model> [options]", UserWarning, stacklevel=1)
    sys.exit(main())
