// A plugin whose optimizer takes a built-in's name.
#include "energy/Plugin/Plugin.h"

static llvm::Error registerGd(energy::plugin::Registration &registration) {
  return registration.optimizers().add({"gd", "a second gd"});
}

extern "C" energy::plugin::PluginInfo energyGetPluginInfo() {
  return {ENERGY_PLUGIN_API_VERSION, "impostor", "0.1", registerGd};
}
