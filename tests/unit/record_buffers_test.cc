// The buffers a worker keeps of records done with: the next record read
// gets them (the same memory), and what is kept stays bounded.
#include "server/engine/handoff/record_buffers.h"

#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace retryd::engine {
namespace {

OutgoingRecord Done(size_t value_bytes, size_t key_bytes = 40, size_t headers = 2) {
  OutgoingRecord r;
  r.topic = "out";
  r.key = std::string(key_bytes, 'k');
  r.value = std::string(value_bytes, 'v');
  for (size_t i = 0; i < headers; ++i) r.headers.push_back({"h" + std::to_string(i), "x"});
  return r;
}

TEST(RecordBuffersTest, TheNextRecordReadGetsTheBuffersOfOneDoneWith) {
  RecordBuffers buffers;
  OutgoingRecord done = Done(100);
  const char* value = done.value->data();
  const char* key = done.key->data();
  const Header* headers = done.headers.data();
  buffers.Recycle(done);
  EXPECT_EQ(buffers.buffers(), 3u);
  EXPECT_GT(buffers.bytes(), 140);

  Record next;
  buffers.Prepare(next);
  ASSERT_TRUE(next.value.has_value());
  ASSERT_TRUE(next.key.has_value());
  // The same memory, emptied of the old bytes where they are strings; the
  // header list keeps its entries for the reader to write over.
  const std::string* got[] = {&*next.key, &*next.value};
  EXPECT_TRUE((got[0]->data() == value && got[1]->data() == key) ||
              (got[0]->data() == key && got[1]->data() == value));
  EXPECT_TRUE(next.key->empty());
  EXPECT_TRUE(next.value->empty());
  EXPECT_EQ(next.headers.data(), headers);
  EXPECT_EQ(buffers.buffers(), 0u);
  EXPECT_EQ(buffers.bytes(), 0);
}

TEST(RecordBuffersTest, ALongTopicNameIsReadIntoAKeptBufferToo) {
  RecordBuffers buffers;
  OutgoingRecord done;
  done.topic = "payments.settled.v1.done";
  const char* topic = done.topic.data();
  buffers.Recycle(done);
  EXPECT_EQ(buffers.buffers(), 1u);
  Record next;  // Holding a key and a value already.
  next.key = std::string(50, 'k');
  next.value = std::string(100, 'v');
  buffers.Prepare(next);
  EXPECT_EQ(next.topic.data(), topic);
  EXPECT_TRUE(next.topic.empty());
}

TEST(RecordBuffersTest, ARecordHoldingBuffersKeepsThem) {
  RecordBuffers buffers;
  OutgoingRecord done = Done(100);
  buffers.Recycle(done);
  Record next;
  next.topic = "payments.settled.v1";
  next.value = std::string(200, 'x');
  next.key = std::string(50, 'y');
  next.headers = {{"a", "b"}};
  const char* value = next.value->data();
  buffers.Prepare(next);
  EXPECT_EQ(next.value->data(), value);
  EXPECT_EQ(buffers.buffers(), 3u);  // Nothing taken.
}

TEST(RecordBuffersTest, SmallAndHugeBuffersAreNotKept) {
  RecordBuffers buffers;
  OutgoingRecord small = Done(/*value_bytes=*/3, /*key_bytes=*/2, /*headers=*/0);
  buffers.Recycle(small);
  EXPECT_EQ(buffers.buffers(), 0u);  // Inside the string objects: nothing to keep.
  OutgoingRecord huge = Done(RecordBuffers::kMaxBufferBytes + 1, 2, 0);
  buffers.Recycle(huge);
  EXPECT_EQ(buffers.buffers(), 0u);
  EXPECT_EQ(huge.value->size(), RecordBuffers::kMaxBufferBytes + 1);  // Left with the record.
  OutgoingRecord many = Done(3, 2, RecordBuffers::kMaxHeaders + 1);
  buffers.Recycle(many);
  EXPECT_EQ(buffers.buffers(), 0u);
}

TEST(RecordBuffersTest, WhatIsKeptStaysUnderItsBound) {
  RecordBuffers buffers;
  for (int i = 0; i < 100; ++i) {
    OutgoingRecord done = Done(RecordBuffers::kMaxBufferBytes / 2);
    buffers.Recycle(done);
  }
  EXPECT_LE(buffers.bytes(), RecordBuffers::kMaxBytes);
  EXPECT_GT(buffers.bytes(), RecordBuffers::kMaxBytes / 2);
  // Taking them gives the count back to zero.
  while (buffers.buffers() > 0) {
    Record next;
    buffers.Prepare(next);
  }
  EXPECT_EQ(buffers.bytes(), 0);
}

}  // namespace
}  // namespace retryd::engine
