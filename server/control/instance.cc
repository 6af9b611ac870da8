#include "server/control/instance.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace retryd::control {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

}  // namespace

v1::Instance DescribeInstance(absl::Time started) {
  v1::Instance instance;
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) instance.set_host_name(host);
  instance.set_pod_name(Env("POD_NAME"));
  instance.set_pod_namespace(Env("POD_NAMESPACE"));
  instance.set_start_time_unix_ms(absl::ToUnixMillis(started));
  return instance;
}

std::string InstanceName(const v1::Instance& instance) {
  return instance.pod_name().empty() ? instance.host_name() : instance.pod_name();
}

}  // namespace retryd::control
