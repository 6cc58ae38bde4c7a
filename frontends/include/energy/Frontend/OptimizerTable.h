//===- OptimizerTable.h - The optimizers, as the checker names them -*- C++
//-*-===//
//
// The checker consults the plugin API's optimizer table (the one table every
// layer reads: energy/Plugin/OptimizerTable.h).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_OPTIMIZERTABLE_H
#define ENERGY_FRONTEND_OPTIMIZERTABLE_H

#include "energy/Plugin/OptimizerTable.h"

namespace energy {
namespace frontend {

using plugin::OptimizerCategory;
using plugin::OptimizerTable;
using plugin::OptionValueKind;

/// The table the tools use: the built-in optimizers and the plugins'.
inline const OptimizerTable &getDefaultOptimizerTable() {
  return plugin::getOptimizerTable();
}

} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_OPTIMIZERTABLE_H
