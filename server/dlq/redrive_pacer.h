// How fast a redrive sends its records: a token bucket filled at the rate,
// holding at most `burst` tokens, in which a record keeps the token it took
// until it is acknowledged.
//
// A record lands on the broker after it is sent and before it is
// acknowledged. So of the records landing in any window of T seconds, those
// sent before the window were unacknowledged at its start, and those sent
// within it took tokens there then or filled in since: together at most
// burst + rate x T, however long records wait in the producer (for a
// topic's metadata, a slow broker) before they land. Time before the first
// record earns nothing: the clock starts when sending can start.
//
// Thread-compatible: its owner serializes the calls.
#ifndef RETRYD_SERVER_DLQ_REDRIVE_PACER_H_
#define RETRYD_SERVER_DLQ_REDRIVE_PACER_H_

#include <cstdint>

#include "absl/time/time.h"

namespace retryd::dlq {

class RedrivePacer {
 public:
  // `rate_per_s` > 0; `burst` at least 1 (less is taken as 1).
  RedrivePacer(double rate_per_s, double burst);

  // When the next record may be sent, as of `now`: `now` or earlier if at
  // once, absl::InfiniteFuture() if only after an acknowledgement.
  absl::Time NextSend(absl::Time now);
  // A record was sent at `now` (NextSend(now) <= now): it takes a token.
  void Sent(absl::Time now);
  // A record sent was acknowledged, or given up, at `now`.
  void Acknowledged(absl::Time now);

 private:
  // The tokens filled in since the last call, up to the bucket's room.
  void Fill(absl::Time now);

  const double rate_per_s_;
  const double burst_;
  double tokens_ = 1;  // The first record goes at once, the rest at the rate.
  int64_t unacknowledged_ = 0;
  absl::Time filled_ = absl::InfinitePast();  // Until the first record: none yet.
};

}  // namespace retryd::dlq

#endif  // RETRYD_SERVER_DLQ_REDRIVE_PACER_H_
