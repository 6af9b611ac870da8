#include "server/config/config_loader.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"
#include "server/common/grpc_code_names.h"
#include "server/common/listen_address.h"
#include "server/common/read_file.h"
#include "server/common/secret_properties.h"

namespace retryd {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::TextFormat;
using ParseInfoTree = TextFormat::ParseInfoTree;

// A number field's (bounds) option (config.proto): its default and range,
// declared there once. Every field Number() reads has one with all three
// (ConfigBoundsTest checks), and max_ms-like fields at least a max.
const v1::NumberBounds& BoundsOf(const FieldDescriptor* field) {
  return field->options().GetExtension(v1::bounds);
}

bool InBounds(const FieldDescriptor* field, uint64_t value) {
  const v1::NumberBounds& bounds = BoundsOf(field);
  return value >= bounds.min() && value <= bounds.max();
}

// A config file is hand-written text; far past this it is the wrong file.
constexpr size_t kMaxConfigBytes = 16 << 20;
// A secret from kafka.properties_from_file: a password or a PEM key.
constexpr size_t kMaxSecretBytes = 1 << 20;
constexpr size_t kMaxTopicLength = 249;
constexpr uint64_t kMaxLatencyMs = 60'000;
constexpr uint64_t kDefaultMaxHeldBytes = uint64_t{64} << 20;
// liveness_stall_ms's default, unless its rule asks for more (config.proto).
constexpr uint64_t kDefaultLivenessStallMs = 120'000;
constexpr uint64_t kMinHeldBytes = 1024;
constexpr uint64_t kMaxHeldBytes = uint64_t{1} << 40;  // 1 TiB.
// kafka.create_topics: Kafka takes a replication factor as a 16-bit number;
// far past 100,000 partitions a topic is a typo. A retention below a second
// would delete records before retryd reads them.
constexpr uint64_t kMaxPartitions = 100'000;
constexpr uint64_t kMaxReplicationFactor = 32'767;
constexpr int64_t kMinRetentionMs = 1000;

std::string Quote(absl::string_view s) { return absl::StrCat("\"", absl::CHexEscape(s), "\""); }

// Collects errors as "<source>:<line>: <path>: <what>", one per problem.
class Errors {
 public:
  explicit Errors(absl::string_view source) : source_(source) {}

  // `line` is 0-based as protobuf reports it, or -1 when the file has none.
  void Add(int line, absl::string_view path, absl::string_view what) {
    std::string error =
        line >= 0 ? absl::StrCat(source_, ":", line + 1, ": ") : absl::StrCat(source_, ": ");
    if (!path.empty()) absl::StrAppend(&error, path, ": ");
    absl::StrAppend(&error, what);
    errors_.push_back(std::move(error));
  }

  bool empty() const { return errors_.empty(); }
  absl::Status ToStatus() const { return absl::InvalidArgumentError(absl::StrJoin(errors_, "\n")); }

 private:
  std::string source_;
  std::vector<std::string> errors_;
};

// One message of the parsed file: its type, where its fields were written
// (null when the message itself is absent) and its field path, e.g.
// "processor.simulate.rule[1]".
class Node {
 public:
  Node(const Descriptor* descriptor, const ParseInfoTree* tree, std::string path)
      : descriptor_(descriptor), tree_(tree), path_(std::move(path)) {}

  const FieldDescriptor* Field(absl::string_view name) const {
    const FieldDescriptor* field = descriptor_->FindFieldByName(std::string(name));
    if (field == nullptr) {
      // A typo in this file, not in the user's: fail loudly in tests.
      std::abort();
    }
    return field;
  }

  // 0-based line where the field (its index-th value, if repeated) was
  // written, or -1.
  int Line(absl::string_view name, int index = -1) const {
    if (tree_ == nullptr) return -1;
    const FieldDescriptor* field = Field(name);
    if (!field->is_repeated()) return tree_->GetLocation(field, -1).line;
    // Values given as a list (`f: ["a", "b"]`) share one location, recorded
    // for the first: fall back to the closest earlier value.
    for (int i = std::max(index, 0); i >= 0; --i) {
      const int line = tree_->GetLocation(field, i).line;
      if (line >= 0) return line;
    }
    return -1;
  }
  bool Written(absl::string_view name) const { return Line(name) >= 0; }

  std::string Path(absl::string_view name, int index = -1) const {
    std::string path = path_.empty() ? std::string(name) : absl::StrCat(path_, ".", name);
    if (index >= 0) absl::StrAppend(&path, "[", index, "]");
    return path;
  }

  Node Child(absl::string_view name, int index = -1) const {
    const FieldDescriptor* field = Field(name);
    const ParseInfoTree* child =
        tree_ == nullptr ? nullptr
                         : tree_->GetTreeForNested(field, field->is_repeated() ? index : -1);
    return Node(field->message_type(), child, Path(name, index));
  }

  const std::string& path() const { return path_; }

 private:
  const Descriptor* descriptor_;
  const ParseInfoTree* tree_;
  std::string path_;
};

// Collects parser errors with their positions.
class ParseErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  struct Entry {
    int line;
    int column;
    std::string message;
  };

  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    entries_.push_back({line, column, message});
  }

  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

// Turns protobuf's `Unknown enumeration value of "X" for field "f".`, for an
// enum field of Config itself (`ordering`), into "f: unknown value "X"
// (one of: A, B, C)"; nullopt for any other message. Only each number's
// current name is offered: the deprecated aliases (the names before the
// enum prefix) are still accepted, but not suggested.
std::optional<std::pair<std::string, std::string>> DescribeUnknownEnumValue(
    absl::string_view message) {
  if (!absl::ConsumePrefix(&message, "Unknown enumeration value of \"")) return std::nullopt;
  const size_t value_end = message.find('"');
  if (value_end == absl::string_view::npos) return std::nullopt;
  const absl::string_view value = message.substr(0, value_end);
  absl::string_view rest = message.substr(value_end);
  if (!absl::ConsumePrefix(&rest, "\" for field \"")) return std::nullopt;
  const std::string field_name(rest.substr(0, rest.find('"')));
  const FieldDescriptor* field = v1::Config::descriptor()->FindFieldByName(field_name);
  if (field == nullptr || field->enum_type() == nullptr) return std::nullopt;
  std::vector<std::string> names;
  for (int i = 0; i < field->enum_type()->value_count(); ++i) {
    const google::protobuf::EnumValueDescriptor* value = field->enum_type()->value(i);
    if (value->number() != 0 && !value->options().deprecated()) {
      names.push_back(value->name());
    }
  }
  return std::make_pair(field_name, absl::StrCat("unknown value ", Quote(value),
                                                 " (one of: ", absl::StrJoin(names, ", "), ")"));
}

// Field path of the message type `full_name` inside Config ("" for Config
// itself), or nullopt if no field has that type.
std::optional<std::string> PathToType(absl::string_view full_name) {
  struct Item {
    const Descriptor* descriptor;
    std::string path;
  };
  std::deque<Item> queue = {{v1::Config::descriptor(), ""}};
  std::set<const Descriptor*> seen;
  while (!queue.empty()) {
    Item item = std::move(queue.front());
    queue.pop_front();
    if (item.descriptor->full_name() == full_name) return item.path;
    if (!seen.insert(item.descriptor).second) continue;
    for (int i = 0; i < item.descriptor->field_count(); ++i) {
      const FieldDescriptor* field = item.descriptor->field(i);
      if (field->message_type() == nullptr) continue;
      queue.push_back({field->message_type(), item.path.empty()
                                                  ? field->name()
                                                  : absl::StrCat(item.path, ".", field->name())});
    }
  }
  return std::nullopt;
}

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const bool same = absl::ascii_tolower(a[i - 1]) == absl::ascii_tolower(b[j - 1]);
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Turns protobuf's `Message type "retryd.v1.X" has no field named "y".` into
// "<path of X>.<closest field>: unknown field "y"; did you mean ...". Other
// parser messages are kept, with the column added.
std::pair<std::string, std::string> DescribeParseError(const ParseErrorCollector::Entry& entry) {
  if (auto described = DescribeUnknownEnumValue(entry.message)) return *std::move(described);
  absl::string_view message = entry.message;
  absl::string_view type_name;
  absl::string_view field_name;
  if (absl::ConsumePrefix(&message, "Message type \"")) {
    const size_t type_end = message.find('"');
    absl::string_view rest = message.substr(type_end == absl::string_view::npos ? 0 : type_end);
    if (type_end != absl::string_view::npos &&
        absl::ConsumePrefix(&rest, "\" has no field named \"")) {
      type_name = message.substr(0, type_end);
      field_name = rest.substr(0, rest.find('"'));
    }
  }
  const Descriptor* type =
      type_name.empty()
          ? nullptr
          : v1::Config::descriptor()->file()->pool()->FindMessageTypeByName(std::string(type_name));
  std::optional<std::string> type_path = type == nullptr ? std::nullopt : PathToType(type_name);
  if (!type_path.has_value()) {
    return {"", absl::StrCat(entry.message, " (column ", entry.column + 1, ")")};
  }
  const FieldDescriptor* closest = nullptr;
  size_t best = SIZE_MAX;
  for (int i = 0; i < type->field_count(); ++i) {
    const size_t distance = EditDistance(field_name, type->field(i)->name());
    if (distance < best) {
      best = distance;
      closest = type->field(i);
    }
  }
  const std::string prefix = type_path->empty() ? "" : absl::StrCat(*type_path, ".");
  if (closest != nullptr && best <= std::max<size_t>(2, field_name.size() / 3)) {
    return {absl::StrCat(prefix, closest->name()),
            absl::StrCat("unknown field ", Quote(field_name), "; did you mean ",
                         Quote(closest->name()), "?")};
  }
  std::vector<std::string> names;
  for (int i = 0; i < type->field_count(); ++i) names.push_back(type->field(i)->name());
  return {type_path->empty() ? std::string(field_name) : absl::StrCat(prefix, field_name),
          absl::StrCat("unknown field ", Quote(field_name), " in ", type->full_name(),
                       " (known fields: ", absl::StrJoin(names, ", "), ")")};
}

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

uint64_t GetUnsigned(const Message& message, const FieldDescriptor* field) {
  const Reflection* reflection = message.GetReflection();
  return field->cpp_type() == FieldDescriptor::CPPTYPE_UINT32
             ? reflection->GetUInt32(message, field)
             : reflection->GetUInt64(message, field);
}

void SetUnsigned(Message& message, const FieldDescriptor* field, uint64_t value) {
  const Reflection* reflection = message.GetReflection();
  if (field->cpp_type() == FieldDescriptor::CPPTYPE_UINT32) {
    reflection->SetUInt32(&message, field, static_cast<uint32_t>(value));
  } else {
    reflection->SetUInt64(&message, field, value);
  }
}

// 0-based line of the map entry with `key` in `map_field` of `message`, or
// -1. The reflection view of a parsed map lists entries in file order.
int MapEntryLine(const Node& node, const Message& message, absl::string_view map_field,
                 absl::string_view key) {
  const FieldDescriptor* field = node.Field(map_field);
  const Reflection* reflection = message.GetReflection();
  int line = -1;
  for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
    const Message& entry = reflection->GetRepeatedMessage(message, field, i);
    const FieldDescriptor* key_field = entry.GetDescriptor()->map_key();
    if (entry.GetReflection()->GetString(entry, key_field) == key) line = node.Line(map_field, i);
  }
  return line;
}

// Validates a parsed config in place, filling in defaults as it goes.
class Validator {
 public:
  Validator(absl::string_view source, const ParseInfoTree& tree, bool bootstrap_overridden)
      : errors_(source),
        root_(v1::Config::descriptor(), &tree, ""),
        bootstrap_overridden_(bootstrap_overridden) {}

  // Returns the resolved Kafka properties, or the errors found.
  absl::StatusOr<std::map<std::string, std::string>> Run(v1::Config& config) {
    CheckListenAddress(config);
    std::map<std::string, std::string> properties = CheckKafka(*config.mutable_kafka());
    CheckTopics(config);
    Number(config, root_, "primary_threads");
    CheckOrdering(config);
    CheckRetry(config);
    CheckProcessor(config);
    Number(config, root_, "commit_interval_ms");
    Number(config, root_, "max_in_flight");
    CheckMaxHeldBytes(config);
    Number(config, root_, "shutdown_timeout_ms");
    CheckLivenessStall(config);
    CheckControl(config);
    Number(*config.mutable_embedded(), root_.Child("embedded"), "partitions");
    CheckDeadLetterDialects(config);
    if (!errors_.empty()) return errors_.ToStatus();
    return properties;
  }

 private:
  void Error(const Node& node, absl::string_view field, absl::string_view what, int index = -1) {
    errors_.Add(node.Line(field, index), node.Path(field, index), what);
  }

  // A number field with its default and range in its (bounds) option
  // (config.proto): if the file leaves it out it takes the default,
  // otherwise it must lie in [min, max]. A plain proto3 0 cannot be told
  // apart from "not set", but the parse tree can tell whether the file
  // wrote it.
  void Number(Message& message, const Node& node, absl::string_view name) {
    const FieldDescriptor* field = node.Field(name);
    const v1::NumberBounds& bounds = BoundsOf(field);
    const uint64_t fallback = bounds.default_value();
    const uint64_t low = bounds.min();
    const uint64_t high = bounds.max();
    const uint64_t value = GetUnsigned(message, field);
    const bool set = field->has_presence() ? message.GetReflection()->HasField(message, field)
                                           : value != 0 || node.Written(name);
    if (!set) {
      SetUnsigned(message, field, fallback);
      return;
    }
    if (value < low || value > high) {
      Error(node, name, absl::StrCat("must be between ", low, " and ", high, ", got ", value));
    }
  }

  // Optional, so an explicit 0 (no limit) differs from leaving it out.
  void CheckMaxHeldBytes(v1::Config& config) {
    if (!config.has_max_held_bytes()) {
      config.set_max_held_bytes(kDefaultMaxHeldBytes);
      return;
    }
    const uint64_t value = config.max_held_bytes();
    if (value != 0 && (value < kMinHeldBytes || value > kMaxHeldBytes)) {
      Error(root_, "max_held_bytes",
            absl::StrCat("must be 0 (no limit) or between ", kMinHeldBytes, " and ", kMaxHeldBytes,
                         ", got ", value));
    }
  }

  // The longest a processor call may take, in ms, as the config says:
  // nullopt when the processor section is unusable or out of its range
  // (reported already).
  static std::optional<uint64_t> LongestCallMs(const v1::Config& config) {
    switch (config.processor().kind_case()) {
      case v1::ProcessorConfig::kGrpc: {
        const uint64_t deadline_ms = config.processor().grpc().deadline_ms();
        if (!InBounds(v1::GrpcProcessorConfig::descriptor()->FindFieldByName("deadline_ms"),
                      deadline_ms)) {
          return std::nullopt;
        }
        return deadline_ms;
      }
      case v1::ProcessorConfig::kSimulate: {
        const v1::SimulateConfig& simulate = config.processor().simulate();
        const uint64_t latency_ms = std::max(simulate.latency_ms(), simulate.latency_max_ms());
        if (latency_ms > kMaxLatencyMs) return std::nullopt;
        return latency_ms;
      }
      case v1::ProcessorConfig::KIND_NOT_SET:
        break;
    }
    return std::nullopt;
  }

  // liveness_stall_ms: above the longest processor call plus
  // shutdown_timeout_ms, since one turn of a thread's loop may wait for
  // both; its default grows with them. Checked after both are.
  void CheckLivenessStall(v1::Config& config) {
    std::optional<uint64_t> call_ms = LongestCallMs(config);
    const bool shutdown_ok =
        InBounds(root_.Field("shutdown_timeout_ms"), config.shutdown_timeout_ms());
    // A bound that is itself wrong was reported already; no rule from it.
    if (!shutdown_ok) call_ms.reset();
    const uint64_t longest_call_ms = call_ms.value_or(0);
    const uint64_t floor_ms = longest_call_ms + config.shutdown_timeout_ms();
    const bool written = config.liveness_stall_ms() != 0 || root_.Written("liveness_stall_ms");
    if (!written) {
      config.set_liveness_stall_ms(std::max<uint64_t>(kDefaultLivenessStallMs, floor_ms + 10'000));
      return;
    }
    const uint64_t value = config.liveness_stall_ms();
    const uint64_t high = BoundsOf(root_.Field("liveness_stall_ms")).max();
    if (value > high) {
      Error(root_, "liveness_stall_ms", absl::StrCat("must be at most ", high, ", got ", value));
    } else if (call_ms.has_value() && value <= floor_ms) {
      Error(root_, "liveness_stall_ms",
            absl::StrCat("must exceed the longest processor call (",
                         config.processor().has_grpc() ? "processor.grpc.deadline_ms"
                                                       : "processor.simulate's latency",
                         ", ", longest_call_ms, ") plus shutdown_timeout_ms (",
                         config.shutdown_timeout_ms(), "), ", floor_ms,
                         ": one turn of a thread's loop may wait that long, and liveness would "
                         "restart retryd for it; got ",
                         value));
    }
  }

  // The control section's addresses. The rest of it (token and TLS files)
  // is read and checked where it is used (control_config.h).
  void CheckControl(const v1::Config& config) {
    const v1::ControlConfig& control = config.control();
    const Node node = root_.Child("control");
    const std::string& health = control.health_listen_address();
    if (!health.empty()) {
      if (auto problem = ListenAddressProblem(health)) {
        Error(node, "health_listen_address", *problem);
      } else if (health == config.listen_address() && !absl::EndsWith(health, ":0")) {
        Error(node, "health_listen_address",
              absl::StrCat("must differ from listen_address (both are ", health,
                           "): it is a listener of its own"));
      }
    } else if (!control.tls_cert_file().empty()) {
      Error(node, "health_listen_address",
            "required with TLS on the control API (control.tls_cert_file): the kubelet's gRPC "
            "probes cannot speak TLS, so health needs a plaintext listener of its own, e.g. "
            "health_listen_address: \"0.0.0.0:50052\"");
    }
  }

  void CheckListenAddress(v1::Config& config) {
    if (config.listen_address().empty()) config.set_listen_address("127.0.0.1:50051");
    if (auto problem = ListenAddressProblem(config.listen_address())) {
      Error(root_, "listen_address", *problem);
    }
    // Empty: no metrics listener.
    if (config.metrics_address().empty()) return;
    if (absl::StartsWith(config.metrics_address(), "unix:")) {
      Error(root_, "metrics_address",
            "must be host:port (e.g. \"127.0.0.1:9464\"); unix: sockets are not supported");
    } else if (auto problem = ListenAddressProblem(config.metrics_address())) {
      Error(root_, "metrics_address", *problem);
    }
  }

  // Checks the kafka section; returns the librdkafka properties of its three
  // maps, resolved (values read from the environment and from files).
  std::map<std::string, std::string> CheckKafka(const v1::KafkaConfig& kafka) {
    const Node node = root_.Child("kafka");
    CheckBootstrapServers(node, kafka);
    KafkaProperties properties;
    CheckPlainProperties(node, kafka, properties);
    CheckPropertiesFromEnv(node, kafka, properties);
    CheckPropertiesFromFile(node, kafka, properties);
    if (kafka.has_create_topics()) {
      CheckCreateTopics(kafka.create_topics(), node.Child("create_topics"));
    }
    return std::move(properties.resolved);
  }

  // kafka.create_topics: every field may be left out (0: decided at start,
  // from the cluster); one that is written must lie in its range.
  void CheckCreateTopics(const v1::CreateTopicsConfig& create, const Node& node) {
    for (auto [field, high] : {std::pair<absl::string_view, uint64_t>{"partitions", kMaxPartitions},
                               {"replication_factor", kMaxReplicationFactor}}) {
      const uint64_t value = GetUnsigned(create, node.Field(field));
      if ((value != 0 || node.Written(field)) && (value < 1 || value > high)) {
        Error(node, field,
              absl::StrCat("must be between 1 and ", high, ", got ", value,
                           " (leave it out for the default)"));
      }
    }
    if (create.has_retention_ms() && create.retention_ms() != -1 &&
        create.retention_ms() < kMinRetentionMs) {
      Error(
          node, "retention_ms",
          absl::StrCat("must be -1 (keep records forever) or at least ", kMinRetentionMs, ", got ",
                       create.retention_ms(), " (leave it out for the broker's retention)"));
    }
  }

  void CheckBootstrapServers(const Node& node, const v1::KafkaConfig& kafka) {
    if (kafka.bootstrap_servers().empty()) return;
    for (absl::string_view server : absl::StrSplit(kafka.bootstrap_servers(), ',')) {
      if (absl::StripAsciiWhitespace(server).empty()) {
        const std::string what =
            "has an empty entry; use a comma-separated list of host:port, or leave it empty "
            "for the embedded broker";
        if (bootstrap_overridden_) {
          errors_.Add(-1, "kafka.bootstrap_servers (set by --bootstrap_servers)", what);
        } else {
          Error(node, "bootstrap_servers", what);
        }
        return;
      }
    }
  }

  // The properties of the kafka section's three maps, as they are checked.
  struct KafkaProperties {
    std::map<std::string, std::string> resolved;  // Property -> value.
    std::map<std::string, std::string> where;     // Property -> map that set it.
  };

  // Checks a property name in `map_field`; false if it is unusable.
  bool CheckPropertyName(const Node& node, const v1::KafkaConfig& kafka,
                         absl::string_view map_field, const std::string& key,
                         KafkaProperties& properties) {
    const std::string path = absl::StrCat(node.Path(map_field), "[", Quote(key), "]");
    const int line = MapEntryLine(node, kafka, map_field, key);
    if (key.empty()) {
      errors_.Add(line, path, "the librdkafka property name must not be empty");
      return false;
    }
    if (key == "bootstrap.servers") {
      errors_.Add(line, path, "set the brokers with kafka.bootstrap_servers instead");
      return false;
    }
    if (key == "group.id") {
      errors_.Add(line, path, "set the consumer group with group_id instead");
      return false;
    }
    if (auto [it, inserted] = properties.where.emplace(key, node.Path(map_field)); !inserted) {
      errors_.Add(line, path,
                  absl::StrCat("also set in ", it->second, "; set each property in one place"));
      return false;
    }
    return true;
  }

  void CheckPlainProperties(const Node& node, const v1::KafkaConfig& kafka,
                            KafkaProperties& properties) {
    // Sorted, so that errors come in a stable order.
    const std::map<std::string, std::string> plain(kafka.properties().begin(),
                                                   kafka.properties().end());
    for (const auto& [key, value] : plain) {
      if (!CheckPropertyName(node, kafka, "properties", key, properties)) continue;
      if (IsSecretProperty(key)) {
        // The value is left out of the message: it is the secret.
        errors_.Add(MapEntryLine(node, kafka, "properties", key),
                    absl::StrCat(node.Path("properties"), "[", Quote(key), "]"),
                    absl::StrCat("holds a secret, which kafka.properties would show to every "
                                 "GetStatus caller; name an environment variable in "
                                 "kafka.properties_from_env (e.g. properties_from_env { key: ",
                                 Quote(key),
                                 " value: \"KAFKA_SECRET\" }) or a file in "
                                 "kafka.properties_from_file instead"));
        continue;
      }
      properties.resolved[key] = value;
    }
  }

  void CheckPropertiesFromEnv(const Node& node, const v1::KafkaConfig& kafka,
                              KafkaProperties& properties) {
    const std::map<std::string, std::string> from_env(kafka.properties_from_env().begin(),
                                                      kafka.properties_from_env().end());
    for (const auto& [key, variable] : from_env) {
      if (!CheckPropertyName(node, kafka, "properties_from_env", key, properties)) continue;
      const std::string path = absl::StrCat(node.Path("properties_from_env"), "[", Quote(key), "]");
      const int line = MapEntryLine(node, kafka, "properties_from_env", key);
      if (variable.empty()) {
        errors_.Add(line, path, "the environment variable name must not be empty");
        continue;
      }
      const char* value = std::getenv(variable.c_str());
      if (value == nullptr) {
        errors_.Add(line, path,
                    absl::StrCat("environment variable ", Quote(variable), " is not set"));
      } else if (*value == '\0') {
        errors_.Add(line, path,
                    absl::StrCat("environment variable ", Quote(variable), " is empty"));
      } else {
        properties.resolved[key] = value;
      }
    }
  }

  void CheckPropertiesFromFile(const Node& node, const v1::KafkaConfig& kafka,
                               KafkaProperties& properties) {
    const std::map<std::string, std::string> from_file(kafka.properties_from_file().begin(),
                                                       kafka.properties_from_file().end());
    for (const auto& [key, file] : from_file) {
      if (!CheckPropertyName(node, kafka, "properties_from_file", key, properties)) continue;
      const std::string path =
          absl::StrCat(node.Path("properties_from_file"), "[", Quote(key), "]");
      const int line = MapEntryLine(node, kafka, "properties_from_file", key);
      if (file.empty()) {
        errors_.Add(line, path, "the file path must not be empty");
        continue;
      }
      absl::StatusOr<std::string> contents = ReadFileToString(file, kMaxSecretBytes);
      if (!contents.ok()) {
        errors_.Add(line, path, contents.status().message());
        continue;
      }
      absl::string_view value = *contents;
      if (!absl::ConsumeSuffix(&value, "\r\n")) absl::ConsumeSuffix(&value, "\n");
      properties.resolved[key] = std::string(value);
    }
  }

  // Records that `name` plays `role` (a field path); reports a topic with two
  // roles.
  void ClaimTopic(const std::string& name, const std::string& role, int line) {
    auto [it, inserted] = topic_roles_.emplace(name, role);
    if (inserted) return;
    if (absl::StartsWith(role, "input_topics") && absl::StartsWith(it->second, "input_topics")) {
      errors_.Add(line, role,
                  absl::StrCat(Quote(name), " is listed twice (also ", it->second, ")"));
      return;
    }
    errors_.Add(line, role,
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
    Error(node, field, *problem, index);
    return false;
  }

  // Fills a topic that defaults to "<input><suffix>" and validates it.
  void DefaultedTopic(const v1::Config& config, const Node& node, absl::string_view field,
                      std::string* topic, absl::string_view suffix) {
    std::string derived;
    if (topic->empty()) {
      if (config.input_topics_size() == 0) return;  // Already reported.
      if (config.input_topics_size() > 1) {
        Error(
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

  void CheckTopics(v1::Config& config) {
    if (config.group_id().empty()) {
      Error(root_, "group_id", "required: the consumer group of the primary threads");
    }
    if (config.input_topics_size() == 0) {
      Error(root_, "input_topics",
            "at least one input topic is required, e.g. input_topics: \"orders\"");
    }
    for (int i = 0; i < config.input_topics_size(); ++i) {
      if (CheckTopicName(root_, "input_topics", config.input_topics(i), i)) {
        ClaimTopic(config.input_topics(i), root_.Path("input_topics", i),
                   root_.Line("input_topics", i));
      }
    }
    const Node retry_node = root_.Child("retry");
    if (config.retry().tiers_size() == 0) {
      DefaultedTopic(config, retry_node, "topic", config.mutable_retry()->mutable_topic(),
                     ".retry");
    } else if (!config.retry().topic().empty()) {
      Error(retry_node, "topic",
            "leave it out with tiers: the first tier's topic is where failed records go");
    }
    for (int i = 0; i < config.retry().tiers_size(); ++i) {
      const v1::RetryTier& tier = config.retry().tiers(i);
      const Node tier_node = retry_node.Child("tiers", i);
      if (tier.topic().empty()) {
        Error(tier_node, "topic", "required: the tier's retry topic");
      } else if (CheckTopicName(tier_node, "topic", tier.topic())) {
        ClaimTopic(tier.topic(), tier_node.Path("topic"), tier_node.Line("topic"));
      }
    }
    DefaultedTopic(config, root_, "dead_letter_topic", config.mutable_dead_letter_topic(), ".dlq");
    if (!config.output_topic().empty() &&
        CheckTopicName(root_, "output_topic", config.output_topic())) {
      ClaimTopic(config.output_topic(), "output_topic", root_.Line("output_topic"));
    }
  }

  // Resolves `ordering` and the older `in_order` into one mode, written back
  // into both (the effective config): ordering set, in_order true exactly
  // when it is ORDERING_IN_ORDER.
  void CheckOrdering(v1::Config& config) {
    const bool ordering_set = config.ordering() != v1::ORDERING_UNSPECIFIED;
    const bool in_order_set = config.in_order() || root_.Written("in_order");
    if (ordering_set && !v1::Ordering_IsValid(config.ordering())) {
      // Text format refuses unknown names; a number slips through.
      Error(root_, "ordering",
            absl::StrCat("must be ORDERING_UNORDERED, ORDERING_IN_ORDER or ORDERING_KEY, got ",
                         static_cast<int>(config.ordering())));
      return;
    }
    if (ordering_set && in_order_set &&
        (config.ordering() == v1::ORDERING_IN_ORDER) != config.in_order()) {
      Error(root_, "ordering",
            absl::StrCat("ordering: ", v1::Ordering_Name(config.ordering()),
                         " disagrees with in_order: ", config.in_order() ? "true" : "false",
                         "; in_order is the older spelling of ordering: ORDERING_IN_ORDER, set "
                         "only "
                         "ordering"));
      return;
    }
    if (!ordering_set)
      config.set_ordering(config.in_order() ? v1::ORDERING_IN_ORDER : v1::ORDERING_UNORDERED);
    config.set_in_order(config.ordering() == v1::ORDERING_IN_ORDER);
  }

  // Each a dialect, each once.
  void CheckDeadLetterDialects(const v1::Config& config) {
    constexpr absl::string_view kDialects =
        "DEAD_LETTER_DIALECT_SPRING, DEAD_LETTER_DIALECT_STREAMS or DEAD_LETTER_DIALECT_KIP1191";
    std::map<int, int> seen;  // Value -> its first index.
    for (int i = 0; i < config.dead_letter_dialects_size(); ++i) {
      const int value = config.dead_letter_dialects(i);
      if (value == v1::DEAD_LETTER_DIALECT_UNSPECIFIED || !v1::DeadLetterDialect_IsValid(value)) {
        // Text format refuses unknown names; a number slips through.
        Error(root_, "dead_letter_dialects",
              absl::StrCat("must be ", kDialects, ", got ",
                           value == v1::DEAD_LETTER_DIALECT_UNSPECIFIED
                               ? "DEAD_LETTER_DIALECT_UNSPECIFIED"
                               : absl::StrCat(value)),
              i);
        continue;
      }
      auto [first, inserted] = seen.emplace(value, i);
      if (!inserted) {
        Error(root_, "dead_letter_dialects",
              absl::StrCat(v1::DeadLetterDialect_Name(config.dead_letter_dialects(i)),
                           " is listed twice (also dead_letter_dialects[", first->second,
                           "]); list each dialect once"),
              i);
      }
    }
  }

  void CheckRetry(v1::Config& config) {
    v1::RetryConfig& retry = *config.mutable_retry();
    const Node node = root_.Child("retry");
    Number(retry, node, "max_threads");
    const bool in_order = config.ordering() == v1::ORDERING_IN_ORDER;
    const bool min_ok = CheckMinThreads(config, retry, node);
    if (!retry.has_threads()) {
      retry.set_threads(in_order ? 0 : std::max<uint32_t>(1, retry.min_threads()));
    } else if (in_order && retry.threads() > 0) {
      // Named as the file spells it.
      const bool old_spelling = !root_.Written("ordering");
      Error(node, "threads",
            absl::StrCat(
                old_spelling ? "in_order: true" : "ordering: ORDERING_IN_ORDER",
                " keeps strict order per partition, which excludes retry threads (got "
                "threads: ",
                retry.threads(), "); set threads: 0 or ",
                old_spelling ? "in_order: false" : "ordering: ORDERING_KEY or ORDERING_UNORDERED"));
    } else if (retry.threads() > retry.max_threads()) {
      Error(node, "threads",
            absl::StrCat("must be at most max_threads (", retry.max_threads(), "), got ",
                         retry.threads()));
    } else if (min_ok && retry.threads() < retry.min_threads()) {
      Error(node, "threads",
            absl::StrCat("must be at least min_threads (", retry.min_threads(), "), got ",
                         retry.threads()));
    }
    if (retry.has_autoscale()) {
      v1::AutoscaleConfig& autoscale = *retry.mutable_autoscale();
      const Node autoscale_node = node.Child("autoscale");
      Number(autoscale, autoscale_node, "backlog_per_thread");
      Number(autoscale, autoscale_node, "idle_exit_ms");
    }
    Number(retry, node, "max_attempts");
    Number(retry, node, "lookahead");
    CheckTiers(config, retry, node, min_ok);

    v1::BackoffConfig& backoff = *retry.mutable_backoff();
    const Node backoff_node = node.Child("backoff");
    Number(backoff, backoff_node, "initial_ms");
    if (backoff.multiplier() == 0 && !backoff_node.Written("multiplier")) {
      backoff.set_multiplier(2.0);
    } else if (!(backoff.multiplier() >= 1 && backoff.multiplier() <= 100)) {
      Error(backoff_node, "multiplier",
            absl::StrCat("must be between 1 and 100, got ", backoff.multiplier()));
    }
    const uint64_t initial = backoff.initial_ms();
    const bool initial_ok = InBounds(backoff_node.Field("initial_ms"), initial);
    const uint64_t max_max_ms = BoundsOf(backoff_node.Field("max_ms")).max();
    if (backoff.max_ms() == 0 && !backoff_node.Written("max_ms")) {
      backoff.set_max_ms(initial_ok ? std::max<uint64_t>(60'000, initial) : 60'000);
    } else if (backoff.max_ms() < 1 || backoff.max_ms() > max_max_ms) {
      Error(backoff_node, "max_ms",
            absl::StrCat("must be between 1 and ", max_max_ms, ", got ", backoff.max_ms()));
    } else if (initial_ok && backoff.max_ms() < initial) {
      Error(backoff_node, "max_ms",
            absl::StrCat("must be at least initial_ms (", initial, "), got ", backoff.max_ms()));
    }
  }

  // Checks retry.tiers (their topics are checked with the others), after
  // max_attempts, threads, min_threads and max_threads.
  void CheckTiers(const v1::Config& config, v1::RetryConfig& retry, const Node& node, bool min_ok) {
    if (retry.tiers_size() == 0) return;
    auto first_line = [&] { return node.Line("tiers", 0); };
    if (retry.tiers_size() > engine::kMaxRetryTiers) {
      errors_.Add(
          first_line(), node.Path("tiers"),
          absl::StrCat("at most ", engine::kMaxRetryTiers, " tiers, got ", retry.tiers_size()));
    }
    if (node.Written("max_attempts")) {
      Error(node, "max_attempts",
            "leave it out with tiers: the attempts are 1 + the sum of the tiers' max_attempts");
    }
    if (node.Written("backoff")) {
      Error(node, "backoff", "leave it out with tiers: each tier waits its own delay_ms");
    }
    if (config.ordering() == v1::ORDERING_KEY) {
      errors_.Add(first_line(), node.Path("tiers"),
                  "ORDERING_KEY with retry tiers is not supported yet (a key's records could be "
                  "spread over several tiers); use ORDERING_UNORDERED, or one retry topic");
    }
    uint64_t attempts = 1;
    for (int i = 0; i < retry.tiers_size(); ++i) {
      v1::RetryTier& tier = *retry.mutable_tiers(i);
      const Node tier_node = node.Child("tiers", i);
      Number(tier, tier_node, "max_attempts");
      attempts += tier.max_attempts();
      Number(tier, tier_node, "delay_ms");
      if (tier.delay_ms() == 0) {
        Error(tier_node, "delay_ms",
              absl::StrCat("required: how long, in milliseconds, a record waits in this tier "
                           "before each attempt, 1..",
                           BoundsOf(tier_node.Field("delay_ms")).max()));
      }
      if (!tier.has_threads()) continue;
      if (config.ordering() == v1::ORDERING_IN_ORDER && tier.threads() > 0) {
        Error(tier_node, "threads",
              absl::StrCat("in-order mode keeps strict order per partition, which excludes "
                           "retry threads (got threads: ",
                           tier.threads(), "); set threads: 0 or leave it out"));
      } else if (tier.threads() > retry.max_threads()) {
        Error(tier_node, "threads",
              absl::StrCat("must be at most retry.max_threads (", retry.max_threads(), "), got ",
                           tier.threads()));
      } else if (min_ok && tier.threads() < retry.min_threads()) {
        Error(tier_node, "threads",
              absl::StrCat("must be at least retry.min_threads (", retry.min_threads(), "), got ",
                           tier.threads()));
      }
    }
    if (attempts > 1000) {
      errors_.Add(first_line(), node.Path("tiers"),
                  absl::StrCat("1 + the tiers' max_attempts must be at most 1000, got ", attempts));
    }
    // The effective config says what runs: the attempts in all.
    retry.set_max_attempts(static_cast<uint32_t>(std::min<uint64_t>(attempts, 1000)));
  }

  // Checks retry.min_threads (after max_threads); false if it is unusable.
  bool CheckMinThreads(const v1::Config& config, v1::RetryConfig& retry, const Node& node) {
    if (retry.min_threads() == 0) return true;
    if (config.in_order()) {
      Error(node, "min_threads",
            absl::StrCat("in-order mode keeps strict order per partition, which excludes retry "
                         "threads (got min_threads: ",
                         retry.min_threads(),
                         "); set min_threads: 0 or another ordering (ORDERING_UNORDERED or "
                         "ORDERING_KEY)"));
      return false;
    }
    if (retry.min_threads() > retry.max_threads()) {
      Error(node, "min_threads",
            absl::StrCat("must be at most max_threads (", retry.max_threads(), "), got ",
                         retry.min_threads()));
      return false;
    }
    return true;
  }

  void CheckProcessor(v1::Config& config) {
    constexpr absl::string_view kExample =
        "e.g. processor { simulate {} } or processor { grpc { target: \"localhost:50061\" } }";
    if (!config.has_processor()) {
      Error(root_, "processor", absl::StrCat("required: say what processes records, ", kExample));
      return;
    }
    const Node node = root_.Child("processor");
    switch (config.processor().kind_case()) {
      case v1::ProcessorConfig::kSimulate:
        CheckSimulate(config.processor().simulate(), node.Child("simulate"));
        return;
      case v1::ProcessorConfig::kGrpc:
        CheckGrpc(*config.mutable_processor()->mutable_grpc(), node.Child("grpc"));
        return;
      case v1::ProcessorConfig::KIND_NOT_SET:
        break;
    }
    errors_.Add(root_.Line("processor"), "processor",
                absl::StrCat("choose a processor kind, ", kExample));
  }

  void CheckGrpc(v1::GrpcProcessorConfig& grpc, const Node& node) {
    if (grpc.target().empty()) {
      Error(node, "target",
            "required: the downstream's gRPC address, e.g. target: \"localhost:50061\"");
    }
    Number(grpc, node, "deadline_ms");
    Number(grpc, node, "max_concurrent_calls");
    Number(grpc, node, "outage_after");
    Number(grpc, node, "probe_initial_ms");
    const uint64_t initial = grpc.probe_initial_ms();
    const bool initial_ok = InBounds(node.Field("probe_initial_ms"), initial);
    const uint64_t max_probe_max_ms = BoundsOf(node.Field("probe_max_ms")).max();
    if (grpc.probe_max_ms() == 0 && !node.Written("probe_max_ms")) {
      grpc.set_probe_max_ms(initial_ok ? std::max<uint32_t>(30'000, grpc.probe_initial_ms())
                                       : 30'000);
    } else if (grpc.probe_max_ms() < 1 || grpc.probe_max_ms() > max_probe_max_ms) {
      Error(
          node, "probe_max_ms",
          absl::StrCat("must be between 1 and ", max_probe_max_ms, ", got ", grpc.probe_max_ms()));
    } else if (initial_ok && grpc.probe_max_ms() < initial) {
      Error(node, "probe_max_ms",
            absl::StrCat("must be at least probe_initial_ms (", initial, "), got ",
                         grpc.probe_max_ms()));
    }
    Number(grpc, node, "max_response_bytes");
    Number(grpc, node, "health_check_interval_ms");
    if (!grpc.token_file().empty() && !grpc.token_env().empty()) {
      Error(node, "token_env", "set either token_file or token_env, not both");
    }
    if (grpc.has_tls() && grpc.tls().cert_file().empty() != grpc.tls().key_file().empty()) {
      const Node tls = node.Child("tls");
      Error(tls, grpc.tls().cert_file().empty() ? "cert_file" : "key_file",
            "mutual TLS needs both cert_file and key_file; set both or neither");
    }
    // Sorted, so that errors come in a stable order.
    const std::map<std::string, v1::StatusOutcome> status_map(grpc.status_map().begin(),
                                                              grpc.status_map().end());
    for (const auto& [code, outcome] : status_map) {
      const std::string path = absl::StrCat(node.Path("status_map"), "[", Quote(code), "]");
      const int line = MapEntryLine(node, grpc, "status_map", code);
      const std::optional<int> number = GrpcCodeNumber(std::string_view(code));
      if (!number.has_value()) {
        errors_.Add(line, path,
                    "not a gRPC status code name; use the name in capitals, e.g. \"NOT_FOUND\"");
      } else if (*number == 0) {
        errors_.Add(line, path, "OK always means success and cannot be changed");
      } else if (outcome != v1::STATUS_OUTCOME_SUCCESS && outcome != v1::STATUS_OUTCOME_RETRIABLE &&
                 outcome != v1::STATUS_OUTCOME_DEAD_LETTER) {
        errors_.Add(line, path,
                    "say what the code means: STATUS_OUTCOME_SUCCESS, STATUS_OUTCOME_RETRIABLE or "
                    "STATUS_OUTCOME_DEAD_LETTER");
      }
    }
  }

  void CheckSimulate(const v1::SimulateConfig& simulate, const Node& node) {
    for (absl::string_view field : {"latency_ms", "latency_min_ms", "latency_max_ms"}) {
      const uint64_t value = GetUnsigned(simulate, node.Field(field));
      if (value > kMaxLatencyMs) {
        Error(node, field, absl::StrCat("must be at most ", kMaxLatencyMs, ", got ", value));
      }
    }
    const bool has_range = simulate.latency_min_ms() > 0 || simulate.latency_max_ms() > 0;
    if (simulate.latency_ms() > 0 && has_range) {
      Error(node, "latency_ms",
            "set either a fixed latency_ms or the range latency_min_ms..latency_max_ms, not both");
    } else if (simulate.latency_min_ms() > simulate.latency_max_ms()) {
      Error(node, "latency_min_ms",
            absl::StrCat("must not exceed latency_max_ms (", simulate.latency_max_ms(), "), got ",
                         simulate.latency_min_ms()));
    }
    bool rates_ok = true;
    for (absl::string_view field : {"transient_failure_rate", "permanent_failure_rate"}) {
      const double rate = simulate.GetReflection()->GetDouble(simulate, node.Field(field));
      if (!(rate >= 0 && rate <= 1)) {
        Error(node, field, absl::StrCat("must be between 0 and 1, got ", rate));
        rates_ok = false;
      }
    }
    if (rates_ok && simulate.transient_failure_rate() + simulate.permanent_failure_rate() > 1) {
      Error(
          node, "transient_failure_rate",
          absl::StrCat("together with permanent_failure_rate (", simulate.permanent_failure_rate(),
                       ") must not exceed 1, got ", simulate.transient_failure_rate()));
    }
    for (int i = 0; i < simulate.rule_size(); ++i) {
      const v1::SimulateConfig::Rule& rule = simulate.rule(i);
      const Node rule_node = node.Child("rule", i);
      if (rule.key_prefix().empty()) {
        errors_.Add(
            rule_node.Line("key_prefix") >= 0 ? rule_node.Line("key_prefix") : node.Line("rule", i),
            rule_node.Path("key_prefix"),
            "required: the key prefix this rule matches, e.g. key_prefix: \"perm-\"");
      }
      if (rule.permanent() && rule.fail_attempts() > 0) {
        Error(rule_node, "fail_attempts",
              "a rule either fails permanently or fails its first fail_attempts attempts; set "
              "permanent: true or fail_attempts, not both");
      }
    }
  }

  Errors errors_;
  const Node root_;
  const bool bootstrap_overridden_;
  std::map<std::string, std::string> topic_roles_;  // Topic -> field path.
};

// `dialect` as the validator left it: never UNSPECIFIED.
engine::DeadLetterDialect ToEngineDialect(int dialect) {
  switch (dialect) {
    case v1::DEAD_LETTER_DIALECT_STREAMS:
      return engine::DeadLetterDialect::kStreams;
    case v1::DEAD_LETTER_DIALECT_KIP1191:
      return engine::DeadLetterDialect::kKip1191;
    default:
      return engine::DeadLetterDialect::kSpring;
  }
}

// `ordering` as the validator left it: never ORDERING_UNSPECIFIED.
engine::Ordering ToEngineOrdering(v1::Ordering ordering) {
  switch (ordering) {
    case v1::ORDERING_IN_ORDER:
      return engine::Ordering::kInOrder;
    case v1::ORDERING_KEY:
      return engine::Ordering::kKey;
    default:
      return engine::Ordering::kUnordered;
  }
}

engine::EngineOptions ToEngineOptions(const v1::Config& config,
                                      std::map<std::string, std::string> properties) {
  engine::EngineOptions engine;
  engine.bootstrap_servers = config.kafka().bootstrap_servers();
  engine.kafka_properties = std::move(properties);
  engine.group_id = config.group_id();
  engine.input_topics.assign(config.input_topics().begin(), config.input_topics().end());
  engine.output_topic = config.output_topic();
  engine.dead_letter_topic = config.dead_letter_topic();
  engine.primary_threads = static_cast<int>(config.primary_threads());
  engine.ordering = ToEngineOrdering(config.ordering());
  const v1::RetryConfig& retry = config.retry();
  engine.retry.topic = retry.topic();
  engine.retry.threads = static_cast<int>(retry.threads());
  engine.retry.max_threads = static_cast<int>(retry.max_threads());
  engine.retry.min_threads = static_cast<int>(retry.min_threads());
  engine.retry.autoscale.enabled = retry.has_autoscale();
  engine.retry.autoscale.backlog_per_thread =
      static_cast<int64_t>(retry.autoscale().backlog_per_thread());
  engine.retry.autoscale.idle_exit_ms = static_cast<int64_t>(retry.autoscale().idle_exit_ms());
  engine.retry.max_attempts = static_cast<int>(retry.max_attempts());
  engine.retry.lookahead = static_cast<int>(retry.lookahead());
  engine.retry.backoff.initial_ms = static_cast<int64_t>(retry.backoff().initial_ms());
  engine.retry.backoff.multiplier = retry.backoff().multiplier();
  engine.retry.backoff.max_ms = static_cast<int64_t>(retry.backoff().max_ms());
  engine.retry.seed = retry.seed();
  for (const v1::RetryTier& tier : retry.tiers()) {
    engine.retry.tiers.push_back(
        engine::RetryTier{.topic = tier.topic(),
                          .delay_ms = static_cast<int64_t>(tier.delay_ms()),
                          .max_attempts = static_cast<int>(tier.max_attempts()),
                          .threads = tier.has_threads() ? static_cast<int>(tier.threads()) : -1});
  }
  engine.commit_interval_ms = static_cast<int>(config.commit_interval_ms());
  engine.max_in_flight = static_cast<int>(config.max_in_flight());
  engine.max_held_bytes = static_cast<int64_t>(config.max_held_bytes());
  engine.shutdown_timeout_ms = static_cast<int>(config.shutdown_timeout_ms());
  engine.liveness_stall_ms = static_cast<int64_t>(config.liveness_stall_ms());
  for (int dialect : config.dead_letter_dialects()) {
    engine.dead_letter_dialects.push_back(ToEngineDialect(dialect));
  }
  if (config.processor().has_grpc()) {
    // Zero stands for the default (DownstreamOptions), as in config.proto.
    const v1::GrpcProcessorConfig& grpc = config.processor().grpc();
    engine::DownstreamOptions& d = engine.downstream;
    if (grpc.outage_after() != 0) d.outage_after = static_cast<int>(grpc.outage_after());
    if (grpc.probe_initial_ms() != 0) d.probe_initial_ms = grpc.probe_initial_ms();
    if (grpc.probe_max_ms() != 0) d.probe_max_ms = grpc.probe_max_ms();
    d.probe_max_ms = std::max(d.probe_max_ms, d.probe_initial_ms);
  }
  return engine;
}

}  // namespace

absl::StatusOr<LoadedConfig> LoadConfigText(std::string_view text, std::string_view source_name,
                                            const ConfigOverrides& overrides) {
  LoadedConfig loaded;
  ParseInfoTree tree;
  ParseErrorCollector collector;
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(std::string(text), &loaded.proto)) {
    Errors errors(absl::string_view(source_name.data(), source_name.size()));
    for (const ParseErrorCollector::Entry& entry : collector.entries()) {
      auto [path, what] = DescribeParseError(entry);
      errors.Add(entry.line, path, what);
    }
    if (errors.empty()) errors.Add(-1, "", "not a valid text-format retryd.v1.Config");
    return errors.ToStatus();
  }

  if (overrides.bootstrap_servers.has_value()) {
    loaded.proto.mutable_kafka()->set_bootstrap_servers(*overrides.bootstrap_servers);
  }
  Validator validator(absl::string_view(source_name.data(), source_name.size()), tree,
                      overrides.bootstrap_servers.has_value());
  absl::StatusOr<std::map<std::string, std::string>> properties = validator.Run(loaded.proto);
  if (!properties.ok()) return properties.status();
  loaded.engine = ToEngineOptions(loaded.proto, *std::move(properties));
  return loaded;
}

absl::StatusOr<LoadedConfig> LoadConfigFile(const std::string& path,
                                            const ConfigOverrides& overrides) {
  absl::StatusOr<std::string> text = ReadFileToString(path, kMaxConfigBytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("config file: ", text.status().message()));
  }
  return LoadConfigText(*text, path, overrides);
}

}  // namespace retryd
