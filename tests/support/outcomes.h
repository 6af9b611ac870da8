// Helpers for engine tests that judge outcomes as a user sees them: which
// keys reached the output and dead-letter topics, how often, and what the
// groups committed.
#ifndef RETRYD_TESTS_SUPPORT_OUTCOMES_H_
#define RETRYD_TESTS_SUPPORT_OUTCOMES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/engine/api/engine.h"
#include "server/engine/api/processor.h"
#include "server/engine/handoff/retry_headers.h"
#include "server/model/record.h"
#include "tests/support/test_cluster.h"

namespace retryd::testing {

// The simulator with fixed rules: perm- fails permanently, flaky- fails
// twice then succeeds, doomed- always fails retriably, everything else
// succeeds; each call takes `latency_ms`.
std::unique_ptr<engine::Processor> TestProcessor(uint32_t latency_ms = 0);

// Creates and starts an engine over `options` running `processor` (the
// TestProcessor when null); null, with a test failure, if either fails.
std::unique_ptr<engine::Engine> StartEngine(const engine::EngineOptions& options,
                                            std::unique_ptr<engine::Processor> processor = nullptr);

// `n` keys: every 13th perm-, every 7th flaky-, the rest ok-.
std::vector<std::string> MixedKeys(int n);

// The keys of `records` ("<null>" for a null key), with repeats.
std::multiset<std::string> Keys(const std::vector<Record>& records);

// Keys among `keys` that are in neither the output nor the DLQ topic.
// Output records that came after a record of the same input partition with
// a higher input offset, within one output partition (read from their
// retryd-original-* headers): 0 when each input partition's records were
// completed in offset order.
int OutOfOrder(const std::vector<Record>& output);

// Key order as a separate reader of the output topic judges it: the keys
// whose records (the first copy of each, by its retryd-original-* headers;
// later copies are at-least-once repeats) are not in input-offset order.
std::vector<std::string> KeysOutOfOrder(const std::vector<Record>& output);

// The input records (partition, offset) of `input` with no copy in
// `output` nor in `dlq` (by their retryd-original-* headers): what was lost.
int64_t LostRecords(const std::vector<Record>& input, const std::vector<Record>& output,
                    const std::vector<Record>& dlq);

std::vector<std::string> MissingKeys(const TestTopics& topics,
                                     const std::vector<std::string>& keys);

// Waits (up to `timeout`) until every key has an outcome and nothing is in
// flight. Counts distinct keys, not records: after a rebalance or a fault
// some records are processed twice, and a count of records would let a test
// stop the engine before the last keys were done. On timeout, says which
// keys are missing and where they sit.
::testing::AssertionResult WaitForOutcomes(const engine::Engine& engine, const TestTopics& topics,
                                           const std::vector<std::string>& keys,
                                           absl::Duration timeout = absl::Seconds(120));

// Every perm- key is in the DLQ and every other key in the output, and
// nowhere else. Duplicates are allowed (rebalances and faults redo work);
// their number is printed under `label`.
void ExpectEachKeyWhereItBelongs(const TestTopics& topics, const std::vector<std::string>& keys,
                                 const std::string& label);

// Every key of `keys` is in the output topic once at least, on its first
// attempt (retryd-attempt 1), and nothing is in the retry or dead-letter
// topic: what an outage that used up no attempt leaves.
void ExpectAllDoneOnTheFirstAttempt(const TestTopics& topics, const std::vector<std::string>& keys);

// Writes one record to `topic`/`partition` as a retry record carrying `meta`
// in its retryd-* headers (key `key`, value "v-<key>"), as retryd itself or
// a replay tool would.
void ProduceRetryRecord(const std::string& topic, int32_t partition, const std::string& key,
                        const engine::RetryMetadata& meta);

// The offsets `group_id` has committed on `topic`, by partition (-1: none),
// read the way a monitoring tool reads them, without joining the group.
std::map<int32_t, int64_t> CommittedOffsets(const std::string& group_id, const std::string& topic);

}  // namespace retryd::testing

#endif  // RETRYD_TESTS_SUPPORT_OUTCOMES_H_
