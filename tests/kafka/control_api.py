#!/usr/bin/python3
"""The control API as a controller drives it, on a real Kafka, from a client
written from the protos alone: no retryd code, no generated stubs. Message
classes come from protoc's descriptor set of proto/ at run time; calls go
through grpcio's generic channel methods.

retryd runs one retry thread (max_threads 21, min_threads 0) over 4
partitions. Checked:

  * SetRetryThreadCount with a request_id, sent twice, is applied once (the
    second answer is the first), and the same id with another request is
    INVALID_ARGUMENT with ErrorInfo reason REQUEST_ID_REUSED;
  * a cap reached is FAILED_PRECONDITION, reason MAX_THREADS_REACHED, read
    from the google.rpc.Status in the grpc-status-details-bin trailer;
  * 20 clients at once each start one retry thread and stop it again, each
    call with a 30 s deadline: every call answers in time, OK with exactly
    the thread id it caused, or a code with an ErrorInfo reason; the retry
    thread that runs throughout goes through at most 3 rebalances (its
    ThreadMetrics.rebalances) for the 40 calls; 1 retry thread is left;
  * a drain started with StartDrain runs (GetOperation, ListOperations,
    WatchOperation) and CancelOperation ends it: CANCELLED, not in order,
    the engine RUNNING, the retry thread still there;
  * every record reached the output topic (none lost while threads came and
    went), and SIGTERM exits 0.

Exit status 0 passed, 1 failed, 77 skipped (no cluster).
"""

import argparse
import concurrent.futures
import os
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_kafka  # noqa: E402
from real_kafka import Failure  # noqa: E402

import grpc  # noqa: E402
from google.protobuf import descriptor_pb2, message_factory  # noqa: E402

PARTITIONS = 4
CLIENTS = 20
DEADLINE_S = 30
MAX_REBALANCES = 3


def parse_args(doc=__doc__):
    """The arguments of a test driving retryd through the control API."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--retryd", required=True, help="the retryd binary")
    p.add_argument("--proto-dir", required=True, help="the project's proto/ directory")
    return p


def message_classes(proto_dir, work):
    """Every message of control.proto and its imports, by full name."""
    out = os.path.join(work, "control.pb")
    subprocess.run(["protoc", f"-I{proto_dir}", "--include_imports", f"--descriptor_set_out={out}",
                    "retryd/v1/control.proto", "google/rpc/error_details.proto"], check=True)
    files = descriptor_pb2.FileDescriptorSet()
    with open(out, "rb") as f:
        files.ParseFromString(f.read())
    return message_factory.GetMessages(list(files.file))


class Control:
    """retryd.v1.Control over grpcio's generic calls."""

    def __init__(self, address, messages):
        self.channel = grpc.insecure_channel(address)
        self.m = messages

    def call(self, method, request_type, response_type, timeout=DEADLINE_S, **fields):
        request = self.m[f"retryd.v1.{request_type}"](**fields)
        response = self.m[f"retryd.v1.{response_type}"]
        rpc = self.channel.unary_unary(f"/retryd.v1.Control/{method}",
                                       request_serializer=lambda r: r.SerializeToString(),
                                       response_deserializer=response.FromString)
        return rpc(request, timeout=timeout)

    def stream(self, method, request_type, response_type, timeout, **fields):
        request = self.m[f"retryd.v1.{request_type}"](**fields)
        response = self.m[f"retryd.v1.{response_type}"]
        rpc = self.channel.unary_stream(f"/retryd.v1.Control/{method}",
                                        request_serializer=lambda r: r.SerializeToString(),
                                        response_deserializer=response.FromString)
        return rpc(request, timeout=timeout)

    def reason(self, error):
        """The ErrorInfo reason (domain retryd.io) of a failed call, or None."""
        for key, value in error.trailing_metadata() or ():
            if key != "grpc-status-details-bin":
                continue
            status = self.m["google.rpc.Status"].FromString(value)
            for detail in status.details:
                if detail.type_url.endswith("/google.rpc.ErrorInfo"):
                    info = self.m["google.rpc.ErrorInfo"].FromString(detail.value)
                    if info.domain == "retryd.io":
                        return info.reason
        return None

    def refused(self, what, code, reason, method, request_type, response_type, **fields):
        try:
            self.call(method, request_type, response_type, **fields)
        except grpc.RpcError as e:
            if e.code() != code or self.reason(e) != reason:
                raise Failure(f"{what}: {e.code().name} reason {self.reason(e)} "
                              f"({e.details()}), wanted {code.name} reason {reason}")
            return
        raise Failure(f"{what} succeeded")

    def retry_threads(self):
        status = self.call("GetStatus", "GetStatusRequest", "GetStatusResponse")
        # ThreadRole 2 is RETRY; states 7 and 8 are STOPPED and FAILED.
        return [t.thread_id for t in status.threads if t.role == 2 and t.state not in (7, 8)]

    def thread_metrics(self, thread_id):
        stream = self.stream("WatchMetrics", "WatchMetricsRequest", "MetricsSnapshot", 30,
                             interval_ms=1000, thread_ids=[thread_id])
        try:
            for snapshot in stream:
                for t in snapshot.threads:
                    if t.thread_id == thread_id:
                        return t
                raise Failure(f"thread {thread_id} is not in the metrics")
        finally:
            stream.cancel()
        raise Failure("WatchMetrics ended without a snapshot")


def request_ids_apply_once(control, say):
    rid = str(uuid.uuid4())
    first = control.call("SetRetryThreadCount", "SetRetryThreadCountRequest",
                         "SetRetryThreadCountResponse", target=2, request_id=rid)
    again = control.call("SetRetryThreadCount", "SetRetryThreadCountRequest",
                         "SetRetryThreadCountResponse", target=2, request_id=rid)
    if len(first.started_thread_ids) != 1:
        raise Failure(f"target 2 from 1 started {list(first.started_thread_ids)}")
    if again.SerializeToString() != first.SerializeToString():
        raise Failure(f"the retry got another answer: {again} vs {first}")
    if len(control.retry_threads()) != 2:
        raise Failure(f"{len(control.retry_threads())} retry threads after target 2 sent twice")
    control.refused("the same request_id with target 3", grpc.StatusCode.INVALID_ARGUMENT,
                    "REQUEST_ID_REUSED", "SetRetryThreadCount", "SetRetryThreadCountRequest",
                    "SetRetryThreadCountResponse", target=3, request_id=rid)
    control.refused("StartRetryThreads past the cap", grpc.StatusCode.FAILED_PRECONDITION,
                    "MAX_THREADS_REACHED", "StartRetryThreads", "StartRetryThreadsRequest",
                    "StartRetryThreadsResponse", count=100)
    back = control.call("SetRetryThreadCount", "SetRetryThreadCountRequest",
                        "SetRetryThreadCountResponse", target=1)
    if list(back.stopped_thread_ids) != list(first.started_thread_ids):
        raise Failure(f"target 1 stopped {list(back.stopped_thread_ids)}, not the thread "
                      f"target 2 started ({list(first.started_thread_ids)})")
    say(f"request_id applied once (thread {first.started_thread_ids[0]}); REQUEST_ID_REUSED and "
        f"MAX_THREADS_REACHED read from ErrorInfo")


def burst(control, say):
    """CLIENTS clients at once: each starts one retry thread and stops it."""
    (steady,) = control.retry_threads()
    before = control.thread_metrics(steady).rebalances
    barrier = threading.Barrier(CLIENTS)
    failures = []

    def one(i):
        barrier.wait(timeout=30)
        began = time.monotonic()
        try:
            start = control.call("StartRetryThreads", "StartRetryThreadsRequest",
                                 "StartRetryThreadsResponse", count=1,
                                 request_id=str(uuid.uuid4()))
        except grpc.RpcError as e:
            if control.reason(e) is None:
                failures.append(f"client {i}: start {e.code().name} without a reason")
            return ("start refused", control.reason(e), time.monotonic() - began)
        if len(start.thread_ids) != 1:
            failures.append(f"client {i}: start answered {list(start.thread_ids)}")
            return ("bad", None, 0)
        tid = start.thread_ids[0]
        try:
            control.call("StopRetryThreads", "StopRetryThreadsRequest",
                         "StopRetryThreadsResponse", thread_ids=[tid],
                         request_id=str(uuid.uuid4()))
        except grpc.RpcError as e:
            if control.reason(e) is None:
                failures.append(f"client {i}: stop {e.code().name} without a reason")
            return ("stop refused", control.reason(e), time.monotonic() - began)
        return ("ok", tid, time.monotonic() - began)

    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        results = list(pool.map(one, range(CLIENTS)))
    oks = [r for r in results if r[0] == "ok"]
    refused = [r for r in results if r[0] != "ok"]
    ids = [r[1] for r in oks]
    if len(set(ids)) != len(ids):
        failures.append(f"two calls were answered with the same thread: {sorted(ids)}")
    if not oks:
        failures.append("no client got a thread")
    left = control.retry_threads()
    if left != [steady]:
        failures.append(f"retry threads left: {left}, wanted [{steady}]")
    rebalances = control.thread_metrics(steady).rebalances - before
    slowest = max(r[2] for r in results)
    say(f"{CLIENTS} clients x (start + stop): {len(oks)} OK, {len(refused)} refused "
        f"({sorted({str(r[1]) for r in refused})}); thread {steady} went through {rebalances} "
        f"rebalances; slowest client {slowest:.1f} s (deadline {DEADLINE_S} s per call)")
    if rebalances > MAX_REBALANCES:
        failures.append(f"the burst cost {rebalances} rebalances, more than {MAX_REBALANCES}")
    if failures:
        raise Failure("; ".join(failures))


def drain_and_cancel(control, say):
    op = control.call("StartDrain", "StartDrainRequest", "Operation", request_id=str(uuid.uuid4()))
    # OperationKind 1 DRAIN; OperationState 1 RUNNING, 4 CANCELLED.
    if op.kind != 1 or op.state != 1 or not op.id:
        raise Failure(f"StartDrain answered {op}")
    got = control.call("GetOperation", "GetOperationRequest", "Operation", id=op.id)
    listed = control.call("ListOperations", "ListOperationsRequest", "ListOperationsResponse")
    if got.id != op.id or op.id not in [o.id for o in listed.operations]:
        raise Failure("the drain is not found by GetOperation and ListOperations")
    watched = []

    def watch():
        for o in control.stream("WatchOperation", "WatchOperationRequest", "Operation", 60,
                                id=op.id):
            watched.append(o)

    watcher = threading.Thread(target=watch)
    watcher.start()
    real_kafka.wait_until(lambda: watched, 10, "the first message of WatchOperation")
    # EngineState 2 is DRAINING: input paused while the backlog drains.
    real_kafka.wait_until(
        lambda: control.call("GetStatus", "GetStatusRequest", "GetStatusResponse").state == 2,
        10, "the engine DRAINING")
    control.refused("SetRetryThreadCount during the drain", grpc.StatusCode.FAILED_PRECONDITION,
                    "DRAIN_RUNNING", "SetRetryThreadCount", "SetRetryThreadCountRequest",
                    "SetRetryThreadCountResponse", target=2)
    cancelled = control.call("CancelOperation", "CancelOperationRequest", "Operation", id=op.id)
    watcher.join(timeout=30)
    if watcher.is_alive() or not watched or watched[-1].state != 4 or not watched[-1].done:
        raise Failure(f"WatchOperation did not end with the drain CANCELLED: "
                      f"{watched[-1] if watched else None}")
    status = control.call("GetStatus", "GetStatusRequest", "GetStatusResponse")
    # Ordering 2 is IN_ORDER; EngineState 1 RUNNING.
    if status.ordering == 2 or status.state != 1 or len(control.retry_threads()) != 1:
        raise Failure(f"after the cancel: ordering {status.ordering}, state {status.state}, "
                      f"retry threads {control.retry_threads()}")
    say(f"drain {op.id}: running, {len(watched)} WatchOperation messages, cancelled "
        f"({cancelled.state}), engine as it was; progress {watched[-1].progress.description!r}")


def run(args, work, say):
    messages = message_classes(args.proto_dir, work)
    cluster = real_kafka.Cluster()
    names = real_kafka.TestNames(cluster, "control-api", ["input", "retry", "output", "dlq"],
                                 PARTITIONS, groups=["g"])
    with names:
        config = os.path.join(work, "retryd.textproto")
        real_kafka.retryd_config(config, cluster, names, work, f"""
retry {{
  topic: "{names.topic['retry']}"
  threads: 1
  min_threads: 0
  max_threads: {CLIENTS + 1}
  max_attempts: 5
  backoff {{ initial_ms: 15000 multiplier: 1.0 max_ms: 15000 }}
}}
processor {{
  simulate {{
    seed: {args.seed}
    rule {{ key_prefix: "twice-" fail_attempts: 2 }}
  }}
}}""")
        retryd = real_kafka.Retryd(args.retryd, config, work)
        records = [(f"ok-{i:04d}", "output", f"v{i}") for i in range(200)]
        records += [(f"twice-{i:04d}", "output", f"t{i}") for i in range(20)]
        try:
            retryd.start()
            control = Control(retryd.address(), messages)
            retryd.wait_assigned()
            producer = real_kafka.PacedProducer(cluster, names.topic["input"], records, 2.0)
            producer.start()
            request_ids_apply_once(control, say)
            burst(control, say)
            producer.finish(60)
            # The twice- records wait 15 s in the retry topic: a drain has
            # a backlog to work on while it is cancelled.
            drain_and_cancel(control, say)
            groups = real_kafka.Groups(cluster, [
                (names.group["g"], names.topic["input"], PARTITIONS),
                (names.group["g"] + ".retry", names.topic["retry"], PARTITIONS)])
            try:
                groups.wait_done(90, check=retryd.check)
            finally:
                groups.close()
            retryd.stop_gracefully()
        finally:
            retryd.cleanup()
        failures = real_kafka.Verdict(cluster, names, records).failures
        status_code = real_kafka.verdict_status(say, failures, log_of=retryd.log())
    cluster.close()
    return status_code


if __name__ == "__main__":
    sys.exit(real_kafka.scenario_main("kafka-control-api", parse_args(), run))
