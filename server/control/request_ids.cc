#include "server/control/request_ids.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/error_reason.h"

namespace retryd::control {
namespace {

const google::protobuf::FieldDescriptor* RequestIdField(const google::protobuf::Message& m) {
  const google::protobuf::FieldDescriptor* field = m.GetDescriptor()->FindFieldByName("request_id");
  if (field == nullptr || field->is_repeated() ||
      field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_STRING) {
    return nullptr;
  }
  return field;
}

}  // namespace

absl::Status ValidateRequestId(absl::string_view id) {
  bool ok = id.size() == 36;
  for (size_t i = 0; ok && i < id.size(); ++i) {
    ok = (i == 8 || i == 13 || i == 18 || i == 23) ? id[i] == '-' : absl::ascii_isxdigit(id[i]);
  }
  if (ok) return absl::OkStatus();
  return WithReason(
      absl::InvalidArgumentError(absl::StrCat(
          "request_id: must be a UUID (8-4-4-4-12 hex digits, as uuidgen prints), got \"",
          id.substr(0, 64), id.size() > 64 ? "...\"" : "\"")),
      reason::kInvalidField);
}

std::string RequestIdOf(const google::protobuf::Message& request) {
  const google::protobuf::FieldDescriptor* field = RequestIdField(request);
  return field == nullptr ? std::string() : request.GetReflection()->GetString(request, field);
}

std::string RequestFingerprint(absl::string_view method, const google::protobuf::Message& request) {
  std::unique_ptr<google::protobuf::Message> copy(request.New());
  copy->CopyFrom(request);
  if (const google::protobuf::FieldDescriptor* field = RequestIdField(*copy); field != nullptr) {
    copy->GetReflection()->ClearField(copy.get(), field);
  }
  std::string out(method.data(), method.size());
  out.push_back('\0');
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    copy->SerializeToCodedStream(&coded);
  }
  return out;
}

absl::StatusOr<RequestIdCache::Begun> RequestIdCache::Begin(const std::string& id,
                                                            const std::string& fingerprint,
                                                            absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  for (;;) {
    auto it = entries_.find(id);
    if (it == entries_.end()) break;
    if (it->second.fingerprint != fingerprint) {
      return WithReason(
          absl::InvalidArgumentError(absl::StrCat(
              "request_id: ", id,
              " was used by a different request (another method or other fields); a retry must "
              "repeat the request exactly, a new request needs a new id")),
          reason::kRequestIdReused);
    }
    if (!it->second.running) return Begun{it->second.response};
    // The first call with this id still runs: its outcome is the answer.
    auto ended = [this, &id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      auto e = entries_.find(id);
      return e == entries_.end() || !e->second.running;
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&ended), deadline)) {
      return WithReason(absl::DeadlineExceededError(absl::StrCat(
                            "a call with request_id ", id,
                            " was still running when the deadline passed; retry to learn its "
                            "outcome")),
                        reason::kControlBusy);
    }
  }
  const absl::Time now = absl::Now();
  entries_[id] = Entry{fingerprint, /*running=*/true, std::string(), now};
  order_.emplace_back(id, now);
  EvictLocked(now);
  return Begun{};
}

void RequestIdCache::End(const std::string& id, const absl::Status& status, std::string response) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  if (!status.ok()) {
    entries_.erase(it);
    return;
  }
  it->second.running = false;
  it->second.response = std::move(response);
}

void RequestIdCache::EvictLocked(absl::Time now) {
  while (!order_.empty()) {
    auto it = entries_.find(order_.front().first);
    // An id forgotten (its call failed), or begun again since: its place is
    // further on, if anywhere.
    if (it == entries_.end() || it->second.since != order_.front().second) {
      order_.pop_front();
      continue;
    }
    const bool over_keep =
        entries_.size() > options_.keep && now - it->second.since >= options_.min_age;
    const bool over_max = entries_.size() > options_.max_ids && !it->second.running;
    if (!over_keep && !over_max) break;
    if (it->second.running) break;  // Never forget a call in progress.
    entries_.erase(it);
    order_.pop_front();
  }
}

size_t RequestIdCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace retryd::control
