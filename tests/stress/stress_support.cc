#include "tests/stress/stress_support.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/support/outcomes.h"
#include "tests/support/wait_for.h"

namespace retryd::testing {

int EnvInt(const char* name, int fallback) {
  const char* text = std::getenv(name);
  int value = 0;
  if (text == nullptr || !absl::SimpleAtoi(text, &value) || value < 1) return fallback;
  return value;
}

std::string StressConfig(const TestTopics& topics, const std::string& group,
                         const StressConfigOptions& o) {
  // RETRYD_KAFKA_DEBUG=cgrp,fetch,... turns on librdkafka's debug contexts.
  const std::string debug = KafkaDebugConfig();
  return absl::StrCat(
      "# Written by the stress tests.\n"
      "listen_address: \"127.0.0.1:0\"\n"
      "kafka {\n"
      "  bootstrap_servers: \"",
      Broker().bootstrap_servers(), "\"\n", "  properties { key: \"session.timeout.ms\" value: \"",
      o.session_timeout_ms, "\" }\n", "  properties { key: \"heartbeat.interval.ms\" value: \"",
      o.heartbeat_interval_ms, "\" }\n", "  properties { key: \"max.poll.interval.ms\" value: \"",
      o.max_poll_interval_ms, "\" }\n",
      "  properties { key: \"topic.metadata.refresh.interval.ms\" value: \"1000\" }\n"
      "  properties { key: \"max.in.flight.requests.per.connection\" value: \"1\" }\n",
      debug,
      "}\n"
      "group_id: \"",
      group, "\"\n", "input_topics: \"", topics.input, "\"\n", "output_topic: \"", topics.output,
      "\"\n", "dead_letter_topic: \"", topics.dlq, "\"\n", "primary_threads: ", o.primary_threads,
      "\n", "commit_interval_ms: 200\n", "shutdown_timeout_ms: ", o.shutdown_timeout_ms, "\n",
      "retry {\n", "  topic: \"", topics.retry, "\"\n", "  threads: ", o.retry_threads, "\n",
      "  max_threads: ", o.max_retry_threads, "\n",
      "  max_attempts: 4\n"
      "  seed: 42\n"
      "  backoff { initial_ms: 20 max_ms: 200 }\n"
      "}\n"
      "processor {\n"
      "  simulate {\n"
      "    seed: 7\n"
      "    latency_ms: ",
      o.latency_ms,
      "\n"
      "    rule { key_prefix: \"perm-\" permanent: true }\n"
      "    rule { key_prefix: \"flaky-\" fail_attempts: 2 }\n"
      "  }\n"
      "}\n");
}

std::string ControlAddress(RetrydProcess& retryd, absl::Duration timeout) {
  const std::string kPrefix = "control API listening on ";
  std::string address;
  WaitFor(
      [&] {
        const std::string out = retryd.Stdout();
        const size_t at = out.find(kPrefix);
        if (at == std::string::npos) return !retryd.Running();
        const size_t start = at + kPrefix.size();
        const size_t end = out.find('\n', start);
        if (end == std::string::npos) return false;
        address = out.substr(start, end - start);
        return true;
      },
      timeout);
  return address;
}

std::unique_ptr<RetrydClient> NewClient(const std::string& address, absl::Duration deadline) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  ClientOptions options;
  options.timeout = deadline;
  return RetrydClient::CreateWithChannel(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args), options);
}

absl::Status RpcLog::Record(const std::string& name, absl::FunctionRef<absl::Status()> call) {
  const absl::Time start = absl::Now();
  absl::Status status = call();
  const absl::Duration took = absl::Now() - start;
  absl::MutexLock lock(&mu_);
  PerName& entry = by_name_[name];
  ++entry.calls;
  entry.max_latency = std::max(entry.max_latency, took);
  if (!status.ok()) {
    failures_.push_back(
        absl::StrCat(name, " after ", absl::FormatDuration(took), ": ", status.ToString()));
  }
  return status;
}

std::vector<std::string> RpcLog::Failures() const {
  absl::MutexLock lock(&mu_);
  return failures_;
}

std::string RpcLog::Summary() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const auto& [name, entry] : by_name_) {
    absl::StrAppend(&out, out.empty() ? "" : "; ", name, ": ", entry.calls, " calls, max ",
                    absl::ToInt64Milliseconds(entry.max_latency), " ms");
  }
  return out;
}

int64_t RpcLog::calls() const {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (const auto& [name, entry] : by_name_) n += entry.calls;
  return n;
}

std::vector<std::string> StressKeys(int first, int n, const std::string& tag) {
  std::vector<std::string> keys;
  for (int i = first; i < first + n; ++i) {
    const char* kind = i % 13 == 0 ? "perm-" : i % 7 == 0 ? "flaky-" : "ok-";
    keys.push_back(absl::StrCat(kind, tag, i));
  }
  return keys;
}

Load::Load(std::string topic, int batch, absl::Duration period, std::string tag)
    : topic_(std::move(topic)), batch_(batch), period_(period), tag_(std::move(tag)) {
  kafka::ProducerOptions options;
  options.bootstrap_servers = Broker().bootstrap_servers();
  options.client_id = "stress-load";
  // See StressConfig; and no delivery timeout, so a record waits out a
  // cluster that is down rather than fail.
  options.properties = {{"max.in.flight.requests.per.connection", "1"},
                        {"message.timeout.ms", "0"}};
  absl::StatusOr<std::unique_ptr<kafka::Producer>> producer = kafka::Producer::Create(options);
  EXPECT_TRUE(producer.ok()) << producer.status();
  if (!producer.ok()) return;
  producer_ = *std::move(producer);
  thread_ = std::thread(&Load::Run, this);
}

Load::~Load() { Stop(); }

void Load::Run() {
  int next = 0;
  do {
    for (const std::string& key : StressKeys(next, batch_, tag_)) {
      OutgoingRecord r;
      r.topic = topic_;
      r.key = key;
      r.value = absl::StrCat("v-", key);
      absl::Status accepted = producer_->Produce(r, [this](absl::Status delivered) {
        if (delivered.ok()) return;
        absl::MutexLock lock(&mu_);
        ++failed_;
      });
      absl::MutexLock lock(&mu_);
      if (accepted.ok()) {
        ++produced_;
      } else {
        ++failed_;
      }
    }
    next += batch_;
  } while (!stop_.WaitForNotificationWithTimeout(period_));
}

void Load::Stop(absl::Duration flush_timeout) {
  if (!thread_.joinable()) return;
  stop_.Notify();
  thread_.join();
  const absl::Status flushed = producer_->Flush(flush_timeout);
  EXPECT_TRUE(flushed.ok()) << "the load's records were not all acknowledged: " << flushed;
  producer_->Close(absl::Seconds(1));
}

int64_t Load::produced() const {
  absl::MutexLock lock(&mu_);
  return produced_;
}

int64_t Load::failed() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

namespace {

// The keys of `records`, and into `truncated` each partition whose first
// record is past offset 0; the end offset per partition into `end`.
std::multiset<std::string> ReadKeys(const std::string& topic, std::vector<std::string>& truncated,
                                    std::map<int32_t, int64_t>* end = nullptr) {
  std::multiset<std::string> keys;
  std::map<int32_t, int64_t> first;
  for (const retryd::Record& r : ReadAll(topic)) {
    keys.insert(r.key.value_or("<null>"));
    first.emplace(r.partition, r.offset);
    if (end != nullptr) (*end)[r.partition] = std::max((*end)[r.partition], r.offset + 1);
  }
  for (const auto& [partition, offset] : first) {
    if (offset > 0) {
      truncated.push_back(absl::StrCat(topic, "/", partition, " starts at offset ", offset));
    }
  }
  return keys;
}

}  // namespace

Outcomes Outcomes::Read(const TestTopics& topics) {
  Outcomes o;
  o.input = ReadKeys(topics.input, o.truncated, &o.input_end);
  o.output = ReadKeys(topics.output, o.truncated);
  o.dlq = ReadKeys(topics.dlq, o.truncated);
  ReadKeys(topics.retry, o.truncated, &o.retry_end);
  return o;
}

std::vector<std::string> Outcomes::Missing() const {
  std::vector<std::string> missing;
  for (auto it = input.begin(); it != input.end(); it = input.upper_bound(*it)) {
    const auto& want = absl::StartsWith(*it, "perm-") ? dlq : output;
    if (!want.contains(*it)) missing.push_back(*it);
  }
  return missing;
}

std::vector<std::string> Outcomes::Misplaced() const {
  std::vector<std::string> wrong;
  for (const std::string& k : output) {
    if (absl::StartsWith(k, "perm-") || !input.contains(k)) wrong.push_back("output:" + k);
  }
  for (const std::string& k : dlq) {
    if (!absl::StartsWith(k, "perm-") || !input.contains(k)) wrong.push_back("dlq:" + k);
  }
  return wrong;
}

size_t Outcomes::Duplicates() const {
  std::set<std::string> distinct(output.begin(), output.end());
  distinct.insert(dlq.begin(), dlq.end());
  return output.size() + dlq.size() - distinct.size();
}

std::string Outcomes::DuplicateSummary() const {
  std::map<std::string, size_t> by_kind = {{"ok-", 0}, {"flaky-", 0}, {"perm-", 0}};
  for (const std::multiset<std::string>* keys : {&output, &dlq}) {
    for (auto it = keys->begin(); it != keys->end(); it = keys->upper_bound(*it)) {
      for (auto& [kind, n] : by_kind) {
        if (absl::StartsWith(*it, kind)) n += keys->count(*it) - 1;
      }
    }
  }
  return absl::StrCat(Duplicates(), " duplicates (ok- ", by_kind["ok-"], ", flaky- ",
                      by_kind["flaky-"], ", perm- ", by_kind["perm-"], ")");
}

std::vector<std::string> UncommittedPartitions(const std::string& group, const std::string& topic,
                                               const std::map<int32_t, int64_t>& end) {
  const std::map<int32_t, int64_t> committed = CommittedOffsets(group, topic);
  std::vector<std::string> behind;
  for (const auto& [partition, end_offset] : end) {
    const auto it = committed.find(partition);
    const int64_t at = it == committed.end() ? -1 : it->second;
    if (at < end_offset) {
      behind.push_back(
          absl::StrCat(topic, "/", partition, ": ", group, " committed ", at, " of ", end_offset));
    }
  }
  return behind;
}

std::string First(const std::vector<std::string>& items, size_t n) {
  std::string s;
  for (size_t i = 0; i < items.size() && i < n; ++i) absl::StrAppend(&s, i ? ", " : "", items[i]);
  if (items.size() > n) absl::StrAppend(&s, ", ... (", items.size(), " in all)");
  return s;
}

}  // namespace retryd::testing
