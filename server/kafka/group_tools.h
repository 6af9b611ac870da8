// Consumer groups as tools use them: listed, read, written and deleted
// through the Admin API (GroupAdmin), committed to without joining
// (CommitWithoutJoining), and joined by a tool's own consumer that commits
// where it is with metadata (GroupConsumer). The dead-letter tools keep
// their marks and their redrives' positions this way.
#ifndef RETRYD_SERVER_KAFKA_GROUP_TOOLS_H_
#define RETRYD_SERVER_KAFKA_GROUP_TOOLS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/kafka/handle.h"
#include "server/model/record.h"

namespace retryd::kafka {

// A group as ListGroups shows it.
struct GroupListing {
  std::string group;
  // "Empty", "Stable", "PreparingRebalance", "CompletingRebalance", "Dead"
  // or "Unknown".
  std::string state;
};

// A committed offset of one partition, with its metadata.
struct CommittedOffset {
  int32_t partition = 0;
  int64_t offset = -1;  // -1: none committed.
  std::string metadata;
};

// The Admin API's group and record calls over one client kept for its life.
// Errors: FAILED_PRECONDITION with reason ADMIN_API_UNAVAILABLE when the
// cluster does not serve the call (librdkafka's mock cluster has no Admin
// API) or refuses it by policy; UNAVAILABLE or DEADLINE_EXCEEDED when it did
// not answer in time; PERMISSION_DENIED without the right.
//
// Thread-safe.
class GroupAdmin {
 public:
  static absl::StatusOr<std::unique_ptr<GroupAdmin>> Create(
      const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties);
  ~GroupAdmin();
  GroupAdmin(const GroupAdmin&) = delete;
  GroupAdmin& operator=(const GroupAdmin&) = delete;

  // The consumer groups whose names start with `prefix`.
  absl::StatusOr<std::vector<GroupListing>> ListGroups(const std::string& prefix,
                                                       absl::Duration timeout) const;

  // `group`'s committed offsets of `topic`'s partitions 0..partitions-1,
  // with their metadata (-1 and "" where none is committed).
  absl::StatusOr<std::vector<CommittedOffset>> GroupOffsets(const std::string& group,
                                                            const std::string& topic,
                                                            int partitions,
                                                            absl::Duration timeout) const;

  // Deletes `group`, which must have no members; OK if it does not exist.
  absl::Status DeleteGroup(const std::string& group, absl::Duration timeout) const;

  // Deletes `topic`'s records below `before[p]` in each partition p named.
  absl::Status DeleteRecords(const std::string& topic, const std::map<int32_t, int64_t>& before,
                             absl::Duration timeout) const;

 private:
  explicit GroupAdmin(HandlePtr rk) : rk_(std::move(rk)) {}
  const HandlePtr rk_;
};

// Commits `offsets` of `topic` for `group` without joining it: the group
// must have no members (the broker refuses otherwise). Blocks up to
// `timeout`.
absl::Status CommitWithoutJoining(const std::string& bootstrap_servers,
                                  const std::map<std::string, std::string>& properties,
                                  const std::string& group, const std::string& topic,
                                  const std::vector<CommittedOffset>& offsets,
                                  absl::Duration timeout);

// A consumer of one topic in a group of a tool's own: it joins the group,
// reads each partition assigned to it from the group's committed offset,
// and commits only when told, with metadata. At each partition's end it
// reports the end (Poll's `eof`).
//
// Thread-compatible: one thread uses it.
class GroupConsumer {
 public:
  static absl::StatusOr<std::unique_ptr<GroupConsumer>> Create(
      const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties,
      const std::string& group, const std::string& topic, const std::string& client_id);
  ~GroupConsumer();  // Close()s.
  GroupConsumer(const GroupConsumer&) = delete;
  GroupConsumer& operator=(const GroupConsumer&) = delete;

  struct Event {
    std::optional<Record> record;
    // Set without a record: `partition` has nothing more below `eof_offset`.
    std::optional<int32_t> eof_partition;
    int64_t eof_offset = -1;
  };
  // The next record or end of partition, or an empty event when `timeout`
  // passed without one.
  absl::StatusOr<Event> Poll(absl::Duration timeout);

  // The partitions assigned to it now.
  std::vector<int32_t> Assignment() const;

  // Stops fetching `partition` (it has reached the end the caller wants).
  void Pause(int32_t partition);

  // Commits `offsets` synchronously, with their metadata.
  absl::Status Commit(const std::vector<CommittedOffset>& offsets);

  // The group's committed offsets of `partitions` (-1 where none).
  absl::StatusOr<std::map<int32_t, int64_t>> Committed(const std::vector<int32_t>& partitions,
                                                       absl::Duration timeout) const;

  // Leaves the group. Idempotent.
  void Close();

 private:
  GroupConsumer(HandlePtr rk, std::string topic) : rk_(std::move(rk)), topic_(std::move(topic)) {}
  HandlePtr rk_;
  const std::string topic_;
  bool closed_ = false;
};

}  // namespace retryd::kafka

#endif  // RETRYD_SERVER_KAFKA_GROUP_TOOLS_H_
