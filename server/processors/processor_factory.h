// Turns a retryd.v1.ProcessorConfig into the Processor it selects.
#ifndef RETRYD_SERVER_PROCESSORS_PROCESSOR_FACTORY_H_
#define RETRYD_SERVER_PROCESSORS_PROCESSOR_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "retryd/v1/config.pb.h"
#include "server/engine/api/processor.h"

namespace retryd {

// Builds the processor `config` selects. InvalidArgumentError if no kind is
// set; the kind's own error if it cannot be built (e.g. the grpc processor's
// token file is unreadable); UnimplementedError for a kind this build does
// not know.
absl::StatusOr<std::unique_ptr<engine::Processor>> MakeProcessor(
    const retryd::v1::ProcessorConfig& config);

}  // namespace retryd

#endif  // RETRYD_SERVER_PROCESSORS_PROCESSOR_FACTORY_H_
