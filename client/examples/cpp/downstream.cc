// An example downstream for retryd's grpc processor: a RecordProcessor server
// (proto/retryd/v1/processor.proto) to copy and put your own logic in.
//
//   retryd-example-downstream [--host 127.0.0.1] [--port 50061] [--work_ms 0]
//                             [--flaky_attempts 1] [--perm_retriable]
//
// For each record: a key starting with "bad" or "perm" is refused for good
// (INVALID_ARGUMENT: retryd dead-letters it); a key starting with "flaky"
// fails its first attempt (ABORTED: retryd retries it); any other record
// succeeds, its value upper-cased and a header "processed-by" added. Each
// failure carries a machine-readable reason (a google.rpc.ErrorInfo of domain
// "downstream.example.com": RECORD_REFUSED or TRY_AGAIN) in its status
// details, which retryd writes on a dead letter as retryd-error-reason. Port 0
// picks a free port; the "listening on" line says which. --work_ms makes
// every call take that long, like a slow service (try retryd's
// max_concurrent_calls against it).
//
// Two flags change the rule, for comparing retryd with consumers that retry
// every failure alike (bench/peers/): --flaky_attempts N fails a "flaky"
// key's first N attempts; --perm_retriable fails a "bad" or "perm" key with
// ABORTED on every attempt instead of INVALID_ARGUMENT, so it uses all its
// attempts before it is dead-lettered.
#include <pthread.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/grpcpp.h"
#include "retryd/v1/processor.grpc.pb.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on.");
ABSL_FLAG(int, port, 50061, "Port to listen on; 0 picks a free one.");
ABSL_FLAG(int, work_ms, 0, "Milliseconds each call takes, standing for real work.");
ABSL_FLAG(int, flaky_attempts, 1, "Attempts a \"flaky\" key fails (ABORTED) before it succeeds.");
ABSL_FLAG(bool, perm_retriable, false,
          "Fail \"bad\" and \"perm\" keys with ABORTED (retriable) on every attempt instead of "
          "refusing them with INVALID_ARGUMENT (a dead letter at once).");

namespace {

using retryd::v1::ProcessRequest;
using retryd::v1::ProcessResponse;

// What the flags ask for; see the header comment.
struct Rule {
  int work_ms;
  int flaky_attempts;
  bool perm_retriable;
};

// Names this service in the reasons its failures give.
constexpr char kDomain[] = "downstream.example.com";

// A failure with `code` and `message` whose status details (the
// grpc-status-details-bin trailer, a google.rpc.Status) carry a
// google.rpc.ErrorInfo: `reason` says why in a word a program can match on.
grpc::Status Failure(grpc::StatusCode code, const std::string& message, const std::string& reason) {
  google::rpc::Status status;
  status.set_code(static_cast<int>(code));
  status.set_message(message);
  google::rpc::ErrorInfo info;
  info.set_domain(kDomain);
  info.set_reason(reason);
  status.add_details()->PackFrom(info);
  return grpc::Status(code, message, status.SerializeAsString());
}

// The synchronous API runs each call on a thread of gRPC's pool, so calls
// overlap and the handler may block (a database, another service).
class ExampleProcessor final : public retryd::v1::RecordProcessor::Service {
 public:
  explicit ExampleProcessor(const Rule& rule) : rule_(rule) {}

 private:
  grpc::Status Process(grpc::ServerContext*, const ProcessRequest* request,
                       ProcessResponse* response) override {
    if (rule_.work_ms > 0) {
      // The stand-in for real work: a call to a database, say.
      std::this_thread::sleep_for(std::chrono::milliseconds(rule_.work_ms));
    }
    const retryd::v1::KafkaRecord& record = request->record();
    // retryd calls again after a crash or a lost answer: real side effects
    // should be keyed on (record.topic(), record.partition(), record.offset()).
    const std::string key = record.has_key() ? record.key() : "";  // Null key: "".
    if (absl::StartsWith(key, "bad") || absl::StartsWith(key, "perm")) {
      return Failure(
          rule_.perm_retriable ? grpc::StatusCode::ABORTED : grpc::StatusCode::INVALID_ARGUMENT,
          "cannot process " + key, "RECORD_REFUSED");
    }
    if (absl::StartsWith(key, "flaky") && request->attempt() <= rule_.flaky_attempts) {
      return Failure(grpc::StatusCode::ABORTED, "try again", "TRY_AGAIN");
    }
    // A null value is left unset in the response: forwarded unchanged.
    if (record.has_value()) response->set_value(absl::AsciiStrToUpper(record.value()));
    retryd::v1::RecordHeader* header = response->add_headers();
    header->set_key("processed-by");
    header->set_value("cpp-example");
    return grpc::Status::OK;
  }

  const Rule rule_;
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);

  // SIGINT and SIGTERM are taken by sigwait below, not by a handler (which
  // could not call into gRPC); blocked before gRPC starts its threads, so
  // that they all inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  ExampleProcessor service(Rule{.work_ms = absl::GetFlag(FLAGS_work_ms),
                                .flaky_attempts = absl::GetFlag(FLAGS_flaky_attempts),
                                .perm_retriable = absl::GetFlag(FLAGS_perm_retriable)});
  int port = 0;
  grpc::ServerBuilder builder;
  // Without it a second copy would share the port, and calls, silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port)),
                           grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    std::fprintf(stderr, "cannot listen on %s:%d\n", absl::GetFlag(FLAGS_host).c_str(),
                 absl::GetFlag(FLAGS_port));
    return 1;
  }
  std::printf("listening on %s:%d\n", absl::GetFlag(FLAGS_host).c_str(), port);
  std::fflush(stdout);

  int signal = 0;
  sigwait(&stop_signals, &signal);
  // Calls in progress get 5 seconds to finish and connected clients (retryd)
  // as long to go; then calls are cancelled.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return 0;
}
