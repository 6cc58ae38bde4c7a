//===- SupportLog.h - Where the support code's messages go ------*- C++ -*-===//
//
// Notes and traces of the kernel support library, passed to the handler the
// runtime sets (energy_support_set_log_handler); it prints nothing itself.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_KERNELSUPPORT_SUPPORTLOG_H
#define ENERGY_LIB_KERNELSUPPORT_SUPPORTLOG_H

#include "energy/Runtime/ArtifactABI.h"

namespace energy::support {
/// Passes `message` (ENERGY_LOG_NOTE or ENERGY_LOG_TRACE) to the handler.
void report(int32_t level, const char *message);
} // namespace energy::support

#endif // ENERGY_LIB_KERNELSUPPORT_SUPPORTLOG_H
