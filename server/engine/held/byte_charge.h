// A record's bytes charged to its thread's budget (max_held_bytes) for as
// long as the thread holds the record: the charge goes with the record
// (moved, never copied) and is released when it is destroyed, on every path.
//
// The account is shared, so a charge carried by a delivery report that
// outlives the worker still releases into memory that exists. An account
// may count other units than bytes: the engine's keyed_sends_back counts
// records, one each (see WorkerContext).
//
// Thread-safety: a ByteCharge is used by one thread at a time; the account
// is an atomic that any thread may read.
#ifndef RETRYD_SERVER_ENGINE_HELD_BYTE_CHARGE_H_
#define RETRYD_SERVER_ENGINE_HELD_BYTE_CHARGE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "server/model/record.h"

namespace retryd::engine {

// What a record occupies for the budget: its key, value and headers.
inline int64_t RecordBytes(const std::optional<std::string>& key,
                           const std::optional<std::string>& value, const Headers& headers) {
  int64_t bytes = static_cast<int64_t>((key ? key->size() : 0) + (value ? value->size() : 0));
  for (const Header& h : headers) {
    bytes += static_cast<int64_t>(h.key.size() + (h.value ? h.value->size() : 0));
  }
  return bytes;
}
inline int64_t RecordBytes(const Record& r) { return RecordBytes(r.key, r.value, r.headers); }
inline int64_t RecordBytes(const OutgoingRecord& r) {
  return RecordBytes(r.key, r.value, r.headers);
}

class ByteCharge {
 public:
  ByteCharge() = default;  // Charges nothing.
  ByteCharge(std::shared_ptr<std::atomic<int64_t>> account, int64_t bytes)
      : account_(std::move(account)), bytes_(bytes) {
    account_->fetch_add(bytes_, std::memory_order_relaxed);
  }
  ~ByteCharge() { Release(); }

  ByteCharge(ByteCharge&& other) noexcept
      : account_(std::move(other.account_)), bytes_(std::exchange(other.bytes_, 0)) {}
  ByteCharge& operator=(ByteCharge&& other) noexcept {
    if (this != &other) {
      Release();
      account_ = std::move(other.account_);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  ByteCharge(const ByteCharge&) = delete;
  ByteCharge& operator=(const ByteCharge&) = delete;

  int64_t bytes() const { return bytes_; }
  bool charged() const { return account_ != nullptr; }

  // The same record in another form (a hand-off made of a held record):
  // the account moves by the difference only, so the bytes are never
  // counted twice nor let go of in between. Requires charged().
  void Resize(int64_t bytes) {
    account_->fetch_add(bytes - bytes_, std::memory_order_relaxed);
    bytes_ = bytes;
  }

 private:
  void Release() {
    if (account_ != nullptr) account_->fetch_sub(bytes_, std::memory_order_relaxed);
    account_.reset();
    bytes_ = 0;
  }

  std::shared_ptr<std::atomic<int64_t>> account_;
  int64_t bytes_ = 0;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_HELD_BYTE_CHARGE_H_
