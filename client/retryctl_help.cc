#include "client/retryctl_help.h"

#include <array>
#include <cstddef>

namespace retryd::retryctl {
namespace {

// `parts` as one NUL-terminated array, when compiled.
template <size_t... kSizes>
consteval std::array<char, (kSizes + ...) - sizeof...(kSizes) + 1> Join(
    const char (&... parts)[kSizes]) {
  std::array<char, (kSizes + ...) - sizeof...(kSizes) + 1> joined{};
  size_t next = 0;
  for (const std::string_view part : {std::string_view(parts, kSizes - 1)...}) {
    for (const char c : part) joined[next++] = c;
  }
  return joined;
}

template <size_t kSize>
std::string_view View(const std::array<char, kSize>& text) {
  return std::string_view(text.data(), kSize - 1);
}

constexpr std::string_view kOverviewHelp =
    R"(retryctl - control a running retryd: its status, retry threads, ordering
mode and live per-thread metrics.

Usage:
  retryctl [FLAGS] COMMAND [ARGS]

Commands:
  status                           Engine state, ordering mode, Kafka, retry
                                   backlog, totals and every thread.
  threads start N                  Start N more retry threads.
  threads stop N | --id ID... [--now]
                                   Stop retry threads (gracefully unless --now).
  threads set N [--now]            Start or stop retry threads until N run.
  ordering MODE [--drain]          Switch the ordering mode: unordered,
                                   in-order or key.
  inorder on [--drain] | off       Switch in-order mode on or off.
  watch [--interval MS] [--thread ID...] [--count N]
                                   Live per-thread metrics, refreshed like top.
  inflight [--limit N]             The oldest records not yet done, and why.
  dlq ls [FILTERS] [--limit N | --all-pages]
                                   The dead-letter topic's records, decoded.
  dlq record TOPIC PARTITION OFFSET
                                   Dead-letter one held record now (also
                                   spelled dlq-record).
  dlq redrive [FILTERS] [--to TOPIC] [--dry-run] [--wait]
                                   Produce dead letters again: an operation.
  dlq purge --all | --up-to P=OFFSET...
                                   Hide (or delete) dead letters below offsets.
  drain [--wait] [--drain-timeout D]
                                   Empty the retry backlog, stop the retry
                                   threads, switch to in-order: an operation.
  operations                       The operations retryd keeps, newest first.
  operation ID | watch ID | cancel ID
                                   One operation; follow it; cancel it.
  op ls | get ID | watch ID | cancel ID
                                   The same, shorter.
  version                          retryctl's release and retryd's.
  health [SERVICE]                 grpc.health.v1 status of retryd, or of a
                                   service such as retryd.downstream.
  help [COMMAND]                   This text, or a command's.

Flags (before or after the command):
  --addr HOST:PORT    retryd's control address (default: $RETRYD_ADDR, else
                      127.0.0.1:50051)
  --token-file FILE   read the bearer token from FILE (default:
                      $RETRYD_TOKEN_FILE). A token is never taken on the
                      command line, where other users could read it.
  --tls               use TLS, verifying retryd with the system's CA roots
  --tls-ca FILE       use TLS, verifying retryd with the PEM CA roots in FILE
  --tls-cert FILE     with --tls-key: this client's PEM certificate (mutual TLS)
  --tls-key FILE      the certificate's PEM private key
  --timeout S         deadline of each call, in seconds (default 30; also 500ms,
                      2m); 'ordering in-order --drain' may drain for this
                      long
  --json              print protobuf JSON with the .proto field names, for
                      scripts; watch prints one JSON snapshot per line; a
                      failed call's error is a JSON line on stderr
  --request-id UUID   name this change (a command that changes retryd), as
                      uuidgen prints one: run again with the same id, a
                      change retryd applied is not applied twice (it answers
                      as the first time). 'auto': a new random id, shown if
                      the call fails without an answer. Ids are kept 10
                      minutes or more, by the retryd that answered
  -h, --help          this text; 'retryctl COMMAND --help' for a command's

Exit status:
  0      success
  1      health: the service is not SERVING
  2      usage error
  64+N   the call failed with gRPC status code N, as grpcurl exits: 73
         FAILED_PRECONDITION, 69 NOT_FOUND, 78 UNAVAILABLE, 80
         UNAUTHENTICATED, 68 DEADLINE_EXCEEDED; or an operation followed
         (drain --wait, dlq redrive --wait, operation watch) ended with that
         code. stderr says
         "retryctl: CODE (REASON): message", the reason (MAX_THREADS_REACHED,
         DRAIN_RUNNING, ...) when retryd gave one; with --json one line
         {"code": N, "status": "CODE", "message": "...", "reason": "..."}
  130    Ctrl-C while following an operation, which goes on

Examples:
  retryctl status
  retryctl --addr 10.0.0.5:50051 --token-file ~/.retryd-token threads start 2
  retryctl threads stop --id 3 --id 4
  retryctl ordering key
  retryctl --timeout 300 ordering in-order --drain
  retryctl watch --interval 500
  retryctl inflight --limit 10
  retryctl dlq-record orders 3 1042
  retryctl dlq ls --reason ORDER_LOCKED --since 2026-12-01T08:00:00Z
  retryctl dlq redrive --reason ORDER_LOCKED --rate 50 --wait
  id=$(uuidgen); retryctl --request-id "$id" threads set 4
  retryctl drain --wait --drain-timeout 10m
  retryctl --json status | jq .retry_backlog
)";

constexpr std::string_view kStatusHelp =
    R"(Usage:
  retryctl status

Prints the engine state, the ordering mode (in key mode with its parked keys:
how many, their records in the retry topic, how long the oldest has been
parked), the Kafka cluster and whether it answers, the retry backlog (retry
records not yet done), totals since start, and every thread with its role,
state, time in that state and partitions.

With --json: the whole GetStatusResponse, effective config included (secrets
appear only as the names of their files or environment variables).

Examples:
  retryctl status
  retryctl --json status | jq '.threads | length'
)";

constexpr std::string_view kThreadsHelp =
    R"(Usage:
  retryctl threads start N
  retryctl threads stop N [--now]
  retryctl threads stop --id ID [--id ID...] [--now]
  retryctl threads set N [--now]
  (start, stop N and set take --tier TOPIC with tiered retry topics)

Retry threads consume the retry topic and process failed records again, with
backoff, while the primary threads move on.

threads start N   Start N more retry threads (N >= 1; the server caps the total
                  at retry.max_threads). Prints the new thread ids once they
                  have joined the retry consumer group. FAILED_PRECONDITION
                  while in-order mode is on: run 'retryctl ordering key' (or
                  unordered) first.
threads stop N    Stop the N most recently started retry threads (all of them
                  if fewer run). N is required unless --id is given.
                  FAILED_PRECONDITION, none stopped, if fewer than
                  retry.min_threads would be left. With retry.autoscale on,
                  retryd also starts and stops retry threads by itself
                  ('retryctl status' shows the latest).
  --id ID...      Stop exactly these retry threads instead (ids as shown by
                  'retryctl status'); repeat --id or list them: --id 3,4.
                  NOT_FOUND if one is not a running retry thread.
  --tier TOPIC    With tiered retry topics (retry.tiers): the tier whose
                  threads N counts, starts or stops, named by its topic
                  ('retryctl status' lists the tiers). Default: the first
                  tier. retry.min_threads and max_threads hold per tier.
  --now           Stop at once, abandoning in-flight work (it is processed
                  again later; nothing is lost). Default: graceful - finish
                  in-flight hand-offs and commit first.
threads set N     Start or stop retry threads (the most recently started
                  first) until N run; N may be 0. Prints the ids started or
                  stopped and every retry thread running. N running already
                  changes nothing, so it is safe to repeat. FAILED_PRECONDITION
                  with retry.autoscale on (AUTOSCALE_ACTIVE), above
                  retry.max_threads (MAX_THREADS_REACHED), below
                  retry.min_threads (MIN_THREADS_REACHED), or above 0 in
                  in-order mode (IN_ORDER_ACTIVE). --now as for stop.

With --request-id, a change retried with the same id is not applied twice.

Examples:
  retryctl threads set 4
  retryctl threads start 2
  retryctl threads stop 1
  retryctl threads stop --id 3 --id 5 --now
  retryctl --json threads start 1 | jq '.thread_ids[0]'
)";

constexpr std::string_view kInOrderHelp =
    R"(Usage:
  retryctl inorder on [--drain]
  retryctl inorder off

In-order mode: per input partition, records complete in offset order. A
failed record is retried in place, with backoff, pausing only its partition;
nothing goes to the retry topic. In-order mode and retry threads exclude each
other.

inorder on        Switch in-order mode on. FAILED_PRECONDITION while retry
                  threads run: stop them first ('retryctl threads stop N'), or
                  add --drain.
  --drain         Pause input, let the running retry threads empty the retry
                  backlog, stop them, then switch. Bounded by --timeout: if it
                  passes first, DEADLINE_EXCEEDED and the engine is left as it
                  was (raise --timeout for a large backlog).
inorder off       Switch back to the configured mode (unordered if the config
                  says in-order): the next failures go to the retry topic
                  again. 'retryctl ordering' picks the mode.

Examples:
  retryctl inorder on
  retryctl --timeout 300 inorder on --drain
  retryctl inorder off
)";

constexpr std::string_view kOrderingHelp =
    R"(Usage:
  retryctl ordering unordered
  retryctl ordering key
  retryctl ordering in-order [--drain]

How records of one input partition are ordered (MODE is case-insensitive;
the API's names, ORDERING_KEY or the older KEY, are taken too):
  unordered   Failures go to the retry topic; later records overtake them.
  key         Per key (within an input partition), records complete in
              input order. A key with a record in the retry topic is parked:
              its later records follow it through the retry topic, while
              other keys flow at full speed. Records without a key are
              unordered.
  in-order    Per partition, records complete in offset order: a failure is
              retried in place and its partition waits. Excludes retry
              threads.

ordering key      Pauses input briefly while the retry topic is read for the
                  keys parked there; prints how many.
ordering in-order FAILED_PRECONDITION while retry threads run: stop them first
                  ('retryctl threads stop N'), or add --drain.
  --drain         Pause input, let the running retry threads empty the retry
                  backlog, stop them, then switch. Bounded by --timeout: if it
                  passes first, DEADLINE_EXCEEDED and the engine is left as it
                  was.
Out of in-order, retry threads start again unless some run (their ids are
printed).

Examples:
  retryctl ordering key
  retryctl --timeout 300 ordering in-order --drain
  retryctl --json ordering unordered | jq .mode
)";

constexpr std::string_view kWatchHelp =
    R"(Usage:
  retryctl watch [--interval MS] [--thread ID...] [--count N]

Streams per-thread metrics and shows them as a table refreshed in place, like
top, until Ctrl-C. When stdout is not a terminal, prints one table per
snapshot, separated by a blank line. With --json, one MetricsSnapshot JSON
object per line.

  --interval MS   a snapshot every MS milliseconds, 100..60000 (default 1000)
  --thread ID...  only these threads (repeat --thread, or list them: 0,3)
  --count N       stop after N snapshots, e.g. for scripts

The header shows the engine state, ordering mode and retry backlog; then one
row per thread:
  ID ROLE STATE     thread id, primary or retry, its state
  IN-STATE          how long it has been in that state
  PARTS             number of assigned partitions
  PROC/s OK/s FAIL/s RETRY/s DLQ/s
                    per second: processor calls, successes, failed attempts,
                    records sent to the retry topic, records dead-lettered
                    ('-' until two snapshots of the thread have arrived)
  INFL SCHED PARKED LAG
                    in flight, held until due, held behind an earlier record
                    of their key (key order), consumer lag (records)
  P50ms P99ms MAXms processing latency over the interval ('-': no calls)
  LAST ERROR        the thread's last error and how long ago, shortened

Examples:
  retryctl watch
  retryctl watch --interval 250 --thread 3
  retryctl watch --count 5 > metrics.txt
  retryctl --json watch --count 1 | jq '.threads[] | {thread_id, lag}'
)";

constexpr std::string_view kInFlightHelp =
    R"(Usage:
  retryctl inflight [--limit N]

Lists the oldest records retryd's threads hold and have not finished, oldest
first: one record stuck behind a lag is found here. Each row:
  RECORD          its original input coordinates: TOPIC/PARTITION@OFFSET
  KEY             its key: text as it is, other bytes as hex (0x...),
                  <null> for none
  STATE           (--json: the full name, IN_FLIGHT_STATE_IN_CALL, ...)
                  IN_CALL      in a processor call now
                  WAITING_DUE  failed; held until its due time (by a retry
                               thread, or retried in place in order: its
                               partition waits)
                  WAITING_BEHIND
                               read, queued behind a held record of its
                               partition (in order) or for a call slot
                  DEFERRED     held while the downstream is down
  THREAD          the thread holding it; a retry thread's row says where it
                  read the record on the retry topic
  ATTEMPT         the attempt in progress (IN_CALL) or to make next
  AGE             since its first failure, or since it was read
  DUE IN          how long until its next attempt ('-': none pending)
  LAST ERROR      why its last attempt failed

  --limit N       at most N records, 1..10000 (default 100)

Examples:
  retryctl inflight
  retryctl --json inflight --limit 1000 |
    jq '.records[] | select(.state == "IN_FLIGHT_STATE_WAITING_DUE")'
)";

constexpr std::string_view kDrainHelp =
    R"(Usage:
  retryctl drain [--wait] [--drain-timeout DURATION]

Starts a drain, as 'ordering in-order --drain' does without waiting: input
pauses, the retry threads (a temporary one if none runs) empty the retry
backlog, they stop, and retryd switches to in-order mode. It runs on in
retryd as an operation; prints the operation's id (see 'retryctl operation').
Cancelled, failed or past its timeout, it leaves retryd as it was: input
resumed, the retry threads running, in-order mode off.
FAILED_PRECONDITION (DRAIN_RUNNING) if a switch of the ordering mode is
under way already.

  --wait              follow the drain until it ends, a line whenever its
                      progress changes (--json: the operation as one line of
                      JSON each time); exit 0 if it SUCCEEDED, else 64 + the
                      code of its error (CANCELLED 65, DEADLINE_EXCEEDED 68).
                      Ctrl-C stops following (exit 130); the drain goes on.
  --drain-timeout D   how long the drain may take, 1ms to 24h (seconds, or a
                      duration such as 10m); past it the drain FAILED with
                      DEADLINE_EXCEEDED. Default: until done or cancelled.
                      (--timeout stays the deadline of each call.)

Examples:
  retryctl drain
  retryctl drain --wait --drain-timeout 10m
  retryctl --json drain | jq -r .id
)";

constexpr std::string_view kOperationHelp =
    R"(Usage:
  retryctl operations
  retryctl operation ID
  retryctl operation watch ID
  retryctl operation cancel ID
  retryctl op ls | get ID | watch ID | cancel ID

Work that takes long (a drain, a redrive) runs in retryd as an operation:
an id, a kind, a state (RUNNING, then SUCCEEDED, FAILED or CANCELLED), a
progress line (a redrive's: scanned, matched, redriven, skipped, sent
twice after a resume, rate, ETA), and when it ended, its result or its error (a redrive's dry run: its
counts per partition and per reason). retryd keeps the running ones and the
last 100 that ended, for an hour; an id is valid only on the retryd that
made it.

operations        A table of them, newest first: ID, KIND, STATE, AGE,
                  ENDED, PROGRESS.
operation ID      One, a field a line. NOT_FOUND (OPERATION_NOT_FOUND) for an
                  unknown id.
operation watch ID
                  Follow it until it ends, as 'drain --wait' does: exit 0 if
                  it SUCCEEDED, else 64 + the code of its error; Ctrl-C
                  stops following (exit 130).
operation cancel ID
                  Ask it to stop and print it; a drain ends at once, retryd
                  as it was; a redrive once its producer has flushed. One
                  that has ended is printed as it is.
op ...            The same: 'op ls' is 'operations', 'op get ID' is
                  'operation ID'.

With --json: the Operation (operations: ListOperationsResponse; watch: one
line per update).

Examples:
  retryctl operations
  retryctl operation watch 0b6f6f1e-4ad4-4c31-9d55-5b1e1f2f7a10
  retryctl operation cancel 0b6f6f1e-4ad4-4c31-9d55-5b1e1f2f7a10
)";

constexpr std::string_view kVersionHelp =
    R"(Usage:
  retryctl version

Prints retryctl's release, then the release of the retryd it reaches
(GetStatus), and that retryd's address. retryctl's line is printed even when
retryd cannot be reached; the exit status then says why (64 + the gRPC code).

With --json: {"client": "...", "server": "..."} on one line.

Examples:
  retryctl version
  retryctl --addr 10.0.0.5:50051 --json version
)";

constexpr std::string_view kHealthHelp =
    R"(Usage:
  retryctl health [SERVICE]

Asks retryd's grpc.health.v1.Health service (Check) and prints the answer:
SERVING, NOT_SERVING, SERVICE_UNKNOWN or UNKNOWN. Without SERVICE it asks
for retryd as a whole (""); retryd.downstream is the downstream processor's
state (see docs/metrics.md, "Probes", for every service name). An unknown SERVICE is
NOT_FOUND (exit status 69).

Exit status: 0 if SERVING, 1 if the answer is anything else, 64 + the gRPC
code if the call failed.

With --json: {"status": "SERVING"}.

Examples:
  retryctl health
  retryctl health retryd.downstream
)";

constexpr std::string_view kDlqRecordHelp =
    R"(Usage:
  retryctl dlq record TOPIC PARTITION OFFSET
  retryctl dlq-record TOPIC PARTITION OFFSET

Moves one held record (see 'retryctl inflight') to the dead-letter topic now,
whatever its attempts: TOPIC, PARTITION and OFFSET are its original input
coordinates. Its retryd-error header says an operator dead-lettered it, with
its last error. In in-order mode its partition then moves on: the records
that waited behind it proceed. Prints the thread that held it, once the
dead-letter topic has acknowledged the record.

NOT_FOUND if no thread holds it (done already, not read yet, or held by
another retryd). FAILED_PRECONDITION if it is in a processor call right now:
try again when the call has ended (if it fails, the record is held again).

Examples:
  retryctl dlq record orders 3 1042
  retryctl dlq-record orders 3 1042
)";

// The filter flags of dlq ls and dlq redrive, which their texts share.
constexpr char kDlqFilters[] =
    R"(Filters (each one given narrows the set; none: every dead letter):
  --key-prefix TEXT        the key starts with TEXT
  --error TEXT             the last or the first error contains TEXT
  --reason R               the error's reason: "<domain>/<reason>", or just
                           the part after the last '/' (ORDER_LOCKED)
  --topic T                from original topic T
  --original-partition P   from partition P of it
  --since TIME             first failed at or after TIME: Unix ms, or RFC 3339
                           with a zone (2026-12-01T08:00:00Z)
  --until TIME             first failed before TIME
  --min-attempts N         made at least N attempts
  --max-attempts N         made at most N attempts
  --partition P            read only partition P of the dead-letter topic
                           (repeat it, or list them: 0,2)
)";

constexpr char kDlqHelpHead[] =
    R"(Usage:
  retryctl dlq ls [FILTERS] [--limit N | --all-pages] [--page-size N]
                  [--max-value-bytes N]
  retryctl dlq record TOPIC PARTITION OFFSET
  retryctl dlq redrive [FILTERS] [--to TOPIC] [--rate N] [--reset-attempts]
                       [--dry-run] [--max-redrives N] [--wait]
  retryctl dlq purge (--all | --up-to P=OFFSET...) [--delete-records]

The dead-letter tools. They read and write the dead-letter topic with Kafka
clients of their own, never joining retryd's consumer groups.

dlq ls        The dead letters that match FILTERS, retryd's headers decoded.
dlq record    Dead-letter one record a thread holds now ('dlq-record').
dlq redrive   Produce the dead letters that match FILTERS again, to their
              original topic or another: an operation, one at a time per
              dead-letter topic across the cluster.
dlq purge     Hide the dead letters below an offset of each partition from
              ls and redrive (and delete them with --delete-records).

'retryctl dlq SUBCOMMAND --help' says more.

)";
constexpr char kDlqHelpTail[] = R"(
Examples:
  retryctl dlq ls --topic orders --min-attempts 5
  retryctl dlq redrive --reason ORDER_LOCKED --dry-run --wait
  retryctl dlq purge --up-to 0=1200 1=800
)";

constexpr char kDlqListHelpHead[] =
    R"(Usage:
  retryctl dlq ls [FILTERS] [--limit N | --all-pages] [--page-size N]
                  [--max-value-bytes N]

Lists the dead letters that match FILTERS, partition by partition, in offset
order, reading page after page until N are shown or the list ends. Each row:
  PARTITION@OFFSET  where it is in the dead-letter topic
  KEY               its key: text as it is, other bytes as hex (0x...),
                    <null> for none
  ATTEMPTS          the attempts it made
  DEAD-LETTERED     how long ago it was dead-lettered
  REASON            its error's reason ("<domain>/<reason>"), if it had one
  ORIGIN            where it was read: TOPIC/PARTITION@OFFSET
  ERROR             its last error, cut to the terminal's width
A line under the table says how many were shown, how many records were
scanned, and whether more may remain. Dead letters another tool wrote
(Spring Kafka, Kafka Streams, KIP-1191 headers) are read by those headers:
ATTEMPTS is "-" where the tool does not say. Records read by no one's
headers (missing or malformed) show why in ERROR.

  --limit N            show at most N, 1..1000000 (default 100)
  --all-pages          show all of them (not with --limit)
  --page-size N        records a call, 1..1000 (default: as many as are
                       still wanted); a page may be short
  --max-value-bytes N  how much of each value --json shows, 0..1048576
                       (default 1024); value_size has the whole size

With --json: one DeadLetter JSON object per line on stdout, nothing else;
the count line goes to stderr.

)";
constexpr char kDlqListHelpTail[] = R"(
Examples:
  retryctl dlq ls
  retryctl dlq ls --reason ORDER_LOCKED --since 2026-12-01T08:00:00Z
  retryctl dlq ls --topic orders --original-partition 3 --limit 20
  retryctl --json dlq ls --all-pages | jq -r .error | sort | uniq -c
)";

constexpr char kDlqRedriveHelpHead[] =
    R"(Usage:
  retryctl dlq redrive [FILTERS] [--to TOPIC] [--rate N] [--reset-attempts]
                       [--dry-run] [--max-redrives N] [--wait]

Starts a redrive: the dead letters that match FILTERS, below each
partition's end now, are produced again. It runs in retryd as an operation
(kind redrive; see 'retryctl operation'); prints its id. Its position is
committed as it goes, so a retryd that restarts resumes it. One redrive per
dead-letter topic at a time, across every retryd of the cluster:
FAILED_PRECONDITION (REDRIVE_RUNNING) while another runs;
FAILED_PRECONDITION (ADMIN_API_UNAVAILABLE) where the cluster does not
answer the Admin API.

  --to TOPIC         produce to TOPIC (partitioned by key). Default: each
                     record's original topic, which retryd consumes again
  --rate N           at most N records a second, 1..100000 (default 100)
  --reset-attempts   to the original topic: start over with all attempts
                     (default: one more failure dead-letters it again); to
                     another topic: strip retryd's retry headers
  --dry-run          count what would be redriven, per partition and per
                     reason, and write nothing
  --max-redrives N   skip (and count) a record redriven N times already,
                     1..1000000 (default 3): nothing loops forever
  --wait             follow it until it ends, a line whenever its progress
                     changes (scanned, matched, redriven, skipped, sent
                     twice after a resume, rate, ETA); a dry run's counts as tables at the end. Exit 0
                     if it SUCCEEDED, else 64 + the code of its error
                     (CANCELLED 65). Ctrl-C stops following (exit 130); the
                     redrive goes on

With --request-id, a redrive retried with the same id is started once.

)";
constexpr char kDlqRedriveHelpTail[] = R"(
Examples:
  retryctl dlq redrive --reason ORDER_LOCKED --dry-run --wait
  retryctl dlq redrive --reason ORDER_LOCKED --rate 50 --wait
  retryctl dlq redrive --topic orders --to orders.replay --reset-attempts
)";

constexpr std::string_view kDlqPurgeHelp =
    R"(Usage:
  retryctl dlq purge --all [--delete-records]
  retryctl dlq purge --up-to P=OFFSET [P=OFFSET...] [--delete-records]

Hides the dead letters below an offset of each partition named from
'dlq ls' and 'dlq redrive'. Kafka cannot delete one record: a purge is
always a prefix of each partition, and a mark only moves forward. Prints,
for each partition, the mark before (FROM) and now (TO), and whether the
records were deleted.

  --all              every partition, up to its end now
  --up-to P=OFFSET   partition P up to OFFSET, the first offset to keep;
                     repeat it or list them: --up-to 0=1200 1=800, 0=1200,1=800
  --delete-records   delete the records for real too (the Admin API's
                     DeleteRecords); FAILED_PRECONDITION
                     (ADMIN_API_UNAVAILABLE) where the cluster does not allow
                     it, nothing moved

Give --all or --up-to, not both. With --request-id, a purge retried with the
same id is applied once.

Examples:
  retryctl dlq purge --up-to 0=1200 1=800
  retryctl dlq purge --all --delete-records
)";

// The texts above that share kDlqFilters, joined when compiled.
constexpr auto kDlqHelp = Join(kDlqHelpHead, kDlqFilters, kDlqHelpTail);
constexpr auto kDlqListHelp = Join(kDlqListHelpHead, kDlqFilters, kDlqListHelpTail);
constexpr auto kDlqRedriveHelp = Join(kDlqRedriveHelpHead, kDlqFilters, kDlqRedriveHelpTail);

}  // namespace

std::string_view HelpText(std::string_view topic) {
  if (topic.empty()) return kOverviewHelp;
  if (topic == "status") return kStatusHelp;
  if (topic == "threads") return kThreadsHelp;
  if (topic == "inorder") return kInOrderHelp;
  if (topic == "ordering") return kOrderingHelp;
  if (topic == "watch") return kWatchHelp;
  if (topic == "inflight") return kInFlightHelp;
  if (topic == "dlq-record" || topic == "dlq record") return kDlqRecordHelp;
  if (topic == "dlq") return View(kDlqHelp);
  if (topic == "dlq ls") return View(kDlqListHelp);
  if (topic == "dlq redrive") return View(kDlqRedriveHelp);
  if (topic == "dlq purge") return kDlqPurgeHelp;
  if (topic == "version") return kVersionHelp;
  if (topic == "health") return kHealthHelp;
  if (topic == "drain") return kDrainHelp;
  if (topic == "operations" || topic == "operation" || topic == "op") return kOperationHelp;
  return {};
}

}  // namespace retryd::retryctl
