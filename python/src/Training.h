//===- Training.h - The trainer as a Python class ---------------*- C++ -*-===//
//
// energy.Trainer: minibatch training of a compiled model's params
// (energy::Trainer), alone or data-parallel over a group whose all_gather
// is a Python callable (torch.distributed, mpi4py, ...).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_PYTHON_TRAINING_H
#define ENERGY_PYTHON_TRAINING_H

#include <pybind11/pybind11.h>

namespace energy::python {

/// Adds the class _energy.Trainer to `module`.
void bindTrainer(pybind11::module_ &module);

} // namespace energy::python

#endif // ENERGY_PYTHON_TRAINING_H
