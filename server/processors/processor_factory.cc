#include "server/processors/processor_factory.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/processors/grpc_processor.h"
#include "server/processors/simulate.h"

namespace retryd {

absl::StatusOr<std::unique_ptr<engine::Processor>> MakeProcessor(
    const retryd::v1::ProcessorConfig& config) {
  switch (config.kind_case()) {
    case retryd::v1::ProcessorConfig::kSimulate:
      return std::make_unique<SimulateProcessor>(config.simulate());
    case retryd::v1::ProcessorConfig::kGrpc: {
      absl::StatusOr<std::unique_ptr<GrpcProcessor>> grpc = GrpcProcessor::Create(config.grpc());
      if (!grpc.ok()) return grpc.status();
      return std::unique_ptr<engine::Processor>(*std::move(grpc));
    }
    case retryd::v1::ProcessorConfig::KIND_NOT_SET:
      return absl::InvalidArgumentError(
          "processor: choose a processor kind, e.g. processor { simulate {} }");
  }
  return absl::UnimplementedError(absl::StrCat(
      "processor: kind ", static_cast<int>(config.kind_case()), " is not supported by this build"));
}

}  // namespace retryd
