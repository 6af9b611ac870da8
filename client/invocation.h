// What retryctl's command line says, as plain values: the Invocation the
// parsers build (retryctl_args.h, and the dlq parsers behind
// command_args.h), or the UsageError they report. No functions, so that the
// parsers' shared pieces (command_args.h) and the entry point
// (retryctl_args.h) both build on it without including each other.
#ifndef RETRYD_CLIENT_INVOCATION_H_
#define RETRYD_CLIENT_INVOCATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace retryd::retryctl {

// Environment variables retryctl reads; empty means unset.
struct Environment {
  std::string retryd_addr;        // RETRYD_ADDR: default for --addr.
  std::string retryd_token_file;  // RETRYD_TOKEN_FILE: default for --token-file.
};

// Flags accepted before or after the command.
struct GlobalFlags {
  std::string address = "127.0.0.1:50051";
  std::string token_file;  // Empty: no token.
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  absl::Duration timeout = absl::Seconds(30);
  bool json = false;
  // --request-id: sent with the mutating call so that a retry of it with the
  // same id is not applied twice. A UUID, or "auto", which RunRetryctl
  // replaces with a new random one; empty: none is sent.
  std::string request_id;
};

enum class Command {
  kHelp,  // Print help_topic's text.
  kStatus,
  kThreadsStart,  // count
  kThreadsStop,   // count, or thread_ids; graceful
  kThreadsSet,    // count (the target, may be 0); graceful
  kInOrder,       // in_order, drain
  kOrdering,      // ordering, drain
  kWatch,         // interval_ms, thread_ids, max_snapshots
  kInFlight,      // limit
  kDlqRecord,     // record_topic, record_partition, record_offset
  kVersion,
  kHealth,           // health_service
  kDrain,            // wait, drain_timeout_ms
  kOperations,       // List them.
  kOperationGet,     // operation_id
  kOperationWatch,   // operation_id
  kOperationCancel,  // operation_id
  kDlqList,          // dlq: filter, limit, all_pages, page_size, max_value_bytes
  kDlqRedrive,       // dlq: filter and the redrive's fields; wait
  // Keep kDlqPurge last: CommandTableTest counts up to it.
  kDlqPurge,  // dlq: purge_all or purge_up_to, delete_records
};

// The modes of `retryctl ordering` (retryd.v1.Ordering).
enum class OrderingMode { kUnordered, kInOrder, kKey };

// Which dead letters `dlq ls` and `dlq redrive` act on
// (retryd.v1.DeadLetterFilter): each field set narrows the set.
struct DeadLetterFilterArgs {
  std::string key_prefix;                     // --key-prefix
  std::string error_contains;                 // --error
  std::string reason;                         // --reason
  std::string original_topic;                 // --topic
  std::optional<int32_t> original_partition;  // --original-partition
  // --since / --until: the first failure in [since, until), Unix ms; 0: no bound.
  int64_t since_unix_ms = 0;
  int64_t until_unix_ms = 0;
  int32_t min_attempts = 0;         // --min-attempts; 0: no bound.
  int32_t max_attempts = 0;         // --max-attempts; 0: no bound.
  std::vector<int32_t> partitions;  // --partition: of the dead-letter topic; empty: all.
};

// The arguments of the `dlq` subcommands besides the filter.
struct DlqArgs {
  DeadLetterFilterArgs filter;

  // dlq ls: show at most `limit` records (0 with --all-pages: all of them),
  // asking for pages of `page_size` (0: as many as are still wanted, up to
  // the server's maximum).
  int64_t limit = 100;
  bool all_pages = false;
  uint32_t page_size = 0;
  uint32_t max_value_bytes = 0;  // 0: the server's default.

  // dlq redrive (StartRedriveRequest; 0 and empty: the server's defaults).
  std::string target_topic;
  uint32_t rate_per_s = 0;
  bool reset_attempts = false;
  bool dry_run = false;
  uint32_t max_redrives = 0;

  // dlq purge: `all`, or the first offset to keep per partition.
  bool purge_all = false;
  std::vector<std::pair<int32_t, int64_t>> purge_up_to;
  bool delete_records = false;
};

struct Invocation {
  Command command = Command::kHelp;
  // kHelp: "" for the overview, else a command: status, threads, inorder,
  // ordering, watch, inflight, dlq-record, version, health, drain,
  // operations, operation, op, dlq, or a dlq subcommand ("dlq ls").
  std::string help_topic;
  GlobalFlags flags;

  int32_t count = 0;
  std::vector<uint32_t> thread_ids;
  bool graceful = true;
  std::string tier;  // threads start/stop/set --tier: a retry tier's topic; "": the first.
  bool in_order = false;
  OrderingMode ordering = OrderingMode::kUnordered;
  bool drain = false;
  uint32_t interval_ms = 1000;
  int64_t max_snapshots = 0;  // 0: until interrupted.
  uint32_t limit = 0;         // 0: the server's default.
  std::string record_topic;
  int32_t record_partition = 0;
  int64_t record_offset = 0;
  std::string health_service;     // "": the server as a whole.
  bool wait = false;              // drain --wait, dlq redrive --wait: follow it until it ends.
  uint32_t drain_timeout_ms = 0;  // 0: the drain may take as long as it takes.
  std::string operation_id;
  DlqArgs dlq;
};

struct UsageError {
  std::string message;  // What is wrong, without a "retryctl: " prefix.
  std::string topic;    // The help topic to point at ("" for the overview).
};

}  // namespace retryd::retryctl

#endif  // RETRYD_CLIENT_INVOCATION_H_
