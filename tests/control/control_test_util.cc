#include "tests/control/control_test_util.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/sync_stream.h>

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/unknown_field_set.h"
#include "gtest/gtest.h"
#include "server/control/control_config.h"
#include "tests/support/outcomes.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

namespace retryd::testing {

engine::Outcome SwitchProcessor::Process(const Record& record, int attempt) {
  if (failing_.load() && record.key.has_value() && absl::StartsWith(*record.key, "fail-")) {
    return engine::Outcome::Retriable(absl::StrCat("test: failing, attempt ", attempt));
  }
  return engine::Outcome::Ok();
}

std::unique_ptr<EngineUnderTest> StartEngineUnderTest(const std::string& name, int retry_threads,
                                                      int max_threads) {
  auto out = std::make_unique<EngineUnderTest>();
  out->topics = CreateTopics(name);
  engine::EngineOptions options = TestEngineOptions(out->topics);
  options.retry.threads = retry_threads;
  options.retry.max_threads = max_threads;
  options.retry.max_attempts = 1000;  // "fail-" records circulate until released.
  auto processor = std::make_unique<SwitchProcessor>();
  out->processor = processor.get();
  out->engine = StartEngine(options, std::move(processor));
  if (out->engine == nullptr) return nullptr;
  if (!WaitFor([&] { return AllAssigned(*out->engine, 3); }, absl::Seconds(60))) {
    ADD_FAILURE() << "the engine's groups did not settle within 60 s";
    return nullptr;
  }
  return out;
}

std::unique_ptr<httplib::Client> HttpClient(int port, int read_timeout_s) {
  auto client = std::make_unique<httplib::Client>("127.0.0.1", port);
  client->set_connection_timeout(5, 0);
  client->set_read_timeout(read_timeout_s, 0);
  return client;
}

std::shared_ptr<grpc::Channel> Channel(const std::string& target,
                                       std::shared_ptr<grpc::ChannelCredentials> credentials) {
  return grpc::CreateChannel(target, std::move(credentials));
}

std::unique_ptr<RetrydClient> Client(std::shared_ptr<grpc::Channel> channel,
                                     const std::string& token, absl::Duration timeout) {
  ClientOptions options;
  options.token = token;
  options.timeout = timeout;
  return RetrydClient::CreateWithChannel(std::move(channel), std::move(options));
}

std::vector<uint32_t> RetryThreadIds(RetrydClient& client) {
  std::vector<uint32_t> ids;
  absl::StatusOr<v1::GetStatusResponse> status = client.GetStatus();
  if (!status.ok()) return ids;
  for (const v1::ThreadInfo& t : status->threads()) {
    if (t.role() == v1::THREAD_ROLE_RETRY) ids.push_back(t.thread_id());
  }
  return ids;
}

absl::Status WatchStatus(RetrydClient& client, uint32_t interval_ms,
                         const std::vector<uint32_t>& thread_ids) {
  // Returning false ends the stream after its first snapshot, with OK.
  return client.Watch(interval_ms, thread_ids, [](const v1::MetricsSnapshot&) { return false; });
}

void Prepare(grpc::ClientContext& context, absl::Duration timeout, const std::string& token) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  if (!token.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", token));
}

std::optional<CertFiles> MakeSelfSignedCert(const std::string& dir, const std::string& name) {
  if (std::system("openssl version > /dev/null 2>&1") != 0) return std::nullopt;
  CertFiles files{absl::StrCat(dir, "/", name, ".crt"), absl::StrCat(dir, "/", name, ".key")};
  const std::string command =
      absl::StrCat("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost",
                   " -addext subjectAltName=DNS:localhost,IP:127.0.0.1", " -keyout ", files.key,
                   " -out ", files.cert, " > ", dir, "/", name, ".log 2>&1");
  if (std::system(command.c_str()) != 0) {
    ADD_FAILURE() << command << ": " << ReadFileOrEmpty(absl::StrCat(dir, "/", name, ".log"));
  }
  return files;
}

std::shared_ptr<grpc::Channel> TlsChannel(const std::string& target, const std::string& root_pem,
                                          const std::optional<CertFiles>& client) {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = root_pem;
  if (client.has_value()) {
    ssl.pem_cert_chain = ReadFileOrEmpty(client->cert);
    ssl.pem_private_key = ReadFileOrEmpty(client->key);
  }
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(ssl), args);
}

bool StartProbingFast(control::ControlServer& server) {
  control::ControlServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.probe_interval = absl::Milliseconds(200);
  options.probe_timeout = absl::Seconds(1);
  const absl::Status started = server.Start(options);
  EXPECT_TRUE(started.ok()) << started;
  return started.ok();
}

int Health(const std::shared_ptr<grpc::Channel>& channel, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  Prepare(context, absl::Seconds(5));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status s = stub->Check(&context, request, &response);
  return s.ok() ? static_cast<int>(response.status()) : -static_cast<int>(s.error_code());
}

HealthWatch::HealthWatch(const std::shared_ptr<grpc::Channel>& channel, const std::string& service)
    : stub_(grpc::health::v1::Health::NewStub(channel)) {
  request_.set_service(service);
  reader_ = std::thread([this] { Read(); });
}

HealthWatch::~HealthWatch() {
  context_.TryCancel();
  reader_.join();
}

void HealthWatch::Read() {
  std::unique_ptr<grpc::ClientReader<grpc::health::v1::HealthCheckResponse>> reader =
      stub_->Watch(&context_, request_);
  grpc::health::v1::HealthCheckResponse response;
  while (reader->Read(&response)) {
    absl::MutexLock lock(&mu_);
    seen_.push_back(response.status());
  }
  (void)reader->Finish();  // Cancelled by the destructor, or the server went.
}

bool HealthWatch::WaitForLatest(Status want, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto latest_is = [this, want]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !seen_.empty() && seen_.back() == want;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&latest_is), timeout);
}

std::vector<HealthWatch::Status> HealthWatch::Seen() const {
  absl::MutexLock lock(&mu_);
  return seen_;
}

namespace {

// One request and its answer on the reflection stream, as raw protobuf.
absl::StatusOr<std::string> ReflectionCall(const std::shared_ptr<grpc::Channel>& channel,
                                           const std::string& request) {
  grpc::ClientContext context;
  Prepare(context, absl::Seconds(10));
  const grpc::internal::RpcMethod method(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      grpc::internal::RpcMethod::BIDI_STREAMING);
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel.get(), method, &context));
  grpc::Slice slice(request);
  grpc::ByteBuffer out(&slice, 1);
  grpc::ByteBuffer in;
  const bool wrote = stream->Write(out);
  stream->WritesDone();
  const bool read = wrote && stream->Read(&in);
  const grpc::Status status = stream->Finish();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  if (!read) return absl::UnknownError("no reflection response");
  std::vector<grpc::Slice> slices;
  (void)in.Dump(&slices);
  std::string bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return bytes;
}

// A length-delimited field: tag, length, bytes (lengths < 128 only).
std::string StringField(int number, const std::string& value) {
  std::string out;
  out.push_back(static_cast<char>(number << 3 | 2));
  out.push_back(static_cast<char>(value.size()));
  return out + value;
}

// Parses the length-delimited field `number` of `message` into `out`;
// false if there is none.
bool SubMessage(const google::protobuf::UnknownFieldSet& message, int number,
                google::protobuf::UnknownFieldSet* out) {
  for (int i = 0; i < message.field_count(); ++i) {
    const google::protobuf::UnknownField& f = message.field(i);
    if (f.number() == number && f.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      return out->ParseFromString(f.length_delimited());
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ReflectionListServices(
    const std::shared_ptr<grpc::Channel>& channel) {
  // ServerReflectionRequest{list_services (7): "*"}.
  absl::StatusOr<std::string> bytes = ReflectionCall(channel, StringField(7, "*"));
  if (!bytes.ok()) return bytes.status();
  google::protobuf::UnknownFieldSet response;
  if (!response.ParseFromString(*bytes)) return absl::DataLossError("unparsable response");
  // ServerReflectionResponse.list_services_response (6).service (1).name (1).
  google::protobuf::UnknownFieldSet list_storage;
  if (!SubMessage(response, 6, &list_storage)) {
    return absl::NotFoundError("no list_services_response");
  }
  const google::protobuf::UnknownFieldSet* list = &list_storage;
  std::vector<std::string> names;
  for (int i = 0; i < list->field_count(); ++i) {
    google::protobuf::UnknownFieldSet service;
    if (list->field(i).number() == 1 &&
        service.ParseFromString(list->field(i).length_delimited())) {
      for (int j = 0; j < service.field_count(); ++j) {
        if (service.field(j).number() == 1) names.push_back(service.field(j).length_delimited());
      }
    }
  }
  return names;
}

absl::StatusOr<std::vector<google::protobuf::FileDescriptorProto>> ReflectionFileContaining(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& symbol) {
  // ServerReflectionRequest{file_containing_symbol (4): symbol}.
  absl::StatusOr<std::string> bytes = ReflectionCall(channel, StringField(4, symbol));
  if (!bytes.ok()) return bytes.status();
  google::protobuf::UnknownFieldSet response;
  if (!response.ParseFromString(*bytes)) return absl::DataLossError("unparsable response");
  google::protobuf::UnknownFieldSet error;
  if (SubMessage(response, 7, &error)) {
    return absl::NotFoundError(absl::StrCat("reflection error for ", symbol));
  }
  // ServerReflectionResponse.file_descriptor_response (4).file_descriptor_proto (1).
  google::protobuf::UnknownFieldSet files_storage;
  if (!SubMessage(response, 4, &files_storage)) {
    return absl::NotFoundError("no file_descriptor_response");
  }
  const google::protobuf::UnknownFieldSet* files = &files_storage;
  std::vector<google::protobuf::FileDescriptorProto> out;
  for (int i = 0; i < files->field_count(); ++i) {
    google::protobuf::FileDescriptorProto file;
    if (files->field(i).number() == 1 && file.ParseFromString(files->field(i).length_delimited())) {
      out.push_back(std::move(file));
    }
  }
  return out;
}

std::optional<TlsTestCerts> MakeTlsTestCerts(const std::string& dir) {
  std::optional<CertFiles> server = MakeSelfSignedCert(dir, "server");
  std::optional<CertFiles> client = MakeSelfSignedCert(dir, "client");
  std::optional<CertFiles> stranger = MakeSelfSignedCert(dir, "stranger");
  if (!server || !client || !stranger) return std::nullopt;
  return TlsTestCerts{*std::move(server), *std::move(client), *std::move(stranger)};
}

absl::StatusOr<control::ControlServerOptions> TlsServerOptions(const CertFiles& server,
                                                               const std::string& client_ca,
                                                               const std::string& metrics_address) {
  retryd::v1::Config config;
  config.set_listen_address("127.0.0.1:0");
  config.set_metrics_address(metrics_address);
  config.mutable_control()->set_tls_cert_file(server.cert);
  config.mutable_control()->set_tls_key_file(server.key);
  if (!client_ca.empty()) config.mutable_control()->set_tls_client_ca_file(client_ca);
  return control::ControlServerOptionsFromConfig(config);
}

}  // namespace retryd::testing
