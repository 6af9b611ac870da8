#include "bench/bench_support.h"

#include <librdkafka/rdkafka.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "server/engine/handoff/retry_headers.h"
#include "server/kafka/producer.h"
#include "tests/support/wait_for.h"

namespace retryd::bench {

Flags::Flags(int argc, char** argv, std::string usage)
    : program_(argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "bench"),
      usage_(std::move(usage)) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      continue;
    }
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos || eq == 2) {
      Fail(absl::StrCat("expected --name=value, got '", arg, "'"));
      continue;
    }
    given_[arg.substr(2, eq - 2)] = arg.substr(eq + 1);
  }
}

std::string Flags::Take(const std::string& name, const std::string& default_text,
                        const std::string& help) {
  known_.push_back(absl::StrFormat("  --%s=%s\n      %s", name, default_text, help));
  auto it = given_.find(name);
  if (it == given_.end()) return default_text;
  std::string value = std::move(it->second);
  given_.erase(it);
  return value;
}

int64_t Flags::Int(const std::string& name, int64_t default_value, const std::string& help) {
  const std::string text = Take(name, absl::StrCat(default_value), help);
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    Fail(absl::StrCat("--", name, " needs an integer, got '", text, "'"));
    return default_value;
  }
  return value;
}

double Flags::Double(const std::string& name, double default_value, const std::string& help) {
  const std::string text = Take(name, absl::StrCat(default_value), help);
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) {
    Fail(absl::StrCat("--", name, " needs a number, got '", text, "'"));
    return default_value;
  }
  return value;
}

std::string Flags::String(const std::string& name, const std::string& default_value,
                          const std::string& help) {
  return Take(name, default_value, help);
}

std::vector<int64_t> Flags::Ints(const std::string& name, const std::vector<int64_t>& default_value,
                                 const std::string& help) {
  const std::string text = Take(name, absl::StrJoin(default_value, ","), help);
  std::vector<int64_t> values;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(part, &value)) {
      Fail(absl::StrCat("--", name, " needs integers separated by commas, got '", text, "'"));
      return default_value;
    }
    values.push_back(value);
  }
  return values;
}

void Flags::Fail(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", program_.c_str(), message.c_str());
  bad_ = true;
}

void Flags::Finish() {
  for (const auto& [name, value] : given_) Fail(absl::StrCat("unknown flag --", name));
  if (help_ || bad_) {
    std::FILE* out = help_ && !bad_ ? stdout : stderr;
    std::fprintf(out, "usage: %s [--flag=value ...]\n%s\n\nflags (with their defaults):\n",
                 program_.c_str(), usage_.c_str());
    for (const std::string& line : known_) std::fprintf(out, "%s\n", line.c_str());
    std::exit(bad_ ? 2 : 0);
  }
}

kafka::ConfPtr ClientConf(const kafka::Properties& properties) {
  kafka::Properties all = testing::ClientProperties();
  for (const auto& [key, value] : properties) all[key] = value;
  return ClientConfAt(testing::BootstrapServers(), all);
}

kafka::ConfPtr ClientConfAt(const std::string& bootstrap_servers,
                            const kafka::Properties& properties) {
  absl::StatusOr<kafka::ConfPtr> conf = kafka::MakeConf(bootstrap_servers, properties, {});
  if (!conf.ok()) {
    std::fprintf(stderr, "kafka client settings: %s\n", conf.status().ToString().c_str());
    return nullptr;
  }
  return *std::move(conf);
}

kafka::HandlePtr NewClient(rd_kafka_type_t type, kafka::ConfPtr conf) {
  if (conf == nullptr) return nullptr;
  absl::StatusOr<kafka::HandlePtr> client = kafka::NewHandle(type, std::move(conf));
  if (!client.ok()) {
    std::fprintf(stderr, "kafka client: %s\n", client.status().ToString().c_str());
    return nullptr;
  }
  return *std::move(client);
}

testing::TestTopics Topics(const std::string& name, int partitions) {
  return testing::CreateTopics(name, partitions);
}

bool ProduceEach(int64_t count, const std::function<OutgoingRecord(int64_t)>& make) {
  kafka::ProducerOptions options;
  options.bootstrap_servers = testing::BootstrapServers();
  options.properties = testing::ClientProperties();
  absl::StatusOr<std::unique_ptr<kafka::Producer>> producer = kafka::Producer::Create(options);
  if (!producer.ok()) {
    std::fprintf(stderr, "producer: %s\n", producer.status().ToString().c_str());
    return false;
  }
  std::atomic<int64_t> failed{0};
  auto count_failure = [&failed](absl::Status delivered) {
    if (!delivered.ok()) failed.fetch_add(1);
  };
  for (int64_t i = 0; i < count; ++i) {
    const OutgoingRecord record = make(i);
    absl::Status s = (*producer)->Produce(record, count_failure);
    // librdkafka's queue full: let it drain, then offer the record again.
    while (absl::IsResourceExhausted(s)) {
      (void)(*producer)->Flush(absl::Milliseconds(100));
      s = (*producer)->Produce(record, count_failure);
    }
    if (!s.ok()) {
      std::fprintf(stderr, "produce to %s: %s\n", record.topic.c_str(), s.ToString().c_str());
      (*producer)->Close(absl::Seconds(5));
      return false;
    }
  }
  const absl::Status flushed = (*producer)->Flush(absl::Seconds(120));
  (*producer)->Close(absl::Seconds(1));
  if (!flushed.ok() || failed.load() != 0) {
    std::fprintf(stderr, "produce: %lld of %lld not delivered (%s)\n",
                 static_cast<long long>(failed.load()), static_cast<long long>(count),
                 flushed.ToString().c_str());
    return false;
  }
  return true;
}

bool Produce(const std::string& topic, int64_t count, int partitions,
             const std::function<std::string(int64_t)>& key, int value_bytes) {
  const std::string value(static_cast<size_t>(std::max(0, value_bytes)), 'v');
  return ProduceEach(count, [&](int64_t i) {
    return OutgoingRecord{topic, static_cast<int32_t>(i % partitions), key(i), value, {}};
  });
}

OutgoingRecord RetryRecord(const testing::TestTopics& topics, int64_t i, int partitions,
                           int64_t failed_ms, int64_t due_ms, int value_bytes) {
  const auto partition = static_cast<int32_t>(i % partitions);
  engine::RetryMetadata meta;
  meta.attempt = 2;
  meta.due_ms = due_ms;
  meta.first_failure_ms = failed_ms;
  meta.original_topic = topics.input;
  meta.original_partition = partition;
  meta.original_offset = i / partitions;
  meta.original_timestamp_ms = failed_ms;
  meta.error = "failed at its first attempt";
  return {.topic = topics.retry,
          .partition = partition,
          .key = absl::StrCat("key-", i),
          .value = std::string(static_cast<size_t>(std::max(0, value_bytes)), 'v'),
          .headers = engine::WithRetryHeaders({}, meta)};
}

std::vector<Watermark> QueryWatermarks(const std::string& topic, int partitions) {
  const kafka::HandlePtr rk = NewClient(RD_KAFKA_PRODUCER);
  if (rk == nullptr) return {};
  std::vector<Watermark> marks(static_cast<size_t>(partitions));
  for (int p = 0; p < partitions; ++p) {
    Watermark& m = marks[static_cast<size_t>(p)];
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    // A topic just made on a real broker may have no leader yet, or one its
    // metadata does not know of: those errors pass, the others do not.
    testing::WaitFor(
        [&] {
          err =
              rd_kafka_query_watermark_offsets(rk.get(), topic.c_str(), p, &m.low, &m.high, 30000);
          return err != RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION &&
                 err != RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE &&
                 err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
        },
        absl::Seconds(30));
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::fprintf(stderr, "watermarks of %s [%d]: %s\n", topic.c_str(), p, rd_kafka_err2str(err));
      return {};
    }
  }
  return marks;
}

bool CheckNothingDropped(const std::string& topic, int64_t expected, int partitions,
                         bool at_least) {
  const std::vector<Watermark> marks = QueryWatermarks(topic, partitions);
  if (marks.empty()) return false;
  int64_t total = 0;
  bool ok = true;
  for (int p = 0; p < partitions; ++p) {
    const Watermark& m = marks[static_cast<size_t>(p)];
    if (m.low != 0) {
      std::fprintf(stderr,
                   "check %s: partition %d starts at offset %lld: the broker dropped records "
                   "(its per-partition retention); spread them over more partitions\n",
                   topic.c_str(), p, static_cast<long long>(m.low));
      ok = false;
    }
    total += m.high;
  }
  if (at_least ? total < expected : total != expected) {
    std::fprintf(stderr, "check %s: %lld records, expected %s%lld\n", topic.c_str(),
                 static_cast<long long>(total), at_least ? "at least " : "",
                 static_cast<long long>(expected));
    ok = false;
  }
  return ok;
}

int64_t ProcStatusBytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    int64_t kib = 0;
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (words.size() >= 2 && absl::SimpleAtoi(words[1], &kib)) return kib * 1024;
  }
  return -1;
}

absl::Duration ProcessCpu() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return absl::ZeroDuration();
  return absl::DurationFromTimeval(usage.ru_utime) + absl::DurationFromTimeval(usage.ru_stime);
}

namespace {

CpuPart PartOf(const std::string& thread_name) {
  if (thread_name == "rdk:mock") return kBrokerCpu;
  if (absl::StartsWith(thread_name, "primary-") || absl::StartsWith(thread_name, "retry-") ||
      absl::StartsWith(thread_name, "rdk:") || thread_name == "producer-dr") {
    return kEngineCpu;
  }
  return kOtherCpu;
}

// Microseconds of CPU the thread `task` (/proc/self/task/<tid>) has used.
int64_t TaskCpuMicros(const std::filesystem::path& task) {
  // "<ns on the CPU> <ns waiting> <time slices>".
  std::ifstream schedstat(task / "schedstat");
  if (int64_t ns = 0; schedstat >> ns) return ns / 1000;
  // "tid (name) state ppid ...": utime and stime, in clock ticks, are fields
  // 14 and 15.
  std::ifstream stat(task / "stat");
  std::string line;
  if (!std::getline(stat, line)) return 0;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  int64_t ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stoll(field);
  }
  return ticks * 1'000'000 / sysconf(_SC_CLK_TCK);
}

}  // namespace

CpuMicros ReadThreadCpu() {
  CpuMicros micros{};
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (!std::getline(comm, name)) continue;  // The thread has ended.
    micros[PartOf(name)] += TaskCpuMicros(task.path());
  }
  return micros;
}

void ReportToParent(const std::map<std::string, int64_t>& values) {
  std::string line = "RESULT";
  for (const auto& [k, v] : values) absl::StrAppend(&line, " ", k, "=", v);
  std::cout << line << std::endl;
}

std::map<std::string, int64_t> RunChild(const std::string& args) {
  std::map<std::string, int64_t> values;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return values;
  self[n] = 0;
  const std::string command = absl::StrCat(self, " ", args);
  FILE* child = popen(command.c_str(), "r");
  if (child == nullptr) return values;
  char buffer[4096];
  while (fgets(buffer, sizeof(buffer), child) != nullptr) {
    std::string line(buffer);
    if (line.rfind("RESULT ", 0) != 0) continue;
    for (absl::string_view word : absl::StrSplit(line.substr(7), ' ', absl::SkipWhitespace())) {
      std::pair<std::string, std::string> kv = absl::StrSplit(word, '=');
      int64_t v = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(kv.second), &v)) values[kv.first] = v;
    }
  }
  if (pclose(child) != 0) values.clear();
  return values;
}

Table::Table(std::string name, std::vector<std::string> columns)
    : name_(std::move(name)), columns_(std::move(columns)) {}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

void Table::Print() const {
  std::vector<size_t> width(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    width[c] = columns_[c].size();
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < cells.size(); ++c) {
      // The first column (a name) to the left, numbers to the right.
      out += c == 0 ? absl::StrFormat("%-*s", width[c], cells[c])
                    : absl::StrFormat("  %*s", width[c], cells[c]);
    }
    std::printf("%s\n", out.c_str());
  };
  std::printf("\n%s\n", name_.c_str());
  line(columns_);
  for (const auto& row : rows_) line(row);
  std::fflush(stdout);
}

bool Table::WriteCsv(const std::string& dir) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = absl::StrCat(dir, "/", name_, ".csv");
  std::ofstream csv(path);
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < cells.size(); ++c) {
      const bool quote = cells[c].find_first_of(",\"") != std::string::npos;
      std::string cell = cells[c];
      if (quote) cell = absl::StrCat("\"", absl::StrReplaceAll(cell, {{"\"", "\"\""}}), "\"");
      csv << (c == 0 ? "" : ",") << cell;
    }
    csv << "\n";
  };
  line(columns_);
  for (const auto& row : rows_) line(row);
  csv.close();
  if (!csv) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return false;
  }
  std::printf("wrote %s\n", path.c_str());
  return true;
}

std::string Fixed(double value, int decimals) { return absl::StrFormat("%.*f", decimals, value); }

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(values.size()));
  const size_t index = static_cast<size_t>(std::clamp(rank, 1.0, double(values.size()))) - 1;
  return values[index];
}

}  // namespace retryd::bench
