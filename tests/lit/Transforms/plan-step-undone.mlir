// RUN: energy-opt %s --energy-test-broken-plan-step 2>&1 >/dev/null | FileCheck %s --check-prefix=ERROR
// RUN: energy-opt %s --energy-test-broken-plan-step 2>/dev/null | FileCheck %s

// A plan step that leaves a term invalid is undone: the error names the
// step and the term, at the term's location, and the model is printed as
// it was before the step.
// ERROR: plan-step-undone.mlir:[[# @LINE + 8]]:3: error: internal error in energy-test-broken-plan-step on term `e`: operand #0 does not dominate this use; please report it with this file
// CHECK-LABEL: energy.model @broken
// CHECK:      term @e {
// CHECK-NEXT:   %0 = read @x : !energy.array<>
// CHECK-NEXT:   %1 = neg %0 : !energy.array<>
// CHECK-NEXT:   yield %1 : !energy.array<>
energy.model @broken {
  energy.tensor @x : state []
  energy.term @e {
    %x = energy.read @x : !energy.array<>
    %n = energy.neg %x : !energy.array<>
    energy.yield %n : !energy.array<>
  }
}
