// Which retryd process answers the control API: host, pod and start time,
// for GetStatus, so that a client behind a Kubernetes Service can tell the
// replicas apart.
//
// Thread-safe: a pure function of the environment.
#ifndef RETRYD_SERVER_CONTROL_INSTANCE_H_
#define RETRYD_SERVER_CONTROL_INSTANCE_H_

#include <string>

#include "absl/time/time.h"
#include "retryd/v1/control.pb.h"

namespace retryd::control {

// This process as started at `started`: its host name, $POD_NAME and
// $POD_NAMESPACE (empty when unset).
v1::Instance DescribeInstance(absl::Time started);

// How logs and records name `instance` in one word: its pod name, else its
// host name (empty when neither is known).
std::string InstanceName(const v1::Instance& instance);

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_INSTANCE_H_
