// group_id and the topics: input, retry (or the tiers'), dead-letter and
// output. Each must be a valid Kafka topic name and play one role only.
#include <map>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/config/section_validators.h"

namespace retryd::config_validation {
namespace {

constexpr size_t kMaxTopicLength = 249;

// Why `name` cannot be a Kafka topic (a phrase to follow "not a valid Kafka
// topic name: "), or nullopt if it can.
std::optional<std::string> TopicNameProblem(absl::string_view name) {
  if (name.empty()) return "it is empty";
  if (name.size() > kMaxTopicLength) {
    return absl::StrCat("is ", name.size(), " characters long; Kafka allows at most ",
                        kMaxTopicLength);
  }
  if (name == "." || name == "..") return "Kafka reserves \".\" and \"..\"";
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return absl::StrCat("it contains ", Quote(absl::string_view(&c, 1)),
                          "; only letters, digits, '.', '_' and '-' are allowed");
    }
  }
  return std::nullopt;
}

// Checks the topics of one config, remembering the role each plays.
class TopicValidator {
 public:
  explicit TopicValidator(Checker& checker) : checker_(checker), root_(checker.root()) {}

  void Run(v1::Config& config) {
    if (config.group_id().empty()) {
      checker_.Error(root_, "group_id", "required: the consumer group of the primary threads");
    }
    CheckInputTopics(config);
    CheckRetryTopics(config);
    DefaultedTopic(config, root_, "dead_letter_topic", config.mutable_dead_letter_topic(), ".dlq");
    if (!config.output_topic().empty() &&
        CheckTopicName(root_, "output_topic", config.output_topic())) {
      ClaimTopic(config.output_topic(), "output_topic", root_.Line("output_topic"));
    }
  }

 private:
  void CheckInputTopics(const v1::Config& config) {
    if (config.input_topics_size() == 0) {
      checker_.Error(root_, "input_topics",
                     "at least one input topic is required, e.g. input_topics: \"orders\"");
    }
    for (int i = 0; i < config.input_topics_size(); ++i) {
      if (CheckTopicName(root_, "input_topics", config.input_topics(i), i)) {
        ClaimTopic(config.input_topics(i), root_.Path("input_topics", i),
                   root_.Line("input_topics", i));
      }
    }
  }

  // retry.topic, or with tiers each tier's topic.
  void CheckRetryTopics(v1::Config& config) {
    const Node retry_node = root_.Child("retry");
    if (config.retry().tiers_size() == 0) {
      DefaultedTopic(config, retry_node, "topic", config.mutable_retry()->mutable_topic(),
                     ".retry");
    } else if (!config.retry().topic().empty()) {
      checker_.Error(retry_node, "topic",
                     "leave it out with tiers: the first tier's topic is where failed records go");
    }
    for (int i = 0; i < config.retry().tiers_size(); ++i) {
      const v1::RetryTier& tier = config.retry().tiers(i);
      const Node tier_node = retry_node.Child("tiers", i);
      if (tier.topic().empty()) {
        checker_.Error(tier_node, "topic", "required: the tier's retry topic");
      } else if (CheckTopicName(tier_node, "topic", tier.topic())) {
        ClaimTopic(tier.topic(), tier_node.Path("topic"), tier_node.Line("topic"));
      }
    }
  }

  // Records that `name` plays `role` (a field path); reports a topic with two
  // roles.
  void ClaimTopic(const std::string& name, const std::string& role, int line) {
    auto [it, inserted] = topic_roles_.emplace(name, role);
    if (inserted) return;
    if (absl::StartsWith(role, "input_topics") && absl::StartsWith(it->second, "input_topics")) {
      checker_.Add(line, role,
                   absl::StrCat(Quote(name), " is listed twice (also ", it->second, ")"));
      return;
    }
    checker_.Add(line, role,
                 absl::StrCat(Quote(name), " is already used as ", it->second,
                              "; the input, retry, dead-letter and output topics must all differ"));
  }

  // Validates a topic field; `derived` says how a default was made from the
  // input topic's name.
  bool CheckTopicName(const Node& node, absl::string_view field, const std::string& name,
                      int index = -1, absl::string_view derived = "") {
    std::optional<std::string> problem = TopicNameProblem(name);
    if (!problem) return true;
    *problem = absl::StrCat(Quote(name), " is not a valid Kafka topic name: ", *problem);
    if (!derived.empty()) absl::StrAppend(&*problem, " (", derived, "; set it explicitly)");
    checker_.Error(node, field, *problem, index);
    return false;
  }

  // Fills a topic that defaults to "<input><suffix>" and validates it.
  void DefaultedTopic(const v1::Config& config, const Node& node, absl::string_view field,
                      std::string* topic, absl::string_view suffix) {
    std::string derived;
    if (topic->empty()) {
      if (config.input_topics_size() == 0) return;  // Already reported.
      if (config.input_topics_size() > 1) {
        checker_.Error(
            node, field,
            absl::StrCat("required when there are ", config.input_topics_size(),
                         " input topics (the default \"<input>", suffix, "\" needs exactly one)"));
        return;
      }
      *topic = absl::StrCat(config.input_topics(0), suffix);
      derived = absl::StrCat("the default, from input topic ", Quote(config.input_topics(0)));
    }
    if (CheckTopicName(node, field, *topic, -1, derived)) {
      ClaimTopic(*topic, node.Path(field), node.Line(field));
    }
  }

  Checker& checker_;
  const Node& root_;
  std::map<std::string, std::string> topic_roles_;  // Topic -> field path.
};

}  // namespace

void ValidateTopics(Checker& checker, v1::Config& config) { TopicValidator(checker).Run(config); }

}  // namespace retryd::config_validation
