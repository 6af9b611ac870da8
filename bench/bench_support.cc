#include "bench/bench_support.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "server/kafka/producer.h"

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

bool CheckNothingDropped(const std::string& topic, int64_t expected, int partitions) {
  const kafka::HandlePtr rk = NewClient(RD_KAFKA_PRODUCER);
  if (rk == nullptr) return false;
  int64_t total = 0;
  bool ok = true;
  for (int p = 0; p < partitions; ++p) {
    int64_t low = -1, high = -1;
    const rd_kafka_resp_err_t err =
        rd_kafka_query_watermark_offsets(rk.get(), topic.c_str(), p, &low, &high, 30000);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::fprintf(stderr, "check %s [%d]: %s\n", topic.c_str(), p, rd_kafka_err2str(err));
      return false;
    }
    if (low != 0) {
      std::fprintf(stderr,
                   "check %s: partition %d starts at offset %lld: the broker dropped records "
                   "(its per-partition retention); spread them over more partitions\n",
                   topic.c_str(), p, static_cast<long long>(low));
      ok = false;
    }
    total += high;
  }
  if (total != expected) {
    std::fprintf(stderr, "check %s: %lld records, expected %lld\n", topic.c_str(),
                 static_cast<long long>(total), static_cast<long long>(expected));
    ok = false;
  }
  return ok;
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
