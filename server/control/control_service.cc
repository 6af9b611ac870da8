#include "server/control/control_service.h"

#include <grpcpp/security/auth_context.h>
#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/common/error_reason.h"
#include "server/common/logging.h"
#include "server/control/instance.h"
#include "server/control/operation_watcher.h"
#include "server/control/proto_convert.h"
#include "server/control/request_validation.h"
#include "server/control/status.h"
#include "server/engine/steering/retry_tiers.h"
#include "server/http/console_gateway.h"

namespace retryd::control {
namespace {

// A blocking call's engine deadline is brought forward so that the engine's
// answer still reaches the client in time. gRPC sends the client's remaining
// time rounded up, by up to 1 % of it (grpc-timeout keeps three significant
// digits: 10.01 s arrives as 10.1 s, 100.5 s as 101 s), so the call's
// deadline here may be that much later than the client's; beyond that, the
// answer needs a moment to get there. Never more than a tenth of the time
// left, so that a short call keeps most of it.
constexpr absl::Duration kAnswerTime = absl::Milliseconds(100);
// How long ListInFlight waits for the engine's threads at most.
constexpr absl::Duration kMaxInFlightWait = absl::Seconds(10);

std::string JoinIds(const std::vector<int>& ids) {
  return absl::StrCat("[", absl::StrJoin(ids, ","), "]");
}

// The retry tier a request names by its topic (empty: the first), as an
// index into options.retry.tiers; INVALID_ARGUMENT naming the tiers.
absl::StatusOr<int> TierIndex(const engine::EngineOptions& options, const std::string& tier) {
  if (tier.empty()) return 0;
  const int index = engine::FindTier(options.retry.tiers, tier);
  if (index >= 0) return index;
  std::vector<std::string> topics;
  for (const engine::RetryTier& t : options.retry.tiers) topics.push_back(t.topic);
  return WithReason(absl::InvalidArgumentError(
                        absl::StrCat("tier: no retry tier has topic \"", tier, "\"; the tiers are ",
                                     absl::StrJoin(topics, ", "), " (empty: the first)")),
                    reason::kInvalidField);
}

// How a switch of the ordering mode ended, for the log.
std::string Describe(const absl::StatusOr<engine::SetOrderingResult>& result) {
  if (!result.ok()) return result.status().ToString();
  return absl::StrCat(
      "ordering=", engine::OrderingName(result->ordering),
      " stopped=", JoinIds(result->stopped_thread_ids), " drained=", result->drained_records,
      " started=", JoinIds(result->started_thread_ids), " parked_keys=", result->parked_keys);
}

// The fields SetInOrderResponse and SetOrderingModeResponse share.
template <typename Response>
void FillSwitch(const engine::SetOrderingResult& result, Response& response) {
  for (int id : result.stopped_thread_ids) {
    response.add_stopped_thread_ids(static_cast<uint32_t>(id));
  }
  response.set_drained_records(result.drained_records);
  for (int id : result.started_thread_ids) {
    response.add_started_thread_ids(static_cast<uint32_t>(id));
  }
}

// The operation a drain ended as: its result on success.
v1::Operation DrainOperation(const absl::StatusOr<engine::SetOrderingResult>& result) {
  v1::Operation op;
  if (!result.ok()) return op;
  v1::DrainResult* drain = op.mutable_drain();
  for (int id : result->stopped_thread_ids)
    drain->add_stopped_thread_ids(static_cast<uint32_t>(id));
  drain->set_drained_records(result->drained_records);
  return op;
}

// The longest StartDrainRequest.timeout_ms: a day.
constexpr uint32_t kMaxDrainTimeoutMs = 86'400'000;

// A unary call's reactor that turns the call's cancellation into a
// Cancellation the engine watches. The token is shared: the operation may
// still hold it when the reactor is done.
class CancellableReactor final : public grpc::ServerUnaryReactor {
 public:
  CancellableReactor() : cancel_(std::make_shared<engine::Cancellation>()) {}
  const std::shared_ptr<engine::Cancellation>& cancellation() const { return cancel_; }

  // Never blocks: Cancel() runs only the engine's brief wake-up.
  void OnCancel() override { cancel_->Cancel(); }
  void OnDone() override { delete this; }

 private:
  const std::shared_ptr<engine::Cancellation> cancel_;
};

DeadLetterToolsOptions DeadLetterToolsFor(const engine::EngineOptions& engine) {
  DeadLetterToolsOptions options;
  options.bootstrap_servers = engine.bootstrap_servers;
  options.kafka_properties = engine.kafka_properties;
  options.dead_letter_topic = engine.dead_letter_topic;
  options.group_id = engine.group_id;
  // A dead letter sent back with its attempts goes where its next attempt
  // would: past the last, so the last tier's topic.
  options.retry_topic = engine::EffectiveTiers(engine.retry).back().topic;
  options.instance_name = engine.instance_name;
  return options;
}

}  // namespace

ControlService::ControlService(engine::Engine& engine, const engine::MetricsSampler& sampler,
                               BearerTokenAuth auth, std::function<bool()> kafka_reachable,
                               ControlServiceOptions options)
    : engine_(engine),
      sampler_(sampler),
      auth_(std::move(auth)),
      kafka_reachable_(std::move(kafka_reachable)),
      options_(std::move(options)),
      instance_(DescribeInstance(absl::Now())),
      watchers_(options_.max_watchers),
      dead_letters_(DeadLetterToolsFor(engine.options()), operations_),
      executor_("control-op", options_.operation_threads, options_.max_queued_operations) {}

ControlService::~ControlService() { Shutdown(); }

void ControlService::BeginShutdown() {
  shutting_down_.store(true);
  // Before the registry cancels them: a redrive stopped by the shutdown
  // keeps its group, to resume at the next start.
  dead_letters_.BeginShutdown();
  watchers_.Close();
}

void ControlService::Shutdown() {
  BeginShutdown();
  // Ends the drains (a cancelled drain leaves the engine as it was), so
  // that the workers waiting on them finish.
  operations_.Shutdown();
  executor_.Shutdown();
  dead_letters_.Shutdown();
}

void ControlService::ResumeRedrives() { dead_letters_.ResumeUnfinished(); }

absl::Status ControlService::Authorize(const grpc::CallbackServerContext& context,
                                       Access access) const {
  return auth_.Authenticate(context.client_metadata(), access, CallerPeer(context));
}

std::string ControlService::CallerPeer(const grpc::CallbackServerContext& context) const {
  if (const std::optional<http::ConsoleCaller> console =
          http::ForwardedByConsole(context.client_metadata(), options_.console_secret)) {
    return absl::StrCat("console ", console->peer);
  }
  return context.peer();
}

// Who made a call, for the audit line of a redrive, a cancel or a purge:
// the peer, the client certificate's subject under mutual TLS, and the
// first 8 hex digits of the SHA-256 of the bearer token it presented (never
// the token).
std::string ControlService::AuditCaller(const grpc::CallbackServerContext& context) const {
  std::string out = absl::StrCat("peer ", CallerPeer(context));
  const std::optional<http::ConsoleCaller> console =
      http::ForwardedByConsole(context.client_metadata(), options_.console_secret);
  if (console.has_value()) {
    if (!console->subject.empty()) absl::StrAppend(&out, ", subject ", console->subject);
  } else if (const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context()) {
    for (const grpc::string_ref& subject : auth->FindPropertyValues("x509_subject")) {
      absl::StrAppend(&out, ", subject ", std::string(subject.data(), subject.size()));
      break;
    }
  }
  const auto token = context.client_metadata().find("authorization");
  if (token != context.client_metadata().end()) {
    std::string value(token->second.data(), token->second.size());
    if (absl::StartsWithIgnoreCase(value, "bearer ")) value = value.substr(7);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    if (EVP_Digest(value.data(), value.size(), digest, &size, EVP_sha256(), nullptr) == 1 &&
        size >= 4) {
      absl::StrAppend(
          &out, ", token sha256:",
          absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), 4)));
    }
  }
  return out;
}

absl::Time ControlService::EngineDeadline(const grpc::CallbackServerContext& context) const {
  const absl::Time now = absl::Now();
  const std::chrono::system_clock::time_point call_deadline = context.deadline();
  if (call_deadline == std::chrono::system_clock::time_point::max()) {
    return now + options_.default_operation_timeout;
  }
  const absl::Time deadline = absl::FromChrono(call_deadline);
  const absl::Duration left = deadline - now;
  if (left <= absl::ZeroDuration()) return deadline;
  return deadline - std::min(left / 10, left / 100 + kAnswerTime);
}

void ControlService::RunBlocking(grpc::CallbackServerContext* context,
                                 grpc::ServerUnaryReactor* reactor, Operation operation,
                                 std::shared_ptr<const engine::Cancellation> cancel) {
  const absl::Time deadline = EngineDeadline(*context);
  absl::Status queued = executor_.Submit([this, context, reactor, deadline, cancel,
                                          operation = std::move(operation)]() mutable {
    absl::Status status;
    if (shutting_down_.load()) {
      status = absl::UnavailableError("the control server is stopping; the operation did not run");
    } else if ((cancel != nullptr && cancel->cancelled()) || context->IsCancelled()) {
      status = absl::CancelledError("the call was cancelled before the operation began");
    } else if (absl::Now() >= deadline) {
      status = absl::DeadlineExceededError(
          "the call's deadline passed while it waited for other control operations; "
          "nothing was changed");
    } else {
      status = std::move(operation)(deadline);
    }
    reactor->Finish(ToGrpcStatus(status));
  });
  if (!queued.ok()) reactor->Finish(ToGrpcStatus(queued));
}

void ControlService::RunMutating(grpc::CallbackServerContext* context,
                                 grpc::ServerUnaryReactor* reactor, std::string method,
                                 const google::protobuf::Message& request,
                                 google::protobuf::Message* response, Operation operation,
                                 std::shared_ptr<const engine::Cancellation> cancel) {
  std::string id = RequestIdOf(request);
  if (id.empty()) {
    RunBlocking(context, reactor, std::move(operation), std::move(cancel));
    return;
  }
  if (absl::Status s = ValidateRequestId(id); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return;
  }
  std::string fingerprint = RequestFingerprint(method, request);
  auto once = [this, id = std::move(id), fingerprint = std::move(fingerprint), response,
               method = std::move(method),
               operation = std::move(operation)](absl::Time deadline) mutable {
    absl::StatusOr<RequestIdCache::Begun> begun = request_ids_.Begin(id, fingerprint, deadline);
    if (!begun.ok()) return begun.status();
    if (begun->replay.has_value()) {
      LogInfo("control: ", method, " request_id ", id, ": a retry; answered as before");
      response->ParseFromString(*begun->replay);
      return absl::OkStatus();
    }
    const absl::Status status = std::move(operation)(deadline);
    request_ids_.End(id, status, status.ok() ? response->SerializeAsString() : std::string());
    return status;
  };
  RunBlocking(context, reactor, std::move(once), std::move(cancel));
}

grpc::ServerUnaryReactor* ControlService::GetStatus(grpc::CallbackServerContext* context,
                                                    const v1::GetStatusRequest* request,
                                                    v1::GetStatusResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status s = Authorize(*context, Access::kReadOnly); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  response->set_state(ToProto(engine_.state()));
  const engine::Ordering ordering = engine_.ordering();
  response->set_in_order(ordering == engine::Ordering::kInOrder);
  response->set_ordering(ToProto(ordering));
  ToProto(engine_.ParkedKeys(), *response->mutable_parked_keys());
  const std::vector<std::shared_ptr<const engine::ThreadStats>> threads = engine_.Threads();
  const std::vector<engine::RetryTier>& tiers = engine_.options().retry.tiers;
  for (const std::shared_ptr<const engine::ThreadStats>& stats : threads) {
    v1::ThreadInfo* info = response->add_threads();
    ToProto(*stats, *info);
    if (stats->tier() >= 0 && stats->tier() < static_cast<int>(tiers.size())) {
      info->set_tier(tiers[stats->tier()].topic);
    }
  }
  ToProto(tiers, engine_.TierBacklogs(threads), threads, *response->mutable_retry_tiers());
  for (const engine::PartitionBacklog& p : engine_.PartitionBacklogs()) {
    if (p.tier < 0 || p.tier >= static_cast<int>(tiers.size())) continue;
    v1::PartitionBacklog* out = response->add_retry_backlog_partitions();
    out->set_topic(tiers[p.tier].topic);
    out->set_partition(p.partition);
    out->set_backlog(p.backlog);
  }
  const engine::EngineTotals totals = engine_.Totals();
  ToProto(totals, *response->mutable_totals());
  response->set_retry_backlog(totals.retry_backlog);
  response->set_kafka_bootstrap_servers(engine_.options().bootstrap_servers);
  *response->mutable_config() = options_.config;
  response->set_max_retry_threads(static_cast<uint32_t>(engine_.options().retry.max_threads));
  response->set_min_retry_threads(static_cast<uint32_t>(engine_.options().retry.min_threads));
  response->set_autoscale(engine_.options().retry.autoscale.enabled);
  ToProto(engine_.ScalingEvents(), *response->mutable_scaling_events());
  response->set_version(RETRYD_VERSION);
  *response->mutable_instance() = instance_;
  response->set_kafka_reachable(kafka_reachable_());
  ToProto(engine_.downstream(), *response->mutable_downstream());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::StartRetryThreads(
    grpc::CallbackServerContext* context, const v1::StartRetryThreadsRequest* request,
    v1::StartRetryThreadsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status status = Authorize(*context, Access::kMutating);
  absl::StatusOr<int> tier = 0;
  if (status.ok()) {
    tier = TierIndex(engine_.options(), request->tier());
    status = tier.status();
  }
  if (status.ok()) {
    int running = 0;
    for (const auto& stats : engine_.Threads()) {
      running += stats->role() == engine::ThreadRole::kRetry && stats->tier() == *tier &&
                 !engine::IsEnded(stats->state());
    }
    status =
        ValidateStartRetryThreadsRequest(*request, engine_.options().retry.max_threads, running);
  }
  if (!status.ok()) {
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  const std::string peer = CallerPeer(*context);
  RunMutating(context, reactor, "StartRetryThreads", *request, response,
              [this, request, response, peer, tier = *tier](absl::Time deadline) {
                absl::StatusOr<std::vector<int>> ids =
                    engine_.StartRetryThreads(request->count(), deadline, tier);
                LogInfo("control: StartRetryThreads(count=", request->count(),
                        request->tier().empty() ? "" : absl::StrCat(", tier=", request->tier()),
                        ") from ", peer, ": ", ids.ok() ? JoinIds(*ids) : ids.status().ToString());
                if (!ids.ok()) return ids.status();
                for (int id : *ids) response->add_thread_ids(static_cast<uint32_t>(id));
                return absl::OkStatus();
              });
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::StopRetryThreads(
    grpc::CallbackServerContext* context, const v1::StopRetryThreadsRequest* request,
    v1::StopRetryThreadsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status status = Authorize(*context, Access::kMutating);
  if (status.ok()) status = ValidateStopRetryThreadsRequest(*request);
  absl::StatusOr<int> tier = 0;
  if (status.ok()) {
    tier = TierIndex(engine_.options(), request->tier());
    status = tier.status();
  }
  if (!status.ok()) {
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  std::vector<int> ids = EngineThreadIds(request->thread_ids());
  const bool graceful = request->has_graceful() ? request->graceful() : true;
  const std::string peer = CallerPeer(*context);
  RunMutating(context, reactor, "StopRetryThreads", *request, response,
              [this, request, response, graceful, peer, ids = std::move(ids),
               tier = *tier](absl::Time deadline) {
                absl::StatusOr<std::vector<int>> stopped =
                    ids.empty()
                        ? engine_.StopRetryThreads(request->count(), graceful, deadline, tier)
                        : engine_.StopRetryThreadsById(ids, graceful, deadline);
                LogInfo("control: StopRetryThreads(",
                        ids.empty() ? absl::StrCat("count=", request->count(),
                                                   request->tier().empty()
                                                       ? ""
                                                       : absl::StrCat(", tier=", request->tier()))
                                    : absl::StrCat("ids=", JoinIds(ids)),
                        graceful ? "" : ", now", ") from ", peer, ": ",
                        stopped.ok() ? JoinIds(*stopped) : stopped.status().ToString());
                if (!stopped.ok()) return stopped.status();
                for (int id : *stopped) response->add_stopped_thread_ids(static_cast<uint32_t>(id));
                return absl::OkStatus();
              });
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::SetRetryThreadCount(
    grpc::CallbackServerContext* context, const v1::SetRetryThreadCountRequest* request,
    v1::SetRetryThreadCountResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status status = Authorize(*context, Access::kMutating);
  if (status.ok()) status = ValidateSetRetryThreadCountRequest(*request);
  absl::StatusOr<int> tier = 0;
  if (status.ok()) {
    tier = TierIndex(engine_.options(), request->tier());
    status = tier.status();
  }
  if (!status.ok()) {
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  const std::string peer = CallerPeer(*context);
  RunMutating(
      context, reactor, "SetRetryThreadCount", *request, response,
      [this, request, response, peer, tier = *tier](absl::Time deadline) {
        engine::RetryThreadChange change;
        change.kind = engine::RetryThreadChange::Kind::kSetCount;
        change.count = request->target();
        change.tier = tier;
        change.graceful = request->has_graceful() ? request->graceful() : true;
        absl::StatusOr<engine::RetryThreadChangeResult> result =
            engine_.ChangeRetryThreads(std::move(change), deadline);
        LogInfo("control: SetRetryThreadCount(target=", request->target(), ") from ", peer, ": ",
                result.ok()
                    ? absl::StrCat("started ", JoinIds(result->started), " stopped ",
                                   JoinIds(result->stopped), " running ", JoinIds(result->running))
                    : result.status().ToString());
        if (!result.ok()) return result.status();
        for (int id : result->started) {
          response->add_started_thread_ids(static_cast<uint32_t>(id));
        }
        for (int id : result->stopped) {
          response->add_stopped_thread_ids(static_cast<uint32_t>(id));
        }
        for (int id : result->running) {
          response->add_running_thread_ids(static_cast<uint32_t>(id));
        }
        return absl::OkStatus();
      });
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::SwitchOrdering(grpc::CallbackServerContext* context,
                                                         absl::Status validation, std::string call,
                                                         const google::protobuf::Message& request,
                                                         google::protobuf::Message* response,
                                                         bool drain, SwitchOperation operation) {
  auto* reactor = new CancellableReactor();
  absl::Status status = Authorize(*context, Access::kMutating);
  if (status.ok()) status = std::move(validation);
  if (!status.ok()) {
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  std::shared_ptr<engine::Cancellation> cancel = reactor->cancellation();
  auto run = [this, operation = std::move(operation), call, peer = CallerPeer(*context), cancel,
              drain, request_id = RequestIdOf(request)](absl::Time deadline) mutable {
    // A drain is an operation too, while this call waits for it:
    // CancelOperation cancels it as cancelling the call does.
    std::optional<OperationRegistry::Begun> op;
    if (drain)
      op = operations_.Begin(v1::OPERATION_KIND_DRAIN, request_id, DrainProgress(), cancel);
    absl::StatusOr<engine::SetOrderingResult> result = std::move(operation)(deadline, cancel.get());
    LogInfo("control: ", call, " from ", peer, op.has_value() ? " (operation " : "",
            op.has_value() ? op->id : "", op.has_value() ? ")" : "", ": ", Describe(result));
    if (op.has_value()) operations_.Finish(op->id, result.status(), DrainOperation(result));
    return result.status();
  };
  RunMutating(context, reactor, call.substr(0, call.find('(')), request, response, std::move(run),
              std::move(cancel));
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::SetInOrder(grpc::CallbackServerContext* context,
                                                     const v1::SetInOrderRequest* request,
                                                     v1::SetInOrderResponse* response) {
  return SwitchOrdering(context, ValidateSetInOrderRequest(*request),
                        absl::StrCat("SetInOrder(", request->in_order() ? "true" : "false",
                                     request->drain_retries() ? ", drain" : "", ")"),
                        *request, response, request->in_order() && request->drain_retries(),
                        [this, request, response](absl::Time deadline, engine::Cancellation* cancel)
                            -> absl::StatusOr<engine::SetOrderingResult> {
                          absl::StatusOr<engine::SetOrderingResult> result = engine_.SetInOrder(
                              request->in_order(), request->drain_retries(), deadline, cancel);
                          if (result.ok()) {
                            response->set_in_order(result->in_order());
                            FillSwitch(*result, *response);
                          }
                          return result;
                        });
}

grpc::ServerUnaryReactor* ControlService::SetOrderingMode(grpc::CallbackServerContext* context,
                                                          const v1::SetOrderingModeRequest* request,
                                                          v1::SetOrderingModeResponse* response) {
  const absl::Status validation = ValidateSetOrderingModeRequest(*request);
  // Validated: the mode is one the engine knows.
  const engine::Ordering mode = FromProto(request->mode()).value_or(engine::Ordering::kUnordered);
  return SwitchOrdering(
      context, validation,
      absl::StrCat("SetOrderingMode(", engine::OrderingName(mode),
                   request->drain_retries() ? ", drain" : "", ")"),
      *request, response, mode == engine::Ordering::kInOrder && request->drain_retries(),
      [this, mode, request, response](absl::Time deadline, engine::Cancellation* cancel)
          -> absl::StatusOr<engine::SetOrderingResult> {
        absl::StatusOr<engine::SetOrderingResult> result =
            engine_.SetOrderingMode(mode, request->drain_retries(), deadline, cancel);
        if (result.ok()) {
          response->set_mode(ToProto(result->ordering));
          FillSwitch(*result, *response);
          response->set_parked_keys(result->parked_keys);
        }
        return result;
      });
}

grpc::ServerWriteReactor<v1::MetricsSnapshot>* ControlService::WatchMetrics(
    grpc::CallbackServerContext* context, const v1::WatchMetricsRequest* request) {
  absl::Status status = Authorize(*context, Access::kReadOnly);
  if (status.ok()) status = ValidateWatchMetricsRequest(*request);
  if (!status.ok()) return new RefusedWriter(status);
  return new MetricsWatcher(watchers_, sampler_, absl::Milliseconds(request->interval_ms()),
                            EngineThreadIds(request->thread_ids()));
}

grpc::ServerUnaryReactor* ControlService::ListInFlight(grpc::CallbackServerContext* context,
                                                       const v1::ListInFlightRequest* request,
                                                       v1::ListInFlightResponse* response) {
  auto* reactor = new CancellableReactor();
  absl::Status status = Authorize(*context, Access::kReadOnly);
  if (status.ok()) status = ValidateListInFlightRequest(*request);
  if (!status.ok()) {
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  const size_t limit = InFlightLimit(*request);
  std::shared_ptr<engine::Cancellation> cancel = reactor->cancellation();
  auto operation = [this, limit, response, cancel](absl::Time deadline) {
    // The threads answer at their next loop: a call without a deadline
    // does not wait long for one busy in a long processor call.
    const engine::InFlightList list = engine_.ListInFlight(
        limit, std::min(deadline, absl::Now() + kMaxInFlightWait), cancel.get());
    const int64_t now_ms = absl::ToUnixMillis(absl::Now());
    for (const engine::InFlightRecord& record : list.records) {
      ToProto(record, now_ms, *response->add_records());
    }
    response->set_total(list.total);
    for (int id : list.unanswered_thread_ids) {
      response->add_unanswered_thread_ids(static_cast<uint32_t>(id));
    }
    return absl::OkStatus();
  };
  RunBlocking(context, reactor, std::move(operation), std::move(cancel));
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::DeadLetterRecord(
    grpc::CallbackServerContext* context, const v1::DeadLetterRecordRequest* request,
    v1::DeadLetterRecordResponse* response) {
  auto* reactor = new CancellableReactor();
  absl::Status status = Authorize(*context, Access::kMutating);
  if (status.ok()) status = ValidateDeadLetterRecordRequest(*request);
  if (!status.ok()) {
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  engine::RecordCoordinates record{request->topic(), request->partition(), request->offset()};
  const std::string peer = CallerPeer(*context);
  std::shared_ptr<engine::Cancellation> cancel = reactor->cancellation();
  auto operation = [this, record = std::move(record), response, peer, cancel](absl::Time deadline) {
    absl::StatusOr<int> thread = engine_.DeadLetterRecord(record, deadline, cancel.get());
    LogInfo("control: DeadLetterRecord(", record.topic, "/", record.partition, "@", record.offset,
            ") from ", peer, ": ",
            thread.ok() ? absl::StrCat("thread ", *thread) : thread.status().ToString());
    if (!thread.ok()) return thread.status();
    response->set_thread_id(static_cast<uint32_t>(*thread));
    return absl::OkStatus();
  };
  RunBlocking(context, reactor, std::move(operation), std::move(cancel));
  return reactor;
}

OperationRegistry::Progress ControlService::DrainProgress() const {
  // The most records seen left is the total: the backlog only shrinks while
  // input is paused, but its first measurement comes a moment after start.
  auto total = std::make_shared<std::atomic<int64_t>>(0);
  return [this, total](v1::OperationProgress& progress) {
    const int64_t left = std::max<int64_t>(0, engine_.RetryBacklog(engine_.Threads()));
    int64_t seen = total->load();
    while (left > seen && !total->compare_exchange_weak(seen, left)) {
    }
    const int64_t all = std::max(seen, left);
    progress.set_unit("records");
    progress.set_total(all);
    progress.set_done(all - left);
    progress.set_description(absl::StrCat(left, " of ", all, " retry records left"));
  };
}

grpc::ServerUnaryReactor* ControlService::StartDrain(grpc::CallbackServerContext* context,
                                                     const v1::StartDrainRequest* request,
                                                     v1::Operation* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status status = Authorize(*context, Access::kMutating);
  if (status.ok() && request->timeout_ms() > kMaxDrainTimeoutMs) {
    status = WithReason(absl::InvalidArgumentError(absl::StrCat(
                            "timeout_ms: must be at most ", kMaxDrainTimeoutMs, " (a day), got ",
                            request->timeout_ms(), "; 0 means no limit")),
                        reason::kInvalidField);
  }
  if (status.ok() && engine_.state() == engine::EngineState::kDraining) {
    status = WithReason(
        absl::FailedPreconditionError("a switch of the ordering mode is under way already (see "
                                      "ListOperations); nothing started"),
        reason::kDrainRunning);
  }
  if (!status.ok()) {
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  const std::string peer = CallerPeer(*context);
  RunMutating(context, reactor, "StartDrain", *request, response,
              [this, request, response, peer](absl::Time) {
                const absl::Duration timeout = request->timeout_ms() == 0
                                                   ? absl::InfiniteDuration()
                                                   : absl::Milliseconds(request->timeout_ms());
                absl::StatusOr<v1::Operation> op = operations_.Run(
                    v1::OPERATION_KIND_DRAIN, request->request_id(), DrainProgress(),
                    [this, timeout, peer](engine::Cancellation& cancel, v1::Operation& result) {
                      absl::StatusOr<engine::SetOrderingResult> drained = engine_.SetInOrder(
                          /*in_order=*/true, /*drain_retries=*/true, absl::Now() + timeout,
                          &cancel);
                      LogInfo("control: StartDrain from ", peer, ": ", Describe(drained));
                      result = DrainOperation(drained);
                      return drained.status();
                    });
                if (!op.ok()) return op.status();
                LogInfo("control: StartDrain from ", peer, ": operation ", op->id(), " running");
                *response = *std::move(op);
                return absl::OkStatus();
              });
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::GetOperation(grpc::CallbackServerContext* context,
                                                       const v1::GetOperationRequest* request,
                                                       v1::Operation* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status status = Authorize(*context, Access::kReadOnly);
  if (status.ok()) {
    absl::StatusOr<v1::Operation> op = operations_.Get(request->id());
    if (op.ok()) *response = *std::move(op);
    status = op.status();
  }
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::ListOperations(grpc::CallbackServerContext* context,
                                                         const v1::ListOperationsRequest* request,
                                                         v1::ListOperationsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status status = Authorize(*context, Access::kReadOnly);
  if (status.ok()) {
    for (v1::Operation& op : operations_.List()) *response->add_operations() = std::move(op);
  }
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerWriteReactor<v1::Operation>* ControlService::WatchOperation(
    grpc::CallbackServerContext* context, const v1::WatchOperationRequest* request) {
  if (absl::Status s = Authorize(*context, Access::kReadOnly); !s.ok()) {
    return new RefusedStream<v1::Operation>(s);
  }
  return new OperationWatcher(watchers_, operations_, request->id());
}

grpc::ServerUnaryReactor* ControlService::CancelOperation(grpc::CallbackServerContext* context,
                                                          const v1::CancelOperationRequest* request,
                                                          v1::Operation* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status status = Authorize(*context, Access::kMutating);
  if (!status.ok()) {
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  const std::string caller = AuditCaller(*context);
  RunMutating(context, reactor, "CancelOperation", *request, response,
              [this, request, response, caller](absl::Time deadline) {
                // Returns once the operation has ended (a redrive has flushed
                // its producer), or with it still running at the deadline.
                absl::StatusOr<v1::Operation> op = operations_.Cancel(request->id(), deadline);
                LogInfo("control: CancelOperation(", request->id(), ") from ", caller, ": ",
                        op.ok()
                            ? absl::StrCat("cancelled; ", op->done() ? "ended" : "ending",
                                           op->has_redrive() || op->progress().has_redrive()
                                               ? absl::StrCat(", ", op->progress().description())
                                               : "")
                            : op.status().ToString());
                if (!op.ok()) return op.status();
                *response = *std::move(op);
                return absl::OkStatus();
              });
  return reactor;
}

}  // namespace retryd::control

namespace retryd::control {

grpc::ServerUnaryReactor* ControlService::ListDeadLetters(grpc::CallbackServerContext* context,
                                                          const v1::ListDeadLettersRequest* request,
                                                          v1::ListDeadLettersResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status s = Authorize(*context, Access::kReadOnly); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  RunBlocking(context, reactor, [this, request, response](absl::Time deadline) {
    absl::StatusOr<v1::ListDeadLettersResponse> page = dead_letters_.List(*request, deadline);
    if (!page.ok()) return page.status();
    *response = *std::move(page);
    return absl::OkStatus();
  });
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::StartRedrive(grpc::CallbackServerContext* context,
                                                       const v1::StartRedriveRequest* request,
                                                       v1::Operation* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status s = Authorize(*context, Access::kMutating); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  const std::string caller = AuditCaller(*context);
  RunMutating(context, reactor, "StartRedrive", *request, response,
              [this, request, response, caller](absl::Time deadline) {
                absl::StatusOr<v1::Operation> op =
                    dead_letters_.StartRedrive(*request, caller, deadline);
                if (!op.ok()) {
                  LogInfo("control: StartRedrive from ", caller, ": ", op.status().ToString());
                  return op.status();
                }
                *response = *std::move(op);
                return absl::OkStatus();
              });
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::PurgeDeadLetters(
    grpc::CallbackServerContext* context, const v1::PurgeDeadLettersRequest* request,
    v1::PurgeDeadLettersResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status s = Authorize(*context, Access::kMutating); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  const std::string caller = AuditCaller(*context);
  RunMutating(
      context, reactor, "PurgeDeadLetters", *request, response,
      [this, request, response, caller](absl::Time deadline) {
        absl::StatusOr<v1::PurgeDeadLettersResponse> purged =
            dead_letters_.Purge(*request, deadline);
        std::string counts;
        if (purged.ok()) {
          for (const v1::PartitionPurge& p : purged->partitions()) {
            absl::StrAppend(&counts, counts.empty() ? "" : ", ", p.partition(), ": ", p.from(),
                            "..", p.to(), p.deleted() ? " deleted" : "");
          }
        }
        LogInfo("control: PurgeDeadLetters(", request->all() ? "all" : "up_to",
                request->delete_records() ? ", delete_records" : "", ") of ",
                dead_letters_.options().dead_letter_topic, " from ", caller, ": ",
                purged.ok() ? absl::StrCat("purged [", counts, "]") : purged.status().ToString());
        if (!purged.ok()) return purged.status();
        *response = *std::move(purged);
        return absl::OkStatus();
      });
  return reactor;
}

}  // namespace retryd::control
