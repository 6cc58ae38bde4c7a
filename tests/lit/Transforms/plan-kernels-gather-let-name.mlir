// RUN: energy-opt %s --pass-pipeline='builtin.module(energy.model(energy-plan-kernels))' | FileCheck %s

// The lets that only the parent side of a contraction read are erased,
// whatever their suffix: energy-gather-gradients names the second such let
// of a gradient "@T.gather_0" (the symbol table makes the name unique).
// CHECK-LABEL: energy.model @second_gather_let
// CHECK-NOT:   let @x.gather_0
// CHECK:       gradient @x {
// CHECK:         softmax_contract bilinear rows (%{{.*}} : @N) cols (%{{.*}} : @N) score {
// CHECK:         } col_values {
energy.model @second_gather_let {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  let @x.gather_0 [%c : @N] : !energy.array<> {
    %xc = read @x[%c] : !energy.array<D>
    %l = reduce lse (%p : @N) {
      %xp = read @x[%p] : !energy.array<D>
      %s = dot %xc, %xp : !energy.array<D>
      yield %s : !energy.array<>
    } : !energy.array<>
    yield %l : !energy.array<>
  }
  gradient @x {
    foreach (%p : @N) {
      %xp = read @x[%p] : !energy.array<D>
      %h = reduce sum (%c : @N) {
        %l = read @x.gather_0[%c] : !energy.array<>
        %xc = read @x[%c] : !energy.array<D>
        %s = dot %xc, %xp : !energy.array<D>
        %shift = sub %s, %l : !energy.array<>, !energy.array<>
        %w = exp %shift : !energy.array<>
        %v = mul %w, %xc : !energy.array<>, !energy.array<D>
        yield %v : !energy.array<D>
      } : !energy.array<D>
      accumulate %h into @x[%p] : !energy.array<D>
    }
  }
}
