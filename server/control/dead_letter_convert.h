// The dead-letter tools' RPC messages to and from the plain values of
// server/dlq/ (tool_types.h), field by field, and the stored form of a
// redrive's spec: protobuf JSON of v1::RedriveSpec, as every retryd wrote
// it, so that a redrive an older retryd left unfinished resumes.
//
// Thread-safety: pure functions.
#ifndef RETRYD_SERVER_CONTROL_DEAD_LETTER_CONVERT_H_
#define RETRYD_SERVER_CONTROL_DEAD_LETTER_CONVERT_H_

#include <cstddef>
#include <optional>
#include <string>

#include "retryd/v1/control.pb.h"
#include "server/dlq/tool_types.h"

namespace retryd::control {

dlq::DeadLetterFilter FromProto(const v1::DeadLetterFilter& filter);
v1::DeadLetterFilter ToProto(const dlq::DeadLetterFilter& filter);
v1::DeadLetter ToProto(dlq::DeadLetter dead);
// The bytes `dead` takes in a ListDeadLettersResponse: the ByteSizeLong()
// of its retryd.v1.DeadLetter. For dlq::DeadLetterTools.
size_t DeadLetterBytes(const dlq::DeadLetter& dead);

dlq::ListQuery FromProto(const v1::ListDeadLettersRequest& request);
v1::ListDeadLettersResponse ToProto(dlq::ListPage page);

dlq::PurgeRequest FromProto(const v1::PurgeDeadLettersRequest& request);
v1::PurgeDeadLettersResponse ToProto(const dlq::PurgeResult& result);

dlq::RedriveRequest FromProto(const v1::StartRedriveRequest& request);
v1::StartRedriveRequest ToProto(const dlq::RedriveRequest& request);

dlq::RedriveCheckpoint FromProto(const v1::RedriveCheckpoint& checkpoint);
v1::RedriveCheckpoint ToProto(const dlq::RedriveCheckpoint& checkpoint);

dlq::RedriveSpec FromProto(const v1::RedriveSpec& spec);
v1::RedriveSpec ToProto(const dlq::RedriveSpec& spec);

void ToProto(const dlq::RedriveProgress& progress, v1::RedriveProgress& out);
void ToProto(const dlq::RedriveOperationProgress& progress, v1::OperationProgress& out);
void ToProto(const dlq::RedriveResult& result, v1::RedriveResult& out);

// The spec's stored form (protobuf JSON, proto field names), and back
// (unknown fields ignored; none for text that is not JSON of a spec, or
// one without an operation id or dead-letter topic).
std::string SpecJson(const dlq::RedriveSpec& spec);
std::optional<dlq::RedriveSpec> ParseSpec(const std::string& json);
// A filter in a log line: its protobuf JSON.
std::string DescribeFilter(const dlq::DeadLetterFilter& filter);
// The three above, for dlq::DeadLetterTools.
dlq::RedriveSpecCodec SpecCodec();

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_DEAD_LETTER_CONVERT_H_
