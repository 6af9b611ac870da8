// The request_ids of mutating control calls (Google AIP-155): a call
// retried with the id of one that succeeded gets that call's response
// instead of being applied again.
//
// An id is remembered with a fingerprint of its request (the method and
// the request's bytes, request_id left out) and, once the call succeeded,
// its response. A call that failed applied nothing: its id is forgotten, so
// a retry runs again. While a call runs, a second call with its id waits
// for it (up to its own deadline) and then answers as a retry would.
//
// At least the `keep` (1,024) most recent ids are kept for at least
// `min_age` (10 minutes); older ones beyond that are forgotten, and never
// more than `max_ids` ids are kept (the oldest that ended go first).
//
// Thread-safe.
#ifndef RETRYD_SERVER_CONTROL_REQUEST_IDS_H_
#define RETRYD_SERVER_CONTROL_REQUEST_IDS_H_

#include <google/protobuf/message.h>

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace retryd::control {

// OK if `id` is a UUID (8-4-4-4-12 hex digits, either case); else
// INVALID_ARGUMENT naming the field.
absl::Status ValidateRequestId(absl::string_view id);

// The field `request_id` of `request`, or "" if it has none.
std::string RequestIdOf(const google::protobuf::Message& request);

// `method` and `request` without its request_id, as bytes that compare
// equal for equal requests.
std::string RequestFingerprint(absl::string_view method, const google::protobuf::Message& request);

class RequestIdCache {
 public:
  struct Options {
    size_t keep = 1024;
    absl::Duration min_age = absl::Minutes(10);
    size_t max_ids = 16384;
  };
  RequestIdCache() : RequestIdCache(Options()) {}
  explicit RequestIdCache(Options options) : options_(options) {}

  // What Begin() found: nothing (run the call, then End() it), or the
  // response of the call that succeeded with this id.
  struct Begun {
    std::optional<std::string> replay;  // Serialized response.
  };

  // Looks `id` up. INVALID_ARGUMENT (REQUEST_ID_REUSED) if it came with
  // another fingerprint; DEADLINE_EXCEEDED if a call with it was still
  // running at `deadline`. Blocks only while such a call runs. Without a
  // replay, the caller owns the id until it calls End(), which it must.
  absl::StatusOr<Begun> Begin(const std::string& id, const std::string& fingerprint,
                              absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  // The call Begin() let run ended: with `status`, and if OK the response
  // to replay (serialized).
  void End(const std::string& id, const absl::Status& status, std::string response)
      ABSL_LOCKS_EXCLUDED(mu_);

  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    std::string fingerprint;
    bool running = true;
    std::string response;
    absl::Time since;  // When it was begun.
  };
  void EvictLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;  // Guards the fields below.
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  // The ids in entries_ with their Entry::since, oldest first. A forgotten
  // id, or one begun again since, lingers until it reaches the front.
  std::deque<std::pair<std::string, absl::Time>> order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_REQUEST_IDS_H_
