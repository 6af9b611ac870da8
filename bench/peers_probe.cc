// The peers bench's hands on the broker (bench/peers/run.py runs it): makes
// and deletes topics, writes a side's input, waits for its outcomes and
// judges them (bench/judge/judge.h). Each job is a subcommand:
//
//   peers_probe topics --bootstrap=B --create=T1,T2 [--log_append_time=T2]
//                      [--partitions=16]
//       creates the topics (those in --log_append_time stamped with the
//       broker's clock: message.timestamp.type=LogAppendTime) and waits
//       until every one has a leader
//   peers_probe delete --bootstrap=B --prefix=P
//       deletes every topic whose name starts with P
//   peers_probe produce --bootstrap=B --topic=T --warmup=W --records=N [mix]
//       writes W warm-up records, then N measured ones (workload.h), and
//       waits for every acknowledgement
//   peers_probe pace --bootstrap=B --topic=T --records=N --rate=R [mix]
//       writes N paced records, R a second, each stamped with the time it
//       is handed to the producer (linger.ms=0, so it leaves at once)
//   peers_probe await --bootstrap=B --topics=T1,T2 --count=N --timeout_s=S
//                     [--pid=P]
//       returns once the topics hold N records between them (high
//       watermarks, polled every 100 ms): exit 0; 1 after S seconds; 3 if
//       process P is gone first
//   peers_probe judge --bootstrap=B --input=T --output=T --dlq=T
//                     [--await_s=S] [--pid=P]
//       reads the three topics, and while input records are missing and P
//       runs, reads what arrives for up to S more seconds; prints the
//       verdict as one JSON object; exit 0 if every record is where it
//       belongs (judge.h's ok()), 1 otherwise
//
// [mix]: --flaky_percent, --poison_percent, --records_per_key,
// --value_bytes (workload.h's Mix).
#include <librdkafka/rdkafka.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_support.h"
#include "bench/judge/judge.h"
#include "bench/judge/workload.h"
#include "server/common/logging.h"
#include "server/kafka/handle.h"
#include "server/kafka/properties.h"
#include "server/kafka/topic_reader.h"

namespace retryd::bench::peers {
namespace {

constexpr absl::Duration kAdminTimeout = absl::Seconds(60);

kafka::HandlePtr Client(const std::string& bootstrap) {
  return NewClient(RD_KAFKA_PRODUCER, ClientConfAt(bootstrap, {}));
}

std::vector<std::string> List(const std::string& text) {
  return absl::StrSplit(text, ',', absl::SkipEmpty());
}

// The flags of a job that writes a side's input: its broker, its topic and
// the mix of keys.
struct WriteJob {
  std::string bootstrap;
  std::string topic;
  Mix mix;
};

WriteJob ReadWriteJob(Flags& flags) {
  WriteJob job;
  job.bootstrap = flags.String("bootstrap", "", "Kafka bootstrap servers");
  job.topic = flags.String("topic", "", "the side's input topic");
  job.mix.flaky_percent = static_cast<int>(flags.Int("flaky_percent", 0, "percent of keys flaky"));
  job.mix.poison_percent =
      static_cast<int>(flags.Int("poison_percent", 0, "percent of keys poison"));
  job.mix.records_per_key =
      static_cast<int>(flags.Int("records_per_key", 10, "records of each key"));
  job.mix.value_bytes = static_cast<int>(flags.Int("value_bytes", 100, "bytes of each value"));
  return job;
}

// Partitions of each topic, by metadata; empty (after saying why) if a
// topic is unknown or has a partition without a leader.
std::map<std::string, int> Partitions(rd_kafka_t* rk, const std::vector<std::string>& topics,
                                      bool quiet = false) {
  const rd_kafka_metadata_t* md = nullptr;
  if (rd_kafka_metadata(rk, 1, nullptr, &md, 10000) != RD_KAFKA_RESP_ERR_NO_ERROR) return {};
  std::map<std::string, int> found;
  for (int i = 0; i < md->topic_cnt; ++i) {
    const rd_kafka_metadata_topic_t& t = md->topics[i];
    if (t.err != RD_KAFKA_RESP_ERR_NO_ERROR || t.partition_cnt == 0) continue;
    bool led = true;
    for (int p = 0; p < t.partition_cnt; ++p) led = led && t.partitions[p].leader >= 0;
    if (led) found[t.topic] = t.partition_cnt;
  }
  rd_kafka_metadata_destroy(md);
  std::map<std::string, int> out;
  for (const std::string& topic : topics) {
    const auto it = found.find(topic);
    if (it == found.end()) {
      if (!quiet) std::fprintf(stderr, "peers_probe: no topic %s (or no leader)\n", topic.c_str());
      return {};
    }
    out[topic] = it->second;
  }
  return out;
}

// Runs one admin request and returns its result event (null on timeout).
using EventPtr = std::unique_ptr<rd_kafka_event_t, decltype(&rd_kafka_event_destroy)>;
EventPtr AwaitEvent(rd_kafka_queue_t* queue) {
  return EventPtr(
      rd_kafka_queue_poll(queue, static_cast<int>(absl::ToInt64Milliseconds(kAdminTimeout))),
      &rd_kafka_event_destroy);
}

int Topics(int argc, char** argv) {
  Flags flags(argc, argv, "Creates topics and waits until each has its leaders.");
  const std::string bootstrap = flags.String("bootstrap", "", "Kafka bootstrap servers");
  const std::vector<std::string> create = List(flags.String("create", "", "topics to create"));
  const std::vector<std::string> log_append =
      List(flags.String("log_append_time", "", "those of them stamped with the broker's clock"));
  const int partitions = static_cast<int>(flags.Int("partitions", 16, "partitions of each"));
  flags.Finish();
  kafka::HandlePtr rk = Client(bootstrap);
  if (rk == nullptr || create.empty()) return 2;
  const std::set<std::string> stamped(log_append.begin(), log_append.end());
  std::vector<rd_kafka_NewTopic_t*> topics;
  char err[512];
  for (const std::string& name : create) {
    rd_kafka_NewTopic_t* t = rd_kafka_NewTopic_new(name.c_str(), partitions, 1, err, sizeof(err));
    if (t == nullptr) {
      std::fprintf(stderr, "peers_probe: topic %s: %s\n", name.c_str(), err);
      return 2;
    }
    if (stamped.count(name) > 0) {
      rd_kafka_NewTopic_set_config(t, "message.timestamp.type", "LogAppendTime");
    }
    topics.push_back(t);
  }
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk.get());
  rd_kafka_CreateTopics(rk.get(), topics.data(), topics.size(), nullptr, queue);
  const EventPtr event = AwaitEvent(queue);
  rd_kafka_NewTopic_destroy_array(topics.data(), topics.size());
  int status = 0;
  if (event == nullptr || rd_kafka_event_error(event.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    std::fprintf(stderr, "peers_probe: create topics: %s\n",
                 event == nullptr ? "timed out" : rd_kafka_event_error_string(event.get()));
    status = 1;
  } else {
    size_t n = 0;
    const rd_kafka_topic_result_t** results =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(event.get()), &n);
    for (size_t i = 0; i < n; ++i) {
      if (rd_kafka_topic_result_error(results[i]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        std::fprintf(stderr, "peers_probe: create %s: %s\n", rd_kafka_topic_result_name(results[i]),
                     rd_kafka_topic_result_error_string(results[i]));
        status = 1;
      }
    }
  }
  rd_kafka_queue_destroy(queue);
  if (status != 0) return status;
  // Metadata reaches every client a moment after the controller has it.
  const absl::Time deadline = absl::Now() + kAdminTimeout;
  while (Partitions(rk.get(), create, /*quiet=*/true).empty()) {
    if (absl::Now() > deadline) {
      Partitions(rk.get(), create);  // Says which.
      return 1;
    }
    absl::SleepFor(absl::Milliseconds(100));  // The broker's state: polled.
  }
  return 0;
}

int Delete(int argc, char** argv) {
  Flags flags(argc, argv, "Deletes every topic whose name starts with a prefix.");
  const std::string bootstrap = flags.String("bootstrap", "", "Kafka bootstrap servers");
  const std::string prefix = flags.String("prefix", "", "prefix of the topics to delete");
  flags.Finish();
  kafka::HandlePtr rk = Client(bootstrap);
  if (rk == nullptr || prefix.empty()) return 2;
  const rd_kafka_metadata_t* md = nullptr;
  if (rd_kafka_metadata(rk.get(), 1, nullptr, &md, 10000) != RD_KAFKA_RESP_ERR_NO_ERROR) return 1;
  std::vector<rd_kafka_DeleteTopic_t*> doomed;
  for (int i = 0; i < md->topic_cnt; ++i) {
    const std::string name = md->topics[i].topic;
    if (name.rfind(prefix, 0) == 0) doomed.push_back(rd_kafka_DeleteTopic_new(name.c_str()));
  }
  rd_kafka_metadata_destroy(md);
  if (doomed.empty()) return 0;
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk.get());
  rd_kafka_DeleteTopics(rk.get(), doomed.data(), doomed.size(), nullptr, queue);
  const EventPtr event = AwaitEvent(queue);
  rd_kafka_DeleteTopic_destroy_array(doomed.data(), doomed.size());
  rd_kafka_queue_destroy(queue);
  if (event == nullptr || rd_kafka_event_error(event.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    std::fprintf(stderr, "peers_probe: delete topics: %s\n",
                 event == nullptr ? "timed out" : rd_kafka_event_error_string(event.get()));
    return 1;
  }
  std::printf("deleted %zu topics\n", doomed.size());
  return 0;
}

// A producer that counts failed deliveries.
class Writer {
 public:
  Writer(const std::string& bootstrap, const std::string& topic, const std::string& linger_ms)
      : topic_(topic) {
    kafka::ConfPtr conf = ClientConfAt(bootstrap, {{"linger.ms", linger_ms},
                                                   {"enable.idempotence", "true"},
                                                   {"acks", "all"},
                                                   {"queue.buffering.max.messages", "1000000"}});
    if (conf == nullptr) return;
    rd_kafka_conf_set_dr_msg_cb(conf.get(),
                                [](rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
                                  if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
                                    ++*static_cast<int64_t*>(opaque);
                                  }
                                });
    rd_kafka_conf_set_opaque(conf.get(), &failed_);
    rk_ = NewClient(RD_KAFKA_PRODUCER, std::move(conf));
  }

  bool ok() const { return rk_ != nullptr; }

  // The partitioner chooses by key; the timestamp is now.
  bool Write(const GeneratedRecord& r) {
    while (true) {
      const rd_kafka_resp_err_t err = rd_kafka_producev(
          rk_.get(), RD_KAFKA_V_TOPIC(topic_.c_str()), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
          RD_KAFKA_V_KEY(r.key.data(), r.key.size()),
          RD_KAFKA_V_VALUE(const_cast<char*>(r.value.data()), r.value.size()), RD_KAFKA_V_END);
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_poll(rk_.get(), 0);
        return true;
      }
      if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        std::fprintf(stderr, "peers_probe: produce: %s\n", rd_kafka_err2str(err));
        return false;
      }
      rd_kafka_poll(rk_.get(), 50);
    }
  }

  // Waits for every acknowledgement; false if one failed or did not come.
  bool Finish() {
    const rd_kafka_resp_err_t err = rd_kafka_flush(rk_.get(), 120000);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR || failed_ != 0) {
      std::fprintf(stderr, "peers_probe: %lld records not delivered (%s)\n",
                   static_cast<long long>(failed_), rd_kafka_err2str(err));
      return false;
    }
    return true;
  }

 private:
  const std::string topic_;
  int64_t failed_ = 0;  // Delivery reports come on the thread that polls.
  kafka::HandlePtr rk_;
};

int Produce(int argc, char** argv) {
  Flags flags(argc, argv, "Writes a side's backlog: warm-up records, then measured ones.");
  const WriteJob job = ReadWriteJob(flags);
  const int64_t warmup = flags.Int("warmup", 0, "warm-up records, first in every partition");
  const int64_t records = flags.Int("records", 0, "measured records");
  flags.Finish();
  Writer writer(job.bootstrap, job.topic, "5");
  if (!writer.ok() || job.topic.empty()) return 2;
  for (int64_t i = 0; i < warmup; ++i) {
    if (!writer.Write(Generate(job.mix, Phase::kWarmUp, i, warmup))) return 1;
  }
  // Every warm-up record acknowledged before the first measured one leaves.
  if (warmup > 0 && !writer.Finish()) return 1;
  for (int64_t i = 0; i < records; ++i) {
    if (!writer.Write(Generate(job.mix, Phase::kMeasured, i, records))) return 1;
  }
  return writer.Finish() ? 0 : 1;
}

int Pace(int argc, char** argv) {
  Flags flags(argc, argv, "Writes paced records at a fixed rate, each stamped when it is written.");
  const WriteJob job = ReadWriteJob(flags);
  const int64_t records = flags.Int("records", 1000, "paced records");
  const double rate = flags.Double("rate", 500, "records per second");
  flags.Finish();
  Writer writer(job.bootstrap, job.topic, "0");
  if (!writer.ok() || job.topic.empty() || rate <= 0) return 2;
  const absl::Time start = absl::Now();
  for (int64_t i = 0; i < records; ++i) {
    // A fixed schedule, not a wait for anything: the rate is the point.
    const absl::Time due = start + absl::Seconds(static_cast<double>(i) / rate);
    if (const absl::Duration ahead = due - absl::Now(); ahead > absl::ZeroDuration()) {
      absl::SleepFor(ahead);
    }
    if (!writer.Write(Generate(job.mix, Phase::kPaced, i, records))) return 1;
  }
  return writer.Finish() ? 0 : 1;
}

bool Alive(int64_t pid) {
  if (pid <= 0) return true;
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  // A zombie (exited, not yet reaped by its parent) counts as gone.
  FILE* f = std::fopen(absl::StrCat("/proc/", pid, "/stat").c_str(), "r");
  if (f == nullptr) return false;
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  const std::string stat(buf, n);
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

int Await(int argc, char** argv) {
  Flags flags(argc, argv, "Waits until topics hold a number of records between them.");
  const std::string bootstrap = flags.String("bootstrap", "", "Kafka bootstrap servers");
  const std::vector<std::string> topics = List(flags.String("topics", "", "topics to count"));
  const int64_t count = flags.Int("count", 0, "records to wait for");
  const double timeout_s = flags.Double("timeout_s", 600, "longest wait");
  const int64_t pid = flags.Int("pid", 0, "stop waiting when this process is gone (0: none)");
  flags.Finish();
  kafka::HandlePtr rk = Client(bootstrap);
  if (rk == nullptr || topics.empty()) return 2;
  const std::map<std::string, int> partitions = Partitions(rk.get(), topics);
  if (partitions.empty()) return 2;
  const absl::Time deadline = absl::Now() + absl::Seconds(timeout_s);
  int64_t total = 0;
  while (true) {
    total = 0;
    for (const auto& [topic, n] : partitions) {
      for (int p = 0; p < n; ++p) {
        int64_t low = 0, high = 0;
        if (rd_kafka_query_watermark_offsets(rk.get(), topic.c_str(), p, &low, &high, 5000) ==
            RD_KAFKA_RESP_ERR_NO_ERROR) {
          total += high;
        }
      }
    }
    if (total >= count) break;
    if (!Alive(pid)) {
      std::printf("%lld\n", static_cast<long long>(total));
      std::fprintf(stderr, "peers_probe: process %lld is gone\n", static_cast<long long>(pid));
      return 3;
    }
    if (absl::Now() > deadline) {
      std::printf("%lld\n", static_cast<long long>(total));
      return 1;
    }
    absl::SleepFor(absl::Milliseconds(100));  // The broker's state: polled.
  }
  std::printf("%lld\n", static_cast<long long>(total));
  return 0;
}

// Reads `topic` from `next` (per partition, updated past what it read) and
// hands each record to `visit`.
bool ReadFrom(const std::string& bootstrap, const std::string& topic,
              std::map<int32_t, int64_t>& next, const std::function<void(const Record&)>& visit) {
  const absl::Status s =
      kafka::ScanTopic(bootstrap, {}, topic, next, absl::Seconds(300), [&](const Record& r) {
        next[r.partition] = r.offset + 1;
        visit(r);
      });
  if (!s.ok()) {
    std::fprintf(stderr, "peers_probe: read %s: %s\n", topic.c_str(), s.ToString().c_str());
    return false;
  }
  return true;
}

int JudgeTopics(int argc, char** argv) {
  Flags flags(argc, argv, "Judges a side's output and dead-letter topics against its input.");
  const std::string bootstrap = flags.String("bootstrap", "", "Kafka bootstrap servers");
  const std::string input = flags.String("input", "", "the side's input topic");
  const std::string output = flags.String("output", "", "its output topic");
  const std::string dlq = flags.String("dlq", "", "its dead-letter topic");
  const double await_s = flags.Double("await_s", 0, "longest wait for missing records");
  const int64_t pid = flags.Int("pid", 0, "no wait once this process is gone (0: none)");
  flags.Finish();
  if (bootstrap.empty() || input.empty() || output.empty() || dlq.empty()) return 2;
  const absl::Time started = absl::Now();
  Judge judge;
  int64_t refused = 0;
  std::map<int32_t, int64_t> in_next, out_next, dlq_next;
  auto key = [](const Record& r) { return r.key.value_or(""); };
  auto value = [](const Record& r) { return r.value.value_or(""); };
  if (!ReadFrom(bootstrap, input, in_next, [&](const Record& r) {
        if (!judge.AddInput(key(r), value(r), {r.partition, r.offset, r.timestamp_ms})) ++refused;
      })) {
    return 2;
  }
  auto read_outcomes = [&] {
    return ReadFrom(bootstrap, output, out_next,
                    [&](const Record& r) {
                      judge.AddOutcome(Outcome::kOutput, key(r), value(r),
                                       {r.partition, r.offset, r.timestamp_ms});
                    }) &&
           ReadFrom(bootstrap, dlq, dlq_next, [&](const Record& r) {
             judge.AddOutcome(Outcome::kDeadLetter, key(r), value(r),
                              {r.partition, r.offset, r.timestamp_ms});
           });
  };
  if (!read_outcomes()) return 2;
  const absl::Time deadline = absl::Now() + absl::Seconds(await_s);
  while (judge.missing() > 0 && absl::Now() < deadline && Alive(pid)) {
    absl::SleepFor(absl::Milliseconds(500));  // The broker's state: polled.
    if (!read_outcomes()) return 2;
  }
  const Verdict v = judge.Finish();
  const double p50 = Percentile(v.paced_latency_ms, 50);
  const double p99 = Percentile(v.paced_latency_ms, 99);
  absl::PrintF(
      "{\"records\": %d, \"refused_input\": %d, \"lost\": %d, \"wrong_outcome\": %d, "
      "\"duplicates\": %d, \"strays\": %d, \"keys\": %d, \"keys_out_of_order\": %d, "
      "\"measured\": %d, \"measured_healthy\": %d, \"first_ms\": %d, \"last_ms\": %d, "
      "\"last_healthy_ms\": %d, \"done_in_window\": %d, "
      "\"healthy_done_in_window\": %d, "
      "\"paced_healthy\": %d, \"latency_p50_ms\": %.1f, \"latency_p99_ms\": %.1f, "
      "\"ok\": %s, \"judge_s\": %.1f}\n",
      v.records, refused, v.lost, v.wrong_outcome, v.duplicates, v.strays, v.keys,
      v.keys_out_of_order, v.measured, v.measured_healthy, v.first_ms, v.last_ms, v.last_healthy_ms,
      v.done_in_window, v.healthy_done_in_window, v.paced_latency_ms.size(), p50, p99,
      v.ok() && refused == 0 ? "true" : "false", absl::ToDoubleSeconds(absl::Now() - started));
  return v.ok() && refused == 0 ? 0 : 1;
}

int Main(int argc, char** argv) {
  SetMinLogLevel(LogLevel::kError);
  const std::string job = argc > 1 ? argv[1] : "";
  // The subcommand's flags, as if it were the program.
  if (job == "topics") return Topics(argc - 1, argv + 1);
  if (job == "delete") return Delete(argc - 1, argv + 1);
  if (job == "produce") return Produce(argc - 1, argv + 1);
  if (job == "pace") return Pace(argc - 1, argv + 1);
  if (job == "await") return Await(argc - 1, argv + 1);
  if (job == "judge") return JudgeTopics(argc - 1, argv + 1);
  std::fprintf(stderr,
               "usage: peers_probe topics|delete|produce|pace|await|judge --flag=value ...\n"
               "(peers_probe JOB --help lists a job's flags)\n");
  return 2;
}

}  // namespace
}  // namespace retryd::bench::peers

int main(int argc, char** argv) { return retryd::bench::peers::Main(argc, argv); }
