#include "server/engine/handoff/producer_slot.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"

namespace retryd::engine {

ProducerSlot::ProducerSlot(std::unique_ptr<kafka::Producer> first, Factory make)
    : make_(std::move(make)), current_(std::move(first)) {}

std::shared_ptr<kafka::Producer> ProducerSlot::Current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

void ProducerSlot::NoteBroken(const std::shared_ptr<kafka::Producer>& broken) {
  absl::MutexLock lock(&mu_);
  for (const std::weak_ptr<kafka::Producer>& b : broken_) {
    if (b.lock() == broken) return;
  }
  broken_.push_back(broken);
}

absl::StatusOr<std::shared_ptr<kafka::Producer>> ProducerSlot::Replace(
    const std::shared_ptr<kafka::Producer>& broken) {
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](bool* making) { return !*making; }, &making_));
    if (current_ != broken) return current_;
    const absl::Time now = absl::Now();
    while (!made_.empty() && now - made_.front() > kReplacementWindow) made_.pop_front();
    if (static_cast<int>(made_.size()) >= kMaxReplacements) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the Kafka producer failed for good again after ", made_.size(), " replacements within ",
          absl::FormatDuration(kReplacementWindow), "; giving up"));
    }
    making_ = true;
  }
  absl::StatusOr<std::unique_ptr<kafka::Producer>> made = make_();
  absl::MutexLock lock(&mu_);
  making_ = false;
  if (!made.ok()) {
    return absl::Status(made.status().code(),
                        absl::StrCat("making a new Kafka producer: ", made.status().message()));
  }
  current_ = std::shared_ptr<kafka::Producer>(*std::move(made));
  made_.push_back(absl::Now());
  const int64_t n = replacements_.fetch_add(1, std::memory_order_relaxed) + 1;
  LogWarning("the Kafka producer failed for good (", broken->FatalError().message(),
             "); replaced it with a new one (replacement ", n, ")");
  return current_;
}

bool ProducerSlot::Recovering() const {
  absl::MutexLock lock(&mu_);
  broken_.erase(std::remove_if(broken_.begin(), broken_.end(),
                               [](const std::weak_ptr<kafka::Producer>& b) { return b.expired(); }),
                broken_.end());
  return !broken_.empty();
}

void ProducerSlot::Close(absl::Duration flush_timeout) {
  std::shared_ptr<kafka::Producer> current = Current();
  current->Close(flush_timeout);
}

}  // namespace retryd::engine
