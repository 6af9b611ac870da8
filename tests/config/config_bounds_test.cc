// Each config number's default and range are declared once, in its
// (bounds) option in config.proto. These tests find every such field by
// reflection and check that the loader applies exactly those bounds, that the
// field's comment in config.proto states the same figures, and that the
// engine's own option defaults agree.
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"

namespace retryd {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using ::testing::HasSubstr;

// A field with a (bounds) option, and the fields that lead to it from Config.
struct BoundedField {
  std::vector<const FieldDescriptor*> path;  // path.back() is the field.
  const v1::NumberBounds* bounds;

  const FieldDescriptor* field() const { return path.back(); }
  std::string Name() const {
    std::vector<std::string> names;
    for (const FieldDescriptor* f : path) names.push_back(f->name());
    return absl::StrJoin(names, ".");
  }
};

void Collect(const Descriptor* message, std::vector<const FieldDescriptor*>& path,
             std::vector<BoundedField>& out) {
  for (int i = 0; i < message->field_count(); ++i) {
    const FieldDescriptor* field = message->field(i);
    path.push_back(field);
    if (field->options().HasExtension(v1::bounds)) {
      out.push_back({path, &field->options().GetExtension(v1::bounds)});
    } else if (field->type() == FieldDescriptor::TYPE_MESSAGE && !field->is_repeated() &&
               field->message_type()->file() == v1::Config::descriptor()->file() &&
               path.size() < 6) {
      Collect(field->message_type(), path, out);
    }
    path.pop_back();
  }
}

std::vector<BoundedField> BoundedFields() {
  std::vector<BoundedField> out;
  std::vector<const FieldDescriptor*> path;
  Collect(v1::Config::descriptor(), path, out);
  return out;
}

// A valid config with `f` set to `value` (nothing set with nullopt).
std::string ConfigWith(const BoundedField& f, std::optional<uint64_t> value) {
  const bool grpc =
      f.path.size() > 1 && f.path[0]->name() == "processor" && f.path[1]->name() == "grpc";
  std::string text = value ? absl::StrCat(f.field()->name(), ": ", *value) : "";
  if (grpc) text = absl::StrCat("target: \"localhost:50061\" ", text);
  for (size_t i = f.path.size() - 1; i-- > 0;) {
    text = absl::StrCat(f.path[i]->name(), " { ", text, " }");
  }
  if (grpc) return absl::StrCat("group_id: \"g\"\ninput_topics: \"in\"\n", text, "\n");
  // A message on the way is written even when empty, so that its own
  // defaults (retry.autoscale's) are filled in.
  return absl::StrCat(text, "\ngroup_id: \"g\"\ninput_topics: \"in\"\nprocessor { simulate {} }\n");
}

uint64_t ValueIn(const v1::Config& config, const BoundedField& f) {
  const Message* message = &config;
  for (size_t i = 0; i + 1 < f.path.size(); ++i) {
    message = &message->GetReflection()->GetMessage(*message, f.path[i]);
  }
  const FieldDescriptor* field = f.field();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_UINT32:
      return message->GetReflection()->GetUInt32(*message, field);
    case FieldDescriptor::CPPTYPE_UINT64:
      return message->GetReflection()->GetUInt64(*message, field);
    default:
      ADD_FAILURE() << f.Name() << ": (bounds) on a field that is not unsigned";
      return 0;
  }
}

TEST(ConfigBoundsTest, EveryBoundedFieldIsFound) {
  const std::vector<BoundedField> fields = BoundedFields();
  std::vector<std::string> names;
  for (const BoundedField& f : fields) names.push_back(f.Name());
  // A sample, so that a broken walk cannot pass by finding nothing.
  EXPECT_THAT(
      names, ::testing::IsSupersetOf({"primary_threads", "max_in_flight",
                                      "retry.autoscale.idle_exit_ms", "retry.backoff.max_ms",
                                      "processor.grpc.max_response_bytes", "embedded.partitions"}));
  EXPECT_GE(fields.size(), 19u);
}

TEST(ConfigBoundsTest, TheLoaderAppliesTheDeclaredDefaultAndRange) {
  for (const BoundedField& f : BoundedFields()) {
    SCOPED_TRACE(f.Name());
    ASSERT_TRUE(f.bounds->has_max());
    if (!f.bounds->has_default_value()) continue;  // A rule of another field sets it.
    ASSERT_TRUE(f.bounds->has_min());
    absl::StatusOr<LoadedConfig> absent = LoadConfigText(ConfigWith(f, std::nullopt), "t", {});
    ASSERT_TRUE(absent.ok()) << absent.status();
    EXPECT_EQ(ValueIn(absent->proto, f), f.bounds->default_value());
    for (uint64_t ok : {f.bounds->min(), f.bounds->max()}) {
      absl::StatusOr<LoadedConfig> loaded = LoadConfigText(ConfigWith(f, ok), "t", {});
      ASSERT_TRUE(loaded.ok()) << ok << ": " << loaded.status();
      EXPECT_EQ(ValueIn(loaded->proto, f), ok);
    }
    const std::string range =
        absl::StrCat("must be between ", f.bounds->min(), " and ", f.bounds->max());
    std::vector<uint64_t> bad = {f.bounds->max() + 1};
    if (f.bounds->min() > 0) bad.push_back(f.bounds->min() - 1);
    for (uint64_t value : bad) {
      absl::StatusOr<LoadedConfig> loaded = LoadConfigText(ConfigWith(f, value), "t", {});
      ASSERT_FALSE(loaded.ok()) << value << " accepted";
      EXPECT_THAT(loaded.status().message(), HasSubstr(range)) << value;
    }
  }
}

TEST(ConfigBoundsTest, TheLoaderAppliesTheDeclaredMaximumOfTheOthers) {
  for (const BoundedField& f : BoundedFields()) {
    if (f.bounds->has_default_value()) continue;
    SCOPED_TRACE(f.Name());
    absl::StatusOr<LoadedConfig> loaded =
        LoadConfigText(ConfigWith(f, f.bounds->max() + 1), "t", {});
    ASSERT_FALSE(loaded.ok());
    EXPECT_THAT(loaded.status().message(), HasSubstr(absl::StrCat(f.bounds->max())));
  }
}

// The comment above the field's declaration in config.proto.
std::string CommentOf(const std::vector<std::string>& lines, const FieldDescriptor* field) {
  const std::regex message_line("^message " + field->containing_type()->name() + " \\{");
  const std::regex field_line("^\\s*(optional )?\\w+ " + field->name() + " = " +
                              std::to_string(field->number()) + "\\b");
  bool inside = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (std::regex_search(lines[i], message_line)) inside = true;
    if (!inside || !std::regex_search(lines[i], field_line)) continue;
    std::vector<std::string> comment;
    for (size_t j = i; j-- > 0;) {
      const size_t start = lines[j].find_first_not_of(' ');
      if (start == std::string::npos || lines[j].compare(start, 2, "//") != 0) break;
      comment.insert(comment.begin(), lines[j].substr(start + 2));
    }
    return absl::StrJoin(comment, " ");
  }
  return "";
}

// config.proto's lines; none if it cannot be read.
std::vector<std::string> ConfigProtoLines() {
  std::ifstream in(absl::StrCat(RETRYD_SOURCE_DIR, "/proto/retryd/v1/config.proto"));
  if (!in.good()) return {};
  std::stringstream text;
  text << in.rdbuf();
  return absl::StrSplit(text.str(), '\n');
}

TEST(ConfigBoundsTest, TheCommentStatesTheSameFigures) {
  const std::vector<std::string> lines = ConfigProtoLines();
  ASSERT_FALSE(lines.empty());
  for (const BoundedField& f : BoundedFields()) {
    SCOPED_TRACE(f.Name());
    // One space between words, as a reader sees the wrapped comment.
    const std::string comment =
        std::regex_replace(CommentOf(lines, f.field()), std::regex("\\s+"), " ");
    ASSERT_FALSE(comment.empty()) << "no comment above the field";
    const std::string range = f.bounds->has_min()
                                  ? absl::StrCat(f.bounds->min(), "..", f.bounds->max())
                                  : absl::StrCat("..", f.bounds->max());
    EXPECT_THAT(comment, HasSubstr(range));
    if (f.bounds->has_default_value()) {
      EXPECT_THAT(comment, HasSubstr(absl::StrCat("Default ", f.bounds->default_value())));
    }
  }
}

// A string field's default is declared once too, in its (default_text)
// option: a config that leaves the field out takes it, and the comment says
// it.
TEST(ConfigBoundsTest, TheLoaderAndTheCommentUseTheDeclaredTextDefault) {
  const std::vector<std::string> lines = ConfigProtoLines();
  ASSERT_FALSE(lines.empty());
  absl::StatusOr<LoadedConfig> loaded =
      LoadConfigText("group_id: \"g\"\ninput_topics: \"in\"\nprocessor { simulate {} }\n", "t", {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  int checked = 0;
  const Descriptor* config = v1::Config::descriptor();
  for (int i = 0; i < config->field_count(); ++i) {
    const FieldDescriptor* field = config->field(i);
    if (!field->options().HasExtension(v1::default_text)) continue;
    SCOPED_TRACE(field->name());
    const std::string& declared = field->options().GetExtension(v1::default_text);
    EXPECT_EQ(loaded->proto.GetReflection()->GetString(loaded->proto, field), declared);
    const std::string comment =
        std::regex_replace(CommentOf(lines, field), std::regex("\\s+"), " ");
    EXPECT_THAT(comment, HasSubstr(absl::StrCat("Default \"", declared, "\"")));
    ++checked;
  }
  EXPECT_GE(checked, 1);  // listen_address.
}

// The config tables of docs/running.md ("Configuration") and
// docs/processors.md ("The gRPC processor") give a default in their second
// column; where it is a plain number, it is the declared one.
TEST(ConfigBoundsTest, TheOperatingGuideStatesTheSameDefaults) {
  std::stringstream text;
  for (const char* page : {"/docs/running.md", "/docs/processors.md"}) {
    std::ifstream in(absl::StrCat(RETRYD_SOURCE_DIR, page));
    ASSERT_TRUE(in.good()) << page;
    text << in.rdbuf();
  }
  const std::string doc = text.str();
  int checked = 0;
  for (const BoundedField& f : BoundedFields()) {
    if (!f.bounds->has_default_value()) continue;
    std::string name = f.Name();
    // The grpc processor's table names its fields without the prefix.
    if (absl::StartsWith(name, "processor.grpc.")) name = name.substr(15);
    std::smatch row;
    if (!std::regex_search(doc, row, std::regex("\\n\\| `" + name + "` \\| ([0-9]+) \\|"))) {
      continue;
    }
    SCOPED_TRACE(f.Name());
    EXPECT_EQ(row[1].str(), absl::StrCat(f.bounds->default_value()));
    ++checked;
  }
  EXPECT_GE(checked, 8);  // The tables have not been reworded out of reach.
}

// EngineOptions has initializers of its own (for embedders and tests that
// build it by hand); they must be what a config that leaves every field out
// loads to.
TEST(ConfigBoundsTest, TheEngineOptionDefaultsAgree) {
  absl::StatusOr<LoadedConfig> loaded = LoadConfigText(
      "group_id: \"g\"\ninput_topics: \"in\"\nretry { autoscale {} }\n"
      "processor { grpc { target: \"localhost:50061\" } }\n",
      "t", {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const engine::EngineOptions& e = loaded->engine;
  const engine::EngineOptions defaults;
  EXPECT_EQ(e.primary_threads, defaults.primary_threads);
  EXPECT_EQ(e.commit_interval_ms, defaults.commit_interval_ms);
  EXPECT_EQ(e.max_in_flight, defaults.max_in_flight);
  EXPECT_EQ(e.shutdown_timeout_ms, defaults.shutdown_timeout_ms);
  EXPECT_EQ(e.retry.max_threads, defaults.retry.max_threads);
  EXPECT_EQ(e.retry.max_attempts, defaults.retry.max_attempts);
  EXPECT_EQ(e.retry.lookahead, defaults.retry.lookahead);
  EXPECT_EQ(e.retry.backoff.initial_ms, defaults.retry.backoff.initial_ms);
  EXPECT_EQ(e.retry.backoff.max_ms, defaults.retry.backoff.max_ms);
  EXPECT_EQ(e.retry.backoff.multiplier, defaults.retry.backoff.multiplier);
  EXPECT_EQ(e.retry.autoscale.backlog_per_thread, defaults.retry.autoscale.backlog_per_thread);
  EXPECT_EQ(e.retry.autoscale.idle_exit_ms, defaults.retry.autoscale.idle_exit_ms);
  EXPECT_EQ(e.downstream.outage_after, defaults.downstream.outage_after);
  EXPECT_EQ(e.downstream.probe_initial_ms, defaults.downstream.probe_initial_ms);
  EXPECT_EQ(e.downstream.probe_max_ms, defaults.downstream.probe_max_ms);
  EXPECT_EQ(e.max_held_bytes, defaults.max_held_bytes);
  EXPECT_EQ(e.liveness_stall_ms, defaults.liveness_stall_ms);
  EXPECT_EQ(e.retry.threads, defaults.retry.threads);
  EXPECT_EQ(e.retry.min_threads, defaults.retry.min_threads);
  EXPECT_EQ(e.retry.seed, defaults.retry.seed);
  EXPECT_EQ(e.ordering, defaults.ordering);
}

// A tier's own defaults (RetryTier) are a tier's that leaves them out.
TEST(ConfigBoundsTest, TheRetryTierDefaultsAgree) {
  absl::StatusOr<LoadedConfig> loaded = LoadConfigText(
      "group_id: \"g\"\ninput_topics: \"in\"\n"
      "retry { tiers { topic: \"r1\" delay_ms: 1000 } }\nprocessor { simulate {} }\n",
      "t", {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->engine.retry.tiers.size(), 1u);
  const engine::RetryTier& tier = loaded->engine.retry.tiers[0];
  const engine::RetryTier defaults;
  EXPECT_EQ(tier.max_attempts, defaults.max_attempts);
  EXPECT_EQ(tier.threads, defaults.threads);
}

}  // namespace
}  // namespace retryd
