// The web console's files (server/http/console/assets/), compiled into the
// binary by embed_assets.cmake.
//
// Thread-safe: constant data.
#ifndef RETRYD_SERVER_HTTP_CONSOLE_CONSOLE_ASSETS_H_
#define RETRYD_SERVER_HTTP_CONSOLE_CONSOLE_ASSETS_H_

#include <string_view>

namespace retryd {

struct ConsoleAsset {
  std::string_view name;  // "index.html": a file name of assets/.
  std::string_view content_type;
  std::string_view body;
};

// The file named `name`, or nullptr.
const ConsoleAsset* FindConsoleAsset(std::string_view name);

namespace console_assets {
// The table, ended by an empty entry (written by embed_assets.cmake).
extern const ConsoleAsset kAssets[];
extern const int kAssetCount;
}  // namespace console_assets

}  // namespace retryd

#endif  // RETRYD_SERVER_HTTP_CONSOLE_CONSOLE_ASSETS_H_
