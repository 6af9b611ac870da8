#include "server/http/console/console_assets.h"

namespace retryd {

const ConsoleAsset* FindConsoleAsset(std::string_view name) {
  for (int i = 0; i < console_assets::kAssetCount; ++i) {
    if (console_assets::kAssets[i].name == name) return &console_assets::kAssets[i];
  }
  return nullptr;
}

}  // namespace retryd
