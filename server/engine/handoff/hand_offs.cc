#include "server/engine/handoff/hand_offs.h"

#include <algorithm>
#include <charconv>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"
#include "server/engine/handoff/dead_letter_fit.h"

namespace retryd::engine {
namespace {

constexpr absl::Duration kRedoDelay = absl::Seconds(1);
// The smallest dead-letter record tried when a fitted one is refused too:
// below any broker's limit, room for the retryd headers, the key and a
// glimpse of the value.
constexpr size_t kMinimalDeadLetterBytes = 16 * 1024;

// The answer to an operator's dead-letter request whose hand-off was
// dropped because its partition moved.
absl::Status PartitionGivenUp(int thread_id) {
  return absl::AbortedError(absl::StrCat(
      "thread ", thread_id,
      " gave up the record's partition before the dead-letter topic acknowledged it; its next "
      "owner reads it again"));
}

// Drops the headers an output record's OutputHeaders replace (as SetHeader
// would, in one pass).
void DropOutputHeaders(Headers& headers) {
  std::erase_if(headers, [](const Header& h) {
    return h.key == kOriginalTopicHeader || h.key == kOriginalPartitionHeader ||
           h.key == kOriginalOffsetHeader || h.key == kAttemptHeader;
  });
}

// `value` in decimal into `buffer`, as a view of it.
template <size_t N>
std::string_view Decimal(int64_t value, char (&buffer)[N]) {
  static_assert(N >= 20, "an int64 takes up to 20 characters");
  return {buffer, static_cast<size_t>(std::to_chars(buffer, buffer + N, value).ptr - buffer)};
}

// HandOffs::OnFailed, a hand-off no one sends again: forgotten, its
// request (if any) answered.
void DropFailed(HandOffMailbox& mailbox, const HandOff& hand_off, const absl::Status& status) {
  {
    absl::MutexLock lock(&mailbox.redo_mu);
    mailbox.ForgetFailedHandOff(hand_off);
  }
  if (hand_off.requested_by != nullptr) {
    hand_off.requested_by->Answer(absl::IsInternal(status) ? status
                                                           : PartitionGivenUp(mailbox.id()));
  }
  mailbox.HandOffDone();
}

// HandOffs::OnFailed, a hand-off that can never get through: the thread
// fails.
void FailForGood(HandOffMailbox& mailbox, const HandOff& hand_off, const absl::Status& status) {
  const std::string reason =
      absl::StrCat(HandOffKindName(hand_off.kind), " hand-off of ", hand_off.origin.original_topic,
                   "/", hand_off.origin.original_partition, "@", hand_off.origin.original_offset,
                   " to ", hand_off.record.topic, " failed for good: ", status.message());
  if (!mailbox.has_failed()) {
    LogError("thread ", mailbox.id(), ": ", reason, "; the thread fails");
  }
  if (hand_off.requested_by != nullptr) {
    hand_off.requested_by->Answer(absl::InternalError(reason));
  }
  mailbox.Fail(reason);
  mailbox.HandOffDone();
}

// HandOffs::OnFailed, any other failure: the hand-off waits in the
// mailbox's redo queue to be sent again (a refused one at once, replaced
// by DrainRedo; others after kRedoDelay).
void SendAgain(HandOffMailbox& mailbox, HandOff hand_off, const absl::Status& status) {
  const HandOffKind kind = hand_off.kind;
  const std::string topic = hand_off.record.topic;
  const absl::Time now = absl::Now();
  Redo redo;
  redo.not_before = now + kRedoDelay;
  if (absl::IsInvalidArgument(status)) {
    redo.refused = std::string(status.message());
    redo.not_before = now;  // Nothing to wait for: the record changes.
  }
  if (!mailbox.has_failed()) mailbox.SetLastError(std::string(status.message()));
  size_t waiting = 0;
  {
    absl::MutexLock lock(&mailbox.redo_mu);
    if (!hand_off.failed_before) {
      hand_off.failed_before = true;
      mailbox.failed_hand_offs[hand_off.tracker].insert(hand_off.offset);
    }
    redo.hand_off = std::move(hand_off);
    mailbox.redo.push_back(std::move(redo));
    waiting = mailbox.redo.size();
  }
  // A refused record is logged when it is replaced (DrainRedo).
  if (int64_t held_back = 0;
      !absl::IsInvalidArgument(status) && mailbox.redo_log.Allow(now, &held_back)) {
    LogWarning("thread ", mailbox.id(), ": ", HandOffKindName(kind), " hand-off to ", topic,
               " failed (", status.message(), "); sending it again (", waiting,
               " waiting to be sent again)", LogThrottle::HeldBackNote(held_back));
  }
}

}  // namespace

const char* HandOffKindName(HandOffKind kind) {
  switch (kind) {
    case HandOffKind::kOutput:
      return "output";
    case HandOffKind::kRetry:
      return "retry";
    case HandOffKind::kDeadLetter:
      return "dead-letter";
    case HandOffKind::kHandBack:
      return "hand-back";
    case HandOffKind::kFollow:
      return "follow";
  }
  return "unknown";
}

int HandOffMailbox::FailedHandOffs(const std::shared_ptr<CompletionTracker>& tracker) const {
  absl::MutexLock lock(&redo_mu);
  auto it = failed_hand_offs.find(tracker);
  return it == failed_hand_offs.end() ? 0 : static_cast<int>(it->second.size());
}

void HandOffMailbox::ForgetFailedHandOff(const HandOff& hand_off) {
  if (!hand_off.failed_before) return;
  auto it = failed_hand_offs.find(hand_off.tracker);
  if (it == failed_hand_offs.end()) return;
  if (auto at = it->second.find(hand_off.offset); at != it->second.end()) it->second.erase(at);
  if (it->second.empty()) failed_hand_offs.erase(it);
}

void HandOffMailbox::Fail(std::string reason) {
  {
    absl::MutexLock lock(&redo_mu);
    if (failed) return;
    failed = true;
  }
  SetLastError(std::move(reason));
}

bool HandOffMailbox::has_failed() const {
  absl::MutexLock lock(&redo_mu);
  return failed;
}

void HandOffMailbox::Done(std::unique_ptr<EmittedHandOff> emitted) {
  // Released now, as they would be when freed.
  emitted->hand_off.charge = ByteCharge();
  emitted->hand_off.sent_back = ByteCharge();
  absl::MutexLock lock(&done_mu);
  done.push_back(std::move(emitted));
  any_done.store(true, std::memory_order_relaxed);
}

void EmittedHandOff::Delivered(std::unique_ptr<kafka::Delivery> self, absl::Status status,
                               int32_t partition, int64_t offset) {
  if (!status.ok()) {
    HandOffs::OnFailed(mailbox, std::move(hand_off), status);
  } else {
    if (hand_off.parks) {
      mailbox->parking->Placed(hand_off.parks->key, hand_off.parks->offset, partition, offset);
    }
    HandOffs::OnDelivered(mailbox, hand_off);
  }
  // `self` is this object: the mailbox keeps it, for the worker to free,
  // without its reference to the mailbox (a mailbox holding itself through
  // its own done list would never be freed).
  const std::shared_ptr<HandOffMailbox> to = std::move(mailbox);
  to->Done(std::unique_ptr<EmittedHandOff>(static_cast<EmittedHandOff*>(self.release())));
}

OutputHeaders::OutputHeaders(const HandOff& hand_off) {
  if (hand_off.kind != HandOffKind::kOutput) return;
  const RetryMetadata& origin = hand_off.origin;
  refs_ = {
      kafka::HeaderRef{kOriginalTopicHeader, origin.original_topic},
      kafka::HeaderRef{kOriginalPartitionHeader, Decimal(origin.original_partition, partition_)},
      kafka::HeaderRef{kOriginalOffsetHeader, Decimal(origin.original_offset, offset_)},
      kafka::HeaderRef{kAttemptHeader, Decimal(origin.attempt, attempt_)}};
  count_ = refs_.size();
}

int64_t OutputHeaders::bytes() const {
  int64_t bytes = 0;
  for (const kafka::HeaderRef& h : refs()) bytes += h.key.size() + (h.value ? h.value->size() : 0);
  return bytes;
}

RetryMetadata OriginOf(const HeldRecord& held) {
  RetryMetadata m;
  m.attempt = held.attempt;
  m.first_failure_ms = held.first_failure_ms;
  m.original_topic = held.record.topic;
  m.original_partition = held.record.partition;
  m.original_offset = held.record.offset;
  m.original_timestamp_ms = held.record.timestamp_ms;
  m.original_timestamp_type = held.record.timestamp_type;
  m.error = held.last_error;
  m.first_error = held.first_error;
  m.error_reason = held.last_error_reason;
  return m;
}

std::optional<ParkedRecord> ParkedRecordOf(ThreadRole role, const HeldRecord& held) {
  if (role != ThreadRole::kRetry || !held.record.key.has_value()) return std::nullopt;
  return ParkedRecord{KeyOf(held.record), held.record.offset, absl::InfinitePast()};
}

HandOff OutputHandOff(ThreadRole role, HeldRecord& held, Outcome& outcome,
                      const std::string& output_topic) {
  HandOff h;
  h.kind = HandOffKind::kOutput;
  h.offset = held.source_offset;
  h.origin = OriginOf(held);
  h.release = ParkedRecordOf(role, held);
  // The record is done with once it is handed off: its fields move into
  // the output record rather than being copied.
  h.record.topic = output_topic;
  h.record.key = std::move(held.record.key);
  // What the processor made of it, else the input as it was.
  h.record.value = outcome.value ? std::move(*outcome.value) : std::move(held.record.value);
  h.record.headers = outcome.headers ? std::move(*outcome.headers) : std::move(held.record.headers);
  DropOutputHeaders(h.record.headers);  // OutputHeaders adds them when it is produced.
  h.charge = std::move(held.charge);    // The bytes moved; so does their charge.
  return h;
}

HandOff RetryHandOff(HeldRecord held, HandOffKind kind, const std::string& retry_topic) {
  HandOff h;
  h.origin = OriginOf(held);
  h.origin.due_ms = held.due_ms;
  h.record.topic = retry_topic;
  h.record.key = std::move(held.record.key);
  h.record.value = std::move(held.record.value);
  h.record.headers = WithRetryHeaders(held.record.headers, h.origin);
  h.kind = kind;
  h.offset = held.source_offset;
  h.charge = std::move(held.charge);
  return h;
}

HandOff DeadLetterHandOff(ThreadRole role, const HeldRecord& held, std::string reason,
                          const std::string& dead_letter_topic, const DeadLetterStamp& stamp) {
  HandOff h;
  h.release = ParkedRecordOf(role, held);
  h.origin = OriginOf(held);
  h.origin.due_ms = stamp.ms;
  h.origin.error = std::move(reason);
  if (h.origin.first_failure_ms == 0) {
    // Its first failure is this one.
    h.origin.first_failure_ms = h.origin.due_ms;
    h.origin.first_error = h.origin.error;
  }
  h.record.topic = dead_letter_topic;
  h.record.key = held.record.key;
  h.record.value = held.record.value;
  h.record.headers = WithDeadLetterHeaders(held.record.headers, h.origin, stamp);
  h.kind = HandOffKind::kDeadLetter;
  h.offset = held.source_offset;
  return h;
}

HandOff MalformedDeadLetterHandOff(const Record& record, const std::string& error,
                                   const std::string& dead_letter_topic,
                                   const DeadLetterStamp& stamp) {
  HandOff h;
  h.record.topic = dead_letter_topic;
  h.record.key = record.key;
  h.record.value = record.value;
  h.record.headers = record.headers;  // Kept as found, for whoever investigates.
  SetHeader(h.record.headers, kErrorHeader, TruncateUtf8(error, kMaxErrorBytes));
  // A reason found there was that of an earlier failure, not of this one.
  SetHeader(h.record.headers, kErrorReasonHeader, "");
  SetHeader(h.record.headers, kDeadLetteredMsHeader, absl::StrCat(stamp.ms));
  SetHeader(h.record.headers, kDeadLetteredByHeader, stamp.by);
  h.kind = HandOffKind::kDeadLetter;
  h.offset = record.offset;
  // Its own retry headers cannot be trusted: it is described by where it was read.
  h.origin.due_ms = stamp.ms;
  h.origin.first_failure_ms = h.origin.due_ms;
  h.origin.first_error = error;
  h.origin.original_topic = record.topic;
  h.origin.original_partition = record.partition;
  h.origin.original_offset = record.offset;
  h.origin.original_timestamp_ms = record.timestamp_ms;
  h.origin.original_timestamp_type = record.timestamp_type;
  h.origin.error = error;
  return h;
}

HandOff FittedDeadLetter(HandOff hand_off, const std::string& why,
                         const std::string& dead_letter_topic, size_t max_message_bytes,
                         const DeadLetterStamp& stamp, std::span<const DeadLetterDialect> dialects,
                         std::string_view group) {
  const size_t refused_size = RecordWireSize(hand_off.record);
  // Its timestamp (a dead letter's, with the Streams dialect on) may be
  // what the topic refused: a fitted form is stamped by the producer, which
  // changes the record even where its size stays.
  const bool restamped = hand_off.record.timestamp_ms > 0;
  if (hand_off.unfitted == nullptr) {
    // The first refusal: the record to fit is the dead-letter record the
    // source deserves, with the refusal added to why it got there.
    RetryMetadata meta = hand_off.origin;
    // A retry record carries the attempt to make next; the DLQ, those made.
    if (hand_off.kind == HandOffKind::kRetry || hand_off.kind == HandOffKind::kHandBack ||
        hand_off.kind == HandOffKind::kFollow) {
      meta.attempt -= 1;
    }
    meta.due_ms = stamp.ms;
    const std::string refused =
        absl::StrCat(HandOffKindName(hand_off.kind), " record refused by Kafka (", why, ")");
    meta.error = meta.error.empty() ? refused : absl::StrCat(meta.error, "; ", refused);
    if (meta.first_failure_ms == 0) {
      meta.first_failure_ms = meta.due_ms;
      meta.first_error = meta.error;
    }
    auto unfitted = std::make_shared<OutgoingRecord>();
    unfitted->topic = dead_letter_topic;
    unfitted->key = std::move(hand_off.record.key);
    unfitted->value = std::move(hand_off.record.value);
    unfitted->headers = WithDialectHeaders(
        WithDeadLetterHeaders(hand_off.record.headers, meta, stamp), dialects, meta, group);
    hand_off.unfitted = std::move(unfitted);
  }
  hand_off.fit += 1;
  hand_off.record = FitDeadLetter(*hand_off.unfitted, max_message_bytes);
  // Under the client's limit already, yet refused (the broker's limit is
  // lower): only the smallest form can help.
  if (hand_off.fit < 2 && !restamped && RecordWireSize(hand_off.record) >= refused_size) {
    hand_off.fit = 2;
  }
  if (hand_off.fit >= 2) {
    hand_off.record = FitDeadLetter(*hand_off.unfitted, kMinimalDeadLetterBytes);
  }
  hand_off.kind = HandOffKind::kDeadLetter;
  return hand_off;
}

void AddDialectHeaders(HandOff& hand_off, std::span<const DeadLetterDialect> dialects,
                       std::string_view group) {
  if (dialects.empty()) return;
  hand_off.record.headers =
      WithDialectHeaders(hand_off.record.headers, dialects, hand_off.origin, group);
  hand_off.record.timestamp_ms = DeadLetterTimestampMs(dialects, hand_off.origin);
}

HandOffs::HandOffs(const EngineOptions& options, std::shared_ptr<kafka::Producer> producer,
                   std::shared_ptr<HandOffMailbox> mailbox)
    : options_(options), producer_(std::move(producer)), mailbox_(std::move(mailbox)) {}

void HandOffs::Emit(HandOff&& hand_off, bool in_order) {
  mailbox_->in_flight.fetch_add(1, std::memory_order_relaxed);
  hand_off.in_order = in_order;
  // Every dead-letter record gets them here, whichever path made it; a
  // fitted one got them when it was fitted. Sent again, it gets the same.
  if (hand_off.kind == HandOffKind::kDeadLetter && hand_off.fit == 0) {
    AddDialectHeaders(hand_off, options_.dead_letter_dialects, options_.group_id);
  }
  // The delivery owns the hand-off, so its value outlives the delivery
  // report: Kafka reads it in place rather than holding a copy.
  std::unique_ptr<EmittedHandOff> emitted;
  if (spare_.empty()) {
    emitted = std::make_unique<EmittedHandOff>(mailbox_, std::move(hand_off));
  } else {
    emitted = std::move(spare_.back());
    spare_.pop_back();
    emitted->mailbox = mailbox_;
    emitted->hand_off = std::move(hand_off);
  }
  HandOff& h = emitted->hand_off;
  // Views into `h`, which stays where it is from here on.
  const OutputHeaders more_headers(h);
  // A hand-off made of a held record carries its charge: resized, never
  // charged twice while the held record is still alive.
  const int64_t bytes = RecordBytes(h.record) + more_headers.bytes();
  if (h.charge.charged()) {
    h.charge.Resize(bytes);
  } else {
    h.charge = Charge(bytes);
  }
  std::unique_ptr<kafka::Delivery> delivery = std::move(emitted);
  absl::Status status = producer_->ProduceInPlace(h.record, more_headers.refs(), delivery);
  // Refused: `delivery` is still ours, and `h` in it.
  if (!status.ok()) OnFailed(mailbox_, std::move(h), status);
}

void HandOffs::FreeDone(RecordBuffers& buffers) {
  if (!mailbox_->any_done.load(std::memory_order_relaxed)) return;
  {
    absl::MutexLock lock(&mailbox_->done_mu);
    mailbox_->any_done.store(false, std::memory_order_relaxed);
    if (mailbox_->done.empty()) return;
    freeing_.swap(mailbox_->done);
  }
  for (std::unique_ptr<EmittedHandOff>& emitted : freeing_) {
    buffers.Recycle(emitted->hand_off.record);
    buffers.Recycle(emitted->hand_off.origin.original_topic);
    if (spare_.size() >= kMaxSpare) continue;
    // Emptied now: nothing it refers to (its partition's tracker, a parked
    // key, a request) outlives the hand-off.
    emitted->hand_off = HandOff();
    spare_.push_back(std::move(emitted));
  }
  freeing_.clear();
}

ByteCharge HandOffs::Charge(int64_t bytes) const {
  // Aliasing the mailbox: a charge in a delivery report keeps it alive.
  return ByteCharge(std::shared_ptr<std::atomic<int64_t>>(mailbox_, &mailbox_->held_bytes), bytes);
}

void HandOffs::OnDelivered(const std::shared_ptr<HandOffMailbox>& mailbox, HandOff& hand_off) {
  // Only a hand-off that failed before, or one emitted in order (which may
  // have overtaken a failed one), has anything to do with the redo state.
  if (hand_off.failed_before || hand_off.in_order) {
    absl::MutexLock lock(&mailbox->redo_mu);
    auto it = mailbox->failed_hand_offs.find(hand_off.tracker);
    // In order, an earlier record of the partition waits to be sent again:
    // this one got in ahead of it. It is sent again after it, so the output
    // reads as a replay from the failed record on, as after a restart,
    // rather than with the failed record moved behind later ones.
    if (hand_off.in_order && it != mailbox->failed_hand_offs.end() && !it->second.empty() &&
        *it->second.begin() < hand_off.offset && !hand_off.tracker->abandoned()) {
      if (!hand_off.failed_before) {
        hand_off.failed_before = true;
        it->second.insert(hand_off.offset);
      }
      mailbox->redo.push_back({std::move(hand_off), absl::Now(), {}});
      return;
    }
    mailbox->ForgetFailedHandOff(hand_off);
  }
  if (hand_off.release) {
    mailbox->parking->Release(hand_off.release->key, hand_off.release->offset);
  }
  hand_off.tracker->Complete(hand_off.offset);
  if (hand_off.kind == HandOffKind::kRetry || hand_off.kind == HandOffKind::kFollow) {
    mailbox->counters.Add(&Counters::sent_to_retry);
  }
  if (hand_off.kind == HandOffKind::kFollow) mailbox->counters.Add(&Counters::followed);
  if (hand_off.kind == HandOffKind::kDeadLetter) {
    mailbox->counters.Add(&Counters::dead_lettered);
  }
  if (hand_off.requested_by != nullptr) hand_off.requested_by->Answer(absl::OkStatus());
  mailbox->HandOffDone();
}

void HandOffs::OnFailed(const std::shared_ptr<HandOffMailbox>& mailbox, HandOff hand_off,
                        const absl::Status& status) {
  // Purged at shutdown, or the partition moved: the next owner reads the
  // source record again, so there is nothing to re-send. The producer
  // failed for good (INTERNAL): its worker rewinds to its last commit,
  // which is below this record (not complete), and reads it again.
  if (absl::IsInternal(status) || hand_off.tracker->abandoned() || absl::IsCancelled(status)) {
    DropFailed(*mailbox, hand_off, status);
    return;
  }
  // The topic is gone or forbidden (after librdkafka's own retries): no
  // record can get through, so waiting would only hide it. The thread
  // fails; its partitions go to another member from the last committed
  // offset, which is below this record.
  if (absl::IsNotFound(status) || absl::IsPermissionDenied(status) ||
      (absl::IsInvalidArgument(status) && hand_off.fit >= 2)) {
    FailForGood(*mailbox, hand_off, status);
    return;
  }
  SendAgain(*mailbox, std::move(hand_off), status);
}

void HandOffs::DrainRedo(bool force, bool in_order) {
  std::vector<Redo> ready;
  {
    absl::MutexLock lock(&mailbox_->redo_mu);
    const absl::Time now = absl::Now();
    // In order, once one of a partition's hand-offs is due, all of that
    // partition's go, in offset order: a replay must follow the re-send of
    // the record it overtook.
    std::set<CompletionTracker*> due_in_order;
    for (const Redo& redo : mailbox_->redo) {
      if (redo.hand_off.in_order && (force || redo.not_before <= now)) {
        due_in_order.insert(redo.hand_off.tracker.get());
      }
    }
    for (auto it = mailbox_->redo.begin(); it != mailbox_->redo.end();) {
      if (force || it->not_before <= now || due_in_order.contains(it->hand_off.tracker.get())) {
        ready.push_back(std::move(*it));
        it = mailbox_->redo.erase(it);
      } else {
        ++it;
      }
    }
  }
  std::stable_sort(ready.begin(), ready.end(), [](const Redo& a, const Redo& b) {
    return std::make_pair(a.hand_off.tracker.get(), a.hand_off.offset) <
           std::make_pair(b.hand_off.tracker.get(), b.hand_off.offset);
  });
  for (Redo& redo : ready) {
    mailbox_->HandOffDone();
    HandOff& h = redo.hand_off;
    if (h.tracker->abandoned()) {
      if (h.requested_by != nullptr) {
        h.requested_by->Answer(PartitionGivenUp(mailbox_->id()));
      }
      absl::MutexLock lock(&mailbox_->redo_mu);
      mailbox_->ForgetFailedHandOff(h);
      continue;
    }
    if (!redo.refused.empty()) {
      LogWarning("thread ", mailbox_->id(), ": ", h.origin.original_topic, "/",
                 h.origin.original_partition, "@", h.origin.original_offset, ": Kafka refused its ",
                 HandOffKindName(h.kind), " record (", redo.refused,
                 "); dead-lettering it cut to fit");
      Emit(FittedDeadLetter(std::move(h), redo.refused, options_.dead_letter_topic,
                            static_cast<size_t>(producer_->max_message_bytes()),
                            {absl::ToUnixMillis(absl::Now()),
                             DeadLetteredBy(options_.instance_name, mailbox_->id())},
                            options_.dead_letter_dialects, options_.group_id),
           in_order);
      continue;
    }
    Emit(std::move(h), in_order);
  }
}

}  // namespace retryd::engine
