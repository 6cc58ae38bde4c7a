// A plugin built for another version of the plugin API.
#include "energy/Plugin/Plugin.h"

static llvm::Error registerNothing(energy::plugin::Registration &) {
  return llvm::Error::success();
}

extern "C" energy::plugin::PluginInfo energyGetPluginInfo() {
  return {ENERGY_PLUGIN_API_VERSION + 998, "future", "9.9", registerNothing};
}
