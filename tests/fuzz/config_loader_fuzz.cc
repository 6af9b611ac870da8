// Fuzzes the config loader (server/config/config_loader.h): the
// text-format parse of retryd.v1.Config and the validation that follows.
//
// Input: the config file's text.
//
// Beyond "no crash, no sanitizer report", it checks the loader's promises:
// a bad config is INVALID_ARGUMENT with every line naming the file; a good
// one yields an effective config (defaults filled in) that loads again,
// unchanged, so what GetStatus shows is itself a valid config; and the
// engine options derived from it are within the documented ranges.
//
// The loader reads the environment variables and files a config names
// (kafka.properties_from_env / _from_file); scripts/fuzz.sh runs the fuzzer
// with stdin from /dev/null so that no path can make it wait.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/config/config_loader.h"
#include "tests/fuzz/fuzz_check.h"

namespace retryd::fuzz {
namespace {

constexpr std::string_view kSource = "fuzz.textproto";

void CheckEngineOptions(const engine::EngineOptions& engine) {
  Require(engine.primary_threads >= 1 && engine.primary_threads <= 64, "primary_threads in range");
  Require(engine.retry.threads >= 0 && engine.retry.threads <= engine.retry.max_threads,
          "retry.threads within retry.max_threads");
  Require(engine.ordering != engine::Ordering::kInOrder || engine.retry.threads == 0,
          "no retry threads in order");
  Require(engine.retry.min_threads >= 0 && engine.retry.min_threads <= engine.retry.threads,
          "retry.min_threads within retry.threads");
  Require(engine.ordering != engine::Ordering::kInOrder || engine.retry.min_threads == 0,
          "no retry thread floor in order");
  Require(!engine.retry.autoscale.enabled || (engine.retry.autoscale.backlog_per_thread >= 1 &&
                                              engine.retry.autoscale.idle_exit_ms >= 100),
          "autoscale bounds in range");
  Require(engine.retry.max_attempts >= 1, "retry.max_attempts at least 1");
  Require(engine.retry.lookahead >= 1, "retry.lookahead at least 1");
  Require(engine.retry.backoff.initial_ms >= 1 &&
              engine.retry.backoff.initial_ms <= engine.retry.backoff.max_ms,
          "backoff initial_ms in 1..max_ms");
  Require(engine.retry.backoff.multiplier >= 1, "backoff multiplier at least 1");
  Require(!engine.group_id.empty() && !engine.input_topics.empty(), "group and inputs given");
  Require(!engine.retry.topic.empty() && !engine.dead_letter_topic.empty(),
          "retry and dead-letter topics named");
  Require(engine.commit_interval_ms >= 10 && engine.max_in_flight >= 1 &&
              engine.shutdown_timeout_ms >= 1,
          "intervals and bounds in range");
}

void FuzzConfigLoader(std::string_view text) {
  absl::StatusOr<LoadedConfig> loaded = LoadConfigText(text, kSource, ConfigOverrides{});
  if (!loaded.ok()) {
    Require(loaded.status().code() == absl::StatusCode::kInvalidArgument,
            "a bad config is INVALID_ARGUMENT", loaded.status().ToString());
    for (absl::string_view line : absl::StrSplit(loaded.status().message(), '\n')) {
      Require(absl::StartsWith(line, absl::string_view(kSource.data(), kSource.size())),
              "every error line names the file", loaded.status().ToString());
    }
    return;
  }
  CheckEngineOptions(loaded->engine);
  const v1::Ordering ordering = loaded->proto.ordering();
  Require(ordering != v1::ORDERING_UNSPECIFIED &&
              loaded->proto.in_order() == (ordering == v1::ORDERING_IN_ORDER) &&
              (loaded->engine.ordering == engine::Ordering::kInOrder) ==
                  (ordering == v1::ORDERING_IN_ORDER) &&
              (loaded->engine.ordering == engine::Ordering::kKey) == (ordering == v1::ORDERING_KEY),
          "the effective config names the engine's ordering, in both spellings");

  std::string effective;
  Require(google::protobuf::TextFormat::PrintToString(loaded->proto, &effective),
          "the effective config prints");
  absl::StatusOr<LoadedConfig> again = LoadConfigText(effective, "effective", ConfigOverrides{});
  Require(again.ok(), "the effective config loads", again.status().ToString() + "\n" + effective);
  std::string difference;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&difference);
  Require(differencer.Compare(loaded->proto, again->proto), "the effective config loads unchanged",
          difference);
}

}  // namespace
}  // namespace retryd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  retryd::fuzz::FuzzConfigLoader(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
