# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Simulated ``sglang.launch_server`` for the lab node (see README.md beside this package)."""

import argparse
import hmac
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Aggregate output rates measured on the target machine (8x RTX PRO 6000, no P2P).
BASELINE_TOK_S = 1867.0
FUSION_WITHOUT_P2P_TOK_S = 236.0
BASELINE_LOAD = {"power_w": 250, "util_pct": 35}
FUSION_WITHOUT_P2P_LOAD = {"power_w": 125, "util_pct": 15}
LOAD_FILE = "/run/inferops-lab/gpu-load.json"
TOKENS_PER_CHUNK = 4
WORDS = ("the", "lab", "node", "streams", "simulated", "tokens", "at", "a", "measured", "rate")


class Server(ThreadingHTTPServer):
    # A benchmark opens dozens of connections at once; the default backlog of 5 resets them.
    request_queue_size = 1024
    daemon_threads = True


def log(message):
    print("[sglang-sim] %s" % message, flush=True)


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


class TokenBudget:
    """One output rate shared by every request in flight, like a saturated GPU batch."""

    def __init__(self, rate, load):
        self.rate = rate
        self.load = load
        self.lock = threading.Lock()
        self.next_slot = time.monotonic()
        self.active = 0

    def take(self, tokens):
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next_slot)
            self.next_slot = start + tokens / self.rate
            ready = self.next_slot
        delay = ready - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def enter(self):
        with self.lock:
            self.active += 1
            if self.active == 1:
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

        def do_GET(self):
            if self.path.startswith("/health"):
                if state["ready"].is_set():
                    self._send_json(200, {})
                else:
                    self._send_json(503, {"error": "server is loading"})
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
            if self.path == "/metrics" and state["metrics"]:
                # SGLang 0.5.9's gauge names (Prometheus text format), one series per model.
                labels = '{model_name="%s"}' % state["served"]
                text = ("# HELP sglang:num_running_reqs The number of running requests.\n"
                        "# TYPE sglang:num_running_reqs gauge\n"
                        "sglang:num_running_reqs%s %.1f\n"
                        "# HELP sglang:num_queue_reqs The number of requests in the waiting queue.\n"
                        "# TYPE sglang:num_queue_reqs gauge\n"
                        "sglang:num_queue_reqs%s 0.0\n" % (labels, state["budget"].active, labels)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)
                return
            if self.path == "/server_info":
                self._send_json(200, {"simulator": True, "rate_tok_s": state["budget"].rate, **state["info"]})
                return
            self._send_json(404, {"error": "not found"})

        def do_POST(self):
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
            try:
                if request.get("stream"):
                    self._stream(request, max_tokens, usage, budget)
                else:
                    budget.take(max_tokens)
                    text = " ".join(WORDS[i % len(WORDS)] for i in range(max_tokens))
                    self._send_json(200, {
                        "id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion",
                        "created": int(time.time()), "model": state["served"],
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": "length"}],
                        "usage": usage})
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                budget.leave()

        def _stream(self, request, max_tokens, usage, budget):
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
    rate = float(os.environ.get("INFEROPS_LAB_SIM_RATE") or (FUSION_WITHOUT_P2P_TOK_S if slow else BASELINE_TOK_S))
    load = FUSION_WITHOUT_P2P_LOAD if slow else BASELINE_LOAD
    state = {
        "model": args.model_path,
        "served": served,
        "api_key": args.api_key,
        "metrics": args.enable_metrics,
        "ready": threading.Event(),
        "budget": TokenBudget(rate, load),
        "info": {"model_path": args.model_path, "served_model_name": served, "tp_size": args.tensor_parallel_size,
                 "enable_flashinfer_allreduce_fusion": fusion, "p2p": p2p, "ignored_flags": len(ignored)},
    }
    log("SIMULATED server (no GPU, no model): model=%s served as %s, tp=%d, allreduce fusion=%s, P2P=%s, "
        "%.0f tok/s, auth=%s, %d other flags accepted"
        % (args.model_path, served, args.tensor_parallel_size, fusion, p2p, rate,
           "on" if args.api_key else "off", len(ignored)))
    server = Server((args.host, args.port), make_handler(state))

    def load_model():
        if os.environ.get("INFEROPS_LAB_SIM_NEVER_HEALTHY") == "1":
            log("INFEROPS_LAB_SIM_NEVER_HEALTHY=1: /health will stay 503")
            return
        time.sleep(float(os.environ.get("INFEROPS_LAB_SIM_LOAD_SECONDS", "3")))
        state["ready"].set()
        log("The server is fired up and ready to roll!")

    threading.Thread(target=load_model, daemon=True).start()
    log("listening on %s:%d" % (args.host, args.port))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
