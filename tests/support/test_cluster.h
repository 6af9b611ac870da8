// Shared helpers for tests and benches that run against a real Kafka-protocol
// broker: librdkafka's mock cluster on loopback, one per test binary, or a
// real Apache Kafka cluster.
//
// Which one: RETRYD_TEST_BROKER=kafka runs the binary on a real cluster,
// RETRYD_TEST_KAFKA=host:port[,...] if set, else the one whose bootstrap the
// `kafka` label's ctest fixture wrote (RETRYD_TEST_KAFKA_FILE names that
// file; the build's own fixture file by default). RETRYD_TEST_KAFKA_PROPERTIES
// =FILE adds client properties (key=value lines, '#' comments), e.g. for
// SASL or SSL. Otherwise (unset, or "mock") it is the mock cluster, started on
// first use. ctest runs the binaries of the `kafka` label so
// (tests/kafka/CMakeLists.txt); docs/test-table.md says which.
//
// On a real cluster every topic made here is named uniquely for the process
// (a cluster may be shared by runs) and deleted, with the groups of
// TestEngineOptions, when the process exits.
#ifndef RETRYD_TESTS_SUPPORT_TEST_CLUSTER_H_
#define RETRYD_TESTS_SUPPORT_TEST_CLUSTER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "server/engine/api/engine.h"
#include "server/engine/api/options.h"
#include "server/kafka/embedded_broker.h"
#include "server/model/record.h"

namespace retryd::testing {

// True when this process runs on a real Kafka cluster (RETRYD_TEST_BROKER=kafka).
bool OnRealKafka();

// The bootstrap servers of the broker this process runs on.
const std::string& BootstrapServers();

// Client properties every client of the tests needs on that broker (SASL,
// SSL); empty on the mock cluster.
const std::map<std::string, std::string>& ClientProperties();

// The binary's mock cluster (3 brokers), started on first use. Only for
// tests that inject faults into it, which run only there: called on a real
// cluster, it fails the test and aborts.
kafka::EmbeddedBroker& Broker();

struct TestTopics {
  std::string input, retry, dlq, output;
};

// Creates four fresh topics named after `name` (unique per call), each with
// `partitions` partitions, replication factor 3 (at most the brokers a real
// cluster has).
TestTopics CreateTopics(const std::string& name, int partitions = 3);

// Options for an engine on the test broker over `topics`, in a fresh group;
// fast backoff and commits so tests finish quickly.
engine::EngineOptions TestEngineOptions(const TestTopics& topics);

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
bool AllAssigned(const engine::Engine& engine, size_t partitions);

}  // namespace retryd::testing

#endif  // RETRYD_TESTS_SUPPORT_TEST_CLUSTER_H_
