// Runs retryctl in-process against a FakeRetryd, and parses its command
// lines, for the client tests.
#ifndef RETRYD_CLIENT_TESTS_RUN_RETRYCTL_H_
#define RETRYD_CLIENT_TESTS_RUN_RETRYCTL_H_

#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_split.h"
#include "client/retryctl.h"
#include "client/retryctl_args.h"
#include "client/tests/fake_retryd.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/support/status.h"
#include "gtest/gtest.h"

namespace retryd::retryctl {

// A request id, as uuidgen prints one.
inline constexpr char kUuid[] = "0b6f6f1e-4ad4-4c31-9d55-5b1e1f2f7a10";

struct RunResult {
  int exit_code;
  std::string out;
  std::string err;
};

// Runs retryctl against `fake` (its address comes from RETRYD_ADDR, as a
// user's would).
inline RunResult RunAgainst(const testing::FakeRetryd& fake, const std::vector<std::string>& args,
                            Environment env = {}, bool tty = false,
                            Interrupt* interrupt = nullptr) {
  if (env.retryd_addr.empty()) env.retryd_addr = fake.address();
  std::ostringstream out;
  std::ostringstream err;
  Io io(out, err);
  io.out_is_tty = tty;
  const int code = RunRetryctl(args, env, io, DefaultClientFactory(), interrupt);
  return RunResult{code, out.str(), err.str()};
}

// The lines of `text`, empty ones left out.
inline std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// `args` parsed with an empty environment.
inline std::variant<Invocation, UsageError> ParseLine(const std::vector<std::string>& args) {
  return ParseArgs(args, Environment());
}

// The usage error `args` give; fails the test if they parse.
inline std::string ErrorOf(const std::vector<std::string>& args) {
  std::variant<Invocation, UsageError> result = ParseLine(args);
  if (!std::holds_alternative<UsageError>(result)) {
    ADD_FAILURE() << "expected a usage error";
    return "";
  }
  return std::get<UsageError>(result).message;
}

// `args` parsed; fails the test on a usage error.
inline Invocation Parse(const std::vector<std::string>& args) {
  std::variant<Invocation, UsageError> result = ParseLine(args);
  if (const UsageError* error = std::get_if<UsageError>(&result)) {
    ADD_FAILURE() << "unexpected usage error: " << error->message;
    return Invocation();
  }
  return std::get<Invocation>(result);
}

// A google.rpc.Status with retryd's ErrorInfo, as retryd sends one.
inline google::rpc::Status RpcStatusWithReason(grpc::StatusCode code, const std::string& message,
                                               const std::string& reason) {
  google::rpc::Status status;
  status.set_code(code);
  status.set_message(message);
  google::rpc::ErrorInfo info;
  info.set_domain("retryd.io");
  info.set_reason(reason);
  status.add_details()->PackFrom(info);
  return status;
}

// A failed call as retryd answers it: `reason` in the status details.
inline grpc::Status GrpcErrorWithReason(grpc::StatusCode code, const std::string& message,
                                        const std::string& reason) {
  return grpc::Status(code, message,
                      RpcStatusWithReason(code, message, reason).SerializeAsString());
}

// An operation of `kind` in `state`, created at 1,000,000 ms and, if it
// has ended, ended 14 s later.
inline v1::Operation MakeOperation(const std::string& id, v1::OperationKind kind,
                                   v1::OperationState state) {
  v1::Operation operation;
  operation.set_id(id);
  operation.set_kind(kind);
  operation.set_state(state);
  operation.set_done(state != v1::OPERATION_STATE_RUNNING);
  operation.set_create_time_unix_ms(1'000'000);
  if (operation.done()) operation.set_end_time_unix_ms(1'014'000);
  return operation;
}

inline google::protobuf::Struct ParseJsonObject(const std::string& text) {
  google::protobuf::Struct object;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text, &object).ok()) << text;
  return object;
}

}  // namespace retryd::retryctl

#endif  // RETRYD_CLIENT_TESTS_RUN_RETRYCTL_H_
