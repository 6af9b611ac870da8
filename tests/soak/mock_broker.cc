// retryd-mock-broker: librdkafka's mock cluster in a process of its own, so
// that a soak can kill and restart retryd while the broker, and what it
// holds, lives on.
//
//   retryd-mock-broker [--brokers N] [--address_file PATH] TOPIC:PARTITIONS...
//
// Creates the topics named on the command line (the mock does not support
// CreateTopics, so clients cannot), prints "bootstrap: HOST:PORT,..." and
// writes the same address list, with a newline, to --address_file. The file
// appears only once every topic exists (it is written beside its final name
// and renamed), so a script may wait for it and go. Runs until SIGINT or
// SIGTERM.
//
// The mock keeps everything in memory and a bounded log per partition
// (about 100,000 batches or 5 MiB); older batches are dropped silently, which
// shows as a log start offset above 0.
//
// Exit status: 0 after SIGINT/SIGTERM; 1 when the cluster or a topic cannot
// be created or the address file cannot be written; 2 for a bad command line.
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/kafka/embedded_broker.h"

ABSL_FLAG(int, brokers, 3, "Brokers in the cluster, 1..16; every topic is replicated on all.");
ABSL_FLAG(std::string, address_file, "",
          "File to write the bootstrap address list to, once every topic exists.");

namespace retryd {
namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

struct TopicSpec {
  std::string name;
  int partitions = 0;
};

absl::StatusOr<TopicSpec> ParseTopic(const std::string& arg) {
  const std::vector<std::string> parts = absl::StrSplit(arg, absl::MaxSplits(':', 1));
  TopicSpec spec;
  if (parts.size() != 2 || parts[0].empty() || !absl::SimpleAtoi(parts[1], &spec.partitions) ||
      spec.partitions < 1 || spec.partitions > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("topic \"", arg, "\": expected NAME:PARTITIONS, partitions 1..1000"));
  }
  spec.name = parts[0];
  return spec;
}

// Writes `text` to `path` under a temporary name first, so a reader never
// sees a partial file.
absl::Status WriteAtomically(const std::string& path, const std::string& text) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << text;
    out.close();
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", temp));
  }
  std::error_code error;
  std::filesystem::rename(temp, path, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot rename ", temp, " to ", path, ": ", error.message()));
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "mock_broker.cc");
  };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "retryd-mock-broker [--brokers N] [--address_file PATH] TOPIC:PARTITIONS...\n"
      "Runs librdkafka's mock cluster with these topics until SIGINT or SIGTERM.");
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);

  std::vector<TopicSpec> topics;
  for (size_t i = 1; i < args.size(); ++i) {
    absl::StatusOr<TopicSpec> spec = ParseTopic(args[i]);
    if (!spec.ok()) {
      std::fprintf(stderr, "retryd-mock-broker: %s\n",
                   std::string(spec.status().message()).c_str());
      return kExitUsage;
    }
    topics.push_back(*std::move(spec));
  }
  const int brokers = absl::GetFlag(FLAGS_brokers);
  if (brokers < 1 || brokers > 16) {
    std::fprintf(stderr, "retryd-mock-broker: --brokers must be between 1 and 16, got %d\n",
                 brokers);
    return kExitUsage;
  }

  // Taken synchronously below; blocked before the cluster starts its
  // threads, so that they inherit the mask and none is interrupted.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  absl::StatusOr<std::unique_ptr<kafka::EmbeddedBroker>> broker =
      kafka::EmbeddedBroker::Start(brokers);
  if (!broker.ok()) {
    std::fprintf(stderr, "retryd-mock-broker: %s\n",
                 std::string(broker.status().message()).c_str());
    return kExitRuntime;
  }
  for (const TopicSpec& topic : topics) {
    if (absl::Status s = (*broker)->CreateTopic(topic.name, topic.partitions, brokers); !s.ok()) {
      std::fprintf(stderr, "retryd-mock-broker: %s\n", std::string(s.message()).c_str());
      return kExitRuntime;
    }
  }
  const std::string& address = (*broker)->bootstrap_servers();
  if (const std::string path = absl::GetFlag(FLAGS_address_file); !path.empty()) {
    if (absl::Status s = WriteAtomically(path, address + "\n"); !s.ok()) {
      std::fprintf(stderr, "retryd-mock-broker: %s\n", std::string(s.message()).c_str());
      return kExitRuntime;
    }
  }
  std::printf("bootstrap: %s\n", address.c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);  // Fails only for an invalid set.
  std::printf("signal %d: stopping\n", sig);
  return 0;
}

}  // namespace
}  // namespace retryd

int main(int argc, char** argv) { return retryd::Main(argc, argv); }
