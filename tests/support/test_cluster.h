// Shared helpers for tests that run against a real Kafka-protocol broker:
// librdkafka's mock cluster on loopback, one per test binary.
#ifndef RETRYD_TESTS_SUPPORT_TEST_CLUSTER_H_
#define RETRYD_TESTS_SUPPORT_TEST_CLUSTER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "server/engine/engine.h"
#include "server/engine/options.h"
#include "server/kafka/embedded_broker.h"
#include "server/model/record.h"

namespace retryd::testing {

// The binary's broker (3 brokers), started on first use.
kafka::EmbeddedBroker& Broker();

struct TestTopics {
  std::string input, retry, dlq, output;
};

// Creates four fresh topics named after `name` (unique per call), each with
// `partitions` partitions, replication factor 3.
TestTopics CreateTopics(const std::string& name, int partitions = 3);

// Options for an engine on Broker() over `topics`, in a fresh group; fast
// backoff and commits so tests finish quickly.
EngineOptions TestEngineOptions(const TestTopics& topics);

// Produces one record per key (value "v-<key>"), waits for every ack.
void ProduceKeys(const std::string& topic, const std::vector<std::string>& keys);

// Writes `records` as they are (their topics and partitions), in order, and
// waits until all are delivered; a test failure if any is not.
void ProduceRecords(const std::vector<OutgoingRecord>& records);

// Every record of `topic` as it stands now.
std::vector<Record> ReadAll(const std::string& topic);

// Value of the last header named `name`, or "" if absent or null.
std::string HeaderValue(const Record& record, const std::string& name);

// True once every thread of `engine` has partitions and, per role, all
// `partitions` are assigned: the groups are stable, so no rebalance will
// interrupt what the test does next.
bool AllAssigned(const Engine& engine, size_t partitions);

}  // namespace retryd::testing

#endif  // RETRYD_TESTS_SUPPORT_TEST_CLUSTER_H_
