#include "server/dlq/redrive_pacer.h"

#include <algorithm>

namespace retryd::dlq {
namespace {

// Below a token by this much counts as a whole one: filling at the rate
// for the time NextSend() named may fall short by a rounding error.
constexpr double kRounding = 1e-9;

}  // namespace

RedrivePacer::RedrivePacer(double rate_per_s, double burst)
    : rate_per_s_(rate_per_s), burst_(std::max(1.0, burst)) {}

void RedrivePacer::Fill(absl::Time now) {
  if (filled_ == absl::InfinitePast()) {
    filled_ = now;
    return;
  }
  if (now <= filled_) return;
  // A record unacknowledged holds its token: the room is what they leave.
  const double room = burst_ - static_cast<double>(unacknowledged_);
  tokens_ = std::min(room, tokens_ + absl::ToDoubleSeconds(now - filled_) * rate_per_s_);
  filled_ = now;
}

absl::Time RedrivePacer::NextSend(absl::Time now) {
  Fill(now);
  if (tokens_ >= 1 - kRounding) return now;
  if (burst_ - static_cast<double>(unacknowledged_) < 1 - kRounding) return absl::InfiniteFuture();
  return now + absl::Seconds((1 - tokens_) / rate_per_s_);
}

void RedrivePacer::Sent(absl::Time now) {
  Fill(now);
  tokens_ = std::max(0.0, tokens_ - 1);
  ++unacknowledged_;
}

void RedrivePacer::Acknowledged(absl::Time now) {
  Fill(now);
  if (unacknowledged_ > 0) --unacknowledged_;
}

}  // namespace retryd::dlq
