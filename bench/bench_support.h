// What every program in bench/ shares: flags, clients of the bench's broker,
// topics spread over enough partitions for the embedded broker's retention,
// retry records as retryd writes them, a check that the broker dropped
// nothing, what this process uses (RSS, CPU), scenarios run in child
// processes, and a result table printed and written as CSV.
//
// The broker is tests/support/test_cluster.h's: the embedded one (librdkafka's
// mock cluster, in process) unless RETRYD_TEST_BROKER=kafka names a real
// cluster (scripts/bench.sh --kafka). Every client a bench makes goes through
// testing::BootstrapServers() and testing::ClientProperties().
//
// The embedded broker keeps at most ~100,000 batches or 5 MiB per partition
// and silently drops the oldest; a bench that lost records to that would
// measure nothing. Records are spread over kPartitions partitions, and
// CheckNothingDropped() says so if any were lost. A real broker keeps them
// (retention by time, a week by default); the check still counts them.
#ifndef RETRYD_BENCH_BENCH_SUPPORT_H_
#define RETRYD_BENCH_BENCH_SUPPORT_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/kafka/handle.h"
#include "server/kafka/properties.h"
#include "server/model/record.h"
#include "tests/support/test_cluster.h"

namespace retryd::bench {

// Partitions per bench topic, unless a bench says otherwise.
inline constexpr int kPartitions = 16;

// --name=value flags. Every flag a bench reads must be known: Finish()
// reports any it was given but never read, so a typo is not silently
// ignored. --help prints what was read, with defaults, and exits.
class Flags {
 public:
  Flags(int argc, char** argv, std::string usage);

  int64_t Int(const std::string& name, int64_t default_value, const std::string& help);
  double Double(const std::string& name, double default_value, const std::string& help);
  std::string String(const std::string& name, const std::string& default_value,
                     const std::string& help);
  // A comma-separated list of integers, e.g. --threads=1,2,4.
  std::vector<int64_t> Ints(const std::string& name, const std::vector<int64_t>& default_value,
                            const std::string& help);

  // Exits with usage (status 2) on an unknown flag or a malformed value;
  // with status 0 after printing the flags on --help.
  void Finish();

 private:
  std::string Take(const std::string& name, const std::string& default_text,
                   const std::string& help);
  void Fail(const std::string& message);

  std::string program_;
  std::string usage_;
  std::map<std::string, std::string> given_;
  std::vector<std::string> known_;  // "--name=default  help", in reading order.
  bool help_ = false;
  bool bad_ = false;
};

// A librdkafka configuration for the bench's broker: its bootstrap servers
// and client properties, then `properties`. Null, after saying why, if
// librdkafka refused a setting.
kafka::ConfPtr ClientConf(const kafka::Properties& properties = {});

// The same for the broker at `bootstrap_servers`, with `properties` alone:
// for a program given its broker on the command line.
kafka::ConfPtr ClientConfAt(const std::string& bootstrap_servers,
                            const kafka::Properties& properties);

// A librdkafka client of `type` made from `conf` (ClientConf()'s by
// default). Null, after saying why, if it could not be made or `conf` is
// null.
kafka::HandlePtr NewClient(rd_kafka_type_t type, kafka::ConfPtr conf = ClientConf());

// Fresh input, retry, dead-letter and output topics, `partitions` each.
testing::TestTopics Topics(const std::string& name, int partitions = kPartitions);

// Produces `count` records, record i as make(i), and waits until every one
// is acknowledged. Returns false (after saying why) if any was not.
bool ProduceEach(int64_t count, const std::function<OutgoingRecord(int64_t)>& make);

// Produces `count` records to `topic`, record i to partition i % partitions
// with key key(i) and a value of `value_bytes` bytes, and waits until every
// one is acknowledged. Returns false (after saying why) if any was not.
bool Produce(const std::string& topic, int64_t count, int partitions,
             const std::function<std::string(int64_t)>& key, int value_bytes = 100);

// Record i of a retry backlog in `topics.retry`, as retryd itself writes one
// (the original record plus its retry headers, retry_headers.h): key
// "key-<i>" and a value of `value_bytes` bytes, from input partition
// i % partitions at offset i / partitions, first failed at `failed_ms` (also
// its timestamp), due at `due_ms` for its second attempt; in retry partition
// i % partitions.
OutgoingRecord RetryRecord(const testing::TestTopics& topics, int64_t i, int partitions,
                           int64_t failed_ms, int64_t due_ms, int value_bytes = 100);

// A partition's first offset and the one after its last record.
struct Watermark {
  int64_t low = -1;
  int64_t high = -1;
};

// The watermarks of `topic`'s `partitions` partitions, by partition; empty
// (after saying why) if the broker did not answer.
std::vector<Watermark> QueryWatermarks(const std::string& topic, int partitions);

// True if `topic` holds exactly `expected` records (with `at_least`, that
// many or more) from offset 0 of each of its `partitions` partitions: none
// dropped by retention, none missing. Prints what is wrong otherwise.
bool CheckNothingDropped(const std::string& topic, int64_t expected, int partitions,
                         bool at_least = false);

// A field of /proc/self/status ("VmRSS", "VmHWM") in bytes; -1 if missing.
int64_t ProcStatusBytes(const std::string& field);

// CPU time this process has used so far, user + system, of all its threads,
// those that have ended included (getrusage).
absl::Duration ProcessCpu();

// Where the process's CPU goes, by thread name: the engine's threads and its
// Kafka clients' (kEngineCpu), the embedded broker's (kBrokerCpu; a real
// broker runs in a process of its own, so there it reads 0), and everything
// else (kOtherCpu: a control server's gRPC threads, the bench's own).
enum CpuPart { kEngineCpu, kBrokerCpu, kOtherCpu, kCpuParts };
using CpuMicros = std::array<int64_t, kCpuParts>;

// CPU used so far by the threads alive now, per part, in microseconds of
// user + system time: from /proc/self/task/<tid>/schedstat (nanoseconds), or
// where the kernel keeps none, from .../stat (clock ticks, 10 ms). The
// difference of two readings is what was used in between by the threads
// that lived through both.
CpuMicros ReadThreadCpu();

// Scenarios measured in child processes, so that each one's RSS and CPU are
// its own: the parent runs this program again with the scenario's flags
// (RunChild); the child measures and reports (ReportToParent).

// In a child: reports `values` to the parent, as one line "RESULT k=v ..."
// on stdout.
void ReportToParent(const std::map<std::string, int64_t>& values);

// In the parent: runs this program again with `args`, waits for it to end
// and returns the values it reported; empty if it failed (it says why on its
// stderr, which is this process's) or reported nothing.
std::map<std::string, int64_t> RunChild(const std::string& args);

// Rows of named columns: Print() writes them aligned to stdout, WriteCsv()
// to `<dir>/<name>.csv`.
class Table {
 public:
  Table(std::string name, std::vector<std::string> columns);

  void AddRow(std::vector<std::string> cells);
  void Print() const;
  // Returns false (after saying why) if the file could not be written.
  bool WriteCsv(const std::string& dir) const;

 private:
  std::string name_;
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// Number formatting for table cells.
std::string Fixed(double value, int decimals);

// The p-th percentile (0..100) of `values`, nearest rank; 0 if empty.
double Percentile(std::vector<double> values, double p);

}  // namespace retryd::bench

#endif  // RETRYD_BENCH_BENCH_SUPPORT_H_
