"""An example downstream for retryd's grpc processor: a RecordProcessor server
(proto/retryd/v1/processor.proto) to copy and put your own logic in.

  /usr/bin/python3 downstream.py --gen-dir DIR [--host 127.0.0.1] [--port 50061]
                                 [--work-ms 0] [--flaky-attempts 1] [--perm-retriable]

DIR holds processor_pb2.py, processor_pb2_grpc.py and google/rpc/*_pb2.py,
made by generate.sh (default: $RETRYD_EXAMPLE_GEN_DIR). For each record: a key starting with "bad"
or "perm" is refused for good (INVALID_ARGUMENT: retryd dead-letters it); a
key starting with "flaky" fails its first attempt (ABORTED: retryd retries
it); any other record succeeds, its value upper-cased and a header
"processed-by" added. Each failure carries a machine-readable reason (a
google.rpc.ErrorInfo of domain "downstream.example.com": RECORD_REFUSED or
TRY_AGAIN) in its status details, which retryd writes on a dead letter as
retryd-error-reason. Port 0 picks a free port; the "listening on" line says
which. --work-ms makes every call take that long, like a slow service (try
retryd's max_concurrent_calls against it).

Two flags change the rule, for comparing retryd with consumers that retry
every failure alike (bench/peers/): --flaky-attempts N fails a "flaky" key's
first N attempts; --perm-retriable fails a "bad" or "perm" key with ABORTED on
every attempt instead of INVALID_ARGUMENT, so it uses all its attempts before
it is dead-lettered. Each flag is also accepted with underscores, as the C++
example spells it.
"""
import argparse
import importlib
import os
import signal
import sys
import threading
import time
from concurrent import futures

import grpc


# Names this service in the reasons its failures give.
DOMAIN = "downstream.example.com"


def abort_with_reason(context, code, message, reason, status_pb2, error_details_pb2):
    """Ends the call with `code` and `message`, its status details (a
    google.rpc.Status in the grpc-status-details-bin trailer, what
    grpcio-status's abort_with_status would send) carrying a
    google.rpc.ErrorInfo: `reason` says why in a word a program can match
    on."""
    status = status_pb2.Status(code=code.value[0], message=message)
    status.details.add().Pack(error_details_pb2.ErrorInfo(domain=DOMAIN, reason=reason))
    context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
    context.abort(code, message)


class ExampleProcessor:
    """Process runs on a thread of the server's pool, so calls overlap and it
    may block (a database, another service)."""

    def __init__(self, modules, work_ms, flaky_attempts, perm_retriable):
        self.pb2, self.status_pb2, self.error_details_pb2 = modules
        self.work_s = work_ms / 1000.0
        self.flaky_attempts = flaky_attempts
        self.perm_code = (grpc.StatusCode.ABORTED if perm_retriable
                          else grpc.StatusCode.INVALID_ARGUMENT)

    def Process(self, request, context):
        if self.work_s > 0:
            time.sleep(self.work_s)  # The stand-in for real work: a database, say.
        record = request.record
        # retryd calls again after a crash or a lost answer: real side effects
        # should be keyed on (record.topic, record.partition, record.offset).
        key = record.key if record.HasField("key") else b""  # Null key: b"".
        if key.startswith((b"bad", b"perm")):
            self.fail(context, self.perm_code,
                      "cannot process " + key.decode("utf-8", "replace"), "RECORD_REFUSED")
        if key.startswith(b"flaky") and request.attempt <= self.flaky_attempts:
            self.fail(context, grpc.StatusCode.ABORTED, "try again", "TRY_AGAIN")
        response = self.pb2.ProcessResponse()
        # A null value is left unset in the response: forwarded unchanged.
        if record.HasField("value"):
            response.value = record.value.upper()  # bytes.upper(): ASCII only.
        response.headers.add(key="processed-by", value=b"python-example")
        return response

    def fail(self, context, code, message, reason):
        abort_with_reason(context, code, message, reason, self.status_pb2,
                          self.error_details_pb2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=50061)
    parser.add_argument("--gen-dir", default=os.environ.get("RETRYD_EXAMPLE_GEN_DIR"),
                        help="where generate.sh put processor_pb2*.py")
    parser.add_argument("--work-ms", "--work_ms", type=int, default=0,
                        help="milliseconds each call takes, standing for real work")
    parser.add_argument("--flaky-attempts", "--flaky_attempts", type=int, default=1,
                        help='attempts a "flaky" key fails (ABORTED) before it succeeds')
    parser.add_argument("--perm-retriable", "--perm_retriable", action="store_true",
                        help='fail "bad" and "perm" keys with ABORTED on every attempt '
                             'instead of refusing them with INVALID_ARGUMENT')
    args = parser.parse_args()
    if not args.gen_dir:
        parser.error("--gen-dir (or RETRYD_EXAMPLE_GEN_DIR) is required")
    sys.path.insert(0, args.gen_dir)
    processor_pb2 = importlib.import_module("processor_pb2")
    processor_pb2_grpc = importlib.import_module("processor_pb2_grpc")
    status_pb2 = importlib.import_module("google.rpc.status_pb2")
    error_details_pb2 = importlib.import_module("google.rpc.error_details_pb2")

    # so_reuseport 0: a second copy fails to start instead of sharing the port.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16),
                         options=[("grpc.so_reuseport", 0)])
    processor_pb2_grpc.add_RecordProcessorServicer_to_server(
        ExampleProcessor((processor_pb2, status_pb2, error_details_pb2), args.work_ms,
                         args.flaky_attempts, args.perm_retriable),
        server)
    port = server.add_insecure_port(f"{args.host}:{args.port}")  # Raises if it cannot.
    # Python runs signal handlers on the main thread, which waits for this.
    stop = threading.Event()
    for stop_signal in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop_signal, lambda *_: stop.set())
    server.start()
    print(f"listening on {args.host}:{port}", flush=True)

    stop.wait()
    # Calls in progress get 5 seconds to finish and connected clients (retryd)
    # as long to go; then calls are cancelled.
    server.stop(grace=5).wait()


if __name__ == "__main__":
    main()
