// The peers bench's verdict on one side's run, from outside: given every
// record of the side's input topic and every record of its output and
// dead-letter topics, whether each input record reached exactly the outcome
// its key calls for (bench/judge/workload.h), in which order per key, how
// often, and when.
//
// Records are matched by key and value, never by a side's own headers (each
// side writes different ones). Output and dead-letter topics are expected to
// stamp records with the broker's clock (message.timestamp.type
// LogAppendTime), input records with their producer's (CreateTime), so that
// output timestamp - input timestamp is a record's end-to-end latency.
//
// Per-key order is judged on first occurrences: a key is out of order when
// one of its records first appears before a record of the key that came
// earlier in the input. A first occurrence's place is (timestamp, topic,
// partition, offset), which is offset order within a partition, since a
// LogAppendTime partition's timestamps never go back.
//
// Not thread-safe: one thread feeds and asks.
#ifndef RETRYD_BENCH_JUDGE_JUDGE_H_
#define RETRYD_BENCH_JUDGE_JUDGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "bench/judge/workload.h"

namespace retryd::bench::peers {

enum class Outcome : uint8_t { kOutput, kDeadLetter };

// Where a record sits in its topic.
struct Place {
  int32_t partition = 0;
  int64_t offset = 0;
  int64_t timestamp_ms = 0;
};

struct Verdict {
  int64_t records = 0;  // input records
  // Input records that reached neither topic.
  int64_t lost = 0;
  // Input records seen in the topic they should not be in (perhaps in the
  // right one as well).
  int64_t wrong_outcome = 0;
  // Occurrences beyond a record's first, over both topics.
  int64_t duplicates = 0;
  // Output or dead-letter records that match no input record by key and
  // value.
  int64_t strays = 0;
  int64_t keys = 0;
  int64_t keys_out_of_order = 0;

  // The measured backlog: its records, those of healthy keys, and when the
  // first and the last of them (the last healthy one) first came out,
  // broker time.
  int64_t measured = 0;
  int64_t measured_healthy = 0;
  int64_t first_ms = -1;
  int64_t last_ms = -1;
  int64_t last_healthy_ms = -1;
  // Warm-up and measured records whose first occurrence falls within
  // [first_ms, last_ms] ([first_ms, last_healthy_ms] for healthy ones): what
  // the side did in that window. Warm-up records come first in every
  // partition, but a side may reach a partition late, so some of them may
  // come out within the window; they count, as the CPU they cost does.
  int64_t done_in_window = 0;
  int64_t healthy_done_in_window = 0;

  // Paced records of healthy keys: first occurrence's timestamp - input
  // timestamp, in milliseconds, in input order.
  std::vector<double> paced_latency_ms;

  // Every record where it belongs, and nothing else there. Duplicates and
  // order are reported, not judged: every side delivers at least once.
  bool ok() const { return lost == 0 && wrong_outcome == 0 && strays == 0; }
};

class Judge {
 public:
  // One input record; a partition's records in offset order. False, and
  // nothing kept, if the key or value is of no kind or phase
  // (workload.h), or the value was given before.
  bool AddInput(absl::string_view key, absl::string_view value, const Place& place);

  // One record of the output or dead-letter topic; a partition's records in
  // offset order.
  void AddOutcome(Outcome where, absl::string_view key, absl::string_view value,
                  const Place& place);

  // Input records not seen in either topic yet.
  int64_t missing() const { return missing_; }

  Verdict Finish() const;

 private:
  struct Input {
    uint32_t key_index = 0;
    Phase phase = Phase::kMeasured;
    Kind kind = Kind::kHealthy;
    Place place;
    // The first occurrence, in either topic; valid when seen > 0.
    Outcome first_where = Outcome::kOutput;
    Place first;
    uint32_t seen = 0;
    bool seen_wrong = false;
  };

  std::vector<Input> inputs_;
  absl::flat_hash_map<std::string, uint32_t> by_value_;
  absl::flat_hash_map<std::string, uint32_t> key_index_;
  std::vector<std::string> key_names_;
  int64_t strays_ = 0;
  int64_t missing_ = 0;
};

}  // namespace retryd::bench::peers

#endif  // RETRYD_BENCH_JUDGE_JUDGE_H_
