#include "server/common/secret_properties.h"

#include <algorithm>

namespace retryd {

bool IsSecretProperty(absl::string_view name) {
  return std::find(kSecretProperties.begin(), kSecretProperties.end(), name) !=
         kSecretProperties.end();
}

}  // namespace retryd
