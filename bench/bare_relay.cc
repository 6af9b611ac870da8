// The bare librdkafka relay as a process of its own, for the peers bench
// (bench/peers/run.py): consume -> produce with the bytes retryd writes for
// an output record (bench/bare_relay_loop.h), until SIGINT or SIGTERM. No
// processor, no failures: the baseline of the no-failure, 0 ms workload
// only.
//
//   build-bench/bench/bare_relay --bootstrap=HOST:PORT --input=TOPIC
//       --output=TOPIC --group=GROUP
//
// Exit status: 0 after a signal, 1 if a client could not be made or a
// record failed to be produced, 2 for a bad command line.
#include <signal.h>

#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#include "bench/bare_relay_loop.h"
#include "bench/bench_support.h"

namespace retryd::bench {
namespace {

int Main(int argc, char** argv) {
  Flags flags(argc, argv,
              "A bare librdkafka consume -> produce relay writing what retryd writes for an "
              "output record; runs until SIGINT or SIGTERM.");
  const std::string bootstrap = flags.String("bootstrap", "", "Kafka bootstrap servers");
  const std::string input = flags.String("input", "", "topic to consume");
  const std::string output = flags.String("output", "", "topic to produce to");
  const std::string group = flags.String("group", "", "consumer group");
  flags.Finish();
  if (bootstrap.empty() || input.empty() || output.empty() || group.empty()) {
    std::fprintf(stderr, "bare_relay: --bootstrap, --input, --output and --group are required\n");
    return 2;
  }

  // Taken synchronously below; blocked before the clients start their
  // threads, so that they all inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  BareRelayOptions options;
  options.bootstrap_servers = bootstrap;
  options.input_topic = input;
  options.output_topic = output;
  options.group_id = group;
  std::unique_ptr<BareRelay> relay = BareRelay::Create(options);
  if (relay == nullptr) return 1;
  relay->Open();
  std::printf("bare relay: %s -> %s, group %s\n", input.c_str(), output.c_str(), group.c_str());
  std::fflush(stdout);
  int signal = 0;
  sigwait(&stop_signals, &signal);
  const int64_t relayed = relay->relayed();
  const int64_t failed = relay->failed();
  relay.reset();  // Flushes what is still queued.
  std::printf("bare relay: %lld records relayed\n", static_cast<long long>(relayed));
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace retryd::bench

int main(int argc, char** argv) { return retryd::bench::Main(argc, argv); }
