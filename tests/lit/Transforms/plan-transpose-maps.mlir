// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-transpose-maps))' | FileCheck %s

// A Hessian-vector product's term through an attention over normalised
// slots: per pair (j, i), the weight times a row k_j goes through Wᵀ and
// the layer norm's backward at slot i (here its centring and the division
// by the slot's spread) and meets the slot's cotangent c_i. The maps and
// c_i do not vary with j, and w k_j varies with every index they do: the
// product is ⟨w k_j, W Jᵢᵀ c_i⟩, the maps' transposes applied to c_i by
// their reverse-mode rules, which does not vary with j.
// CHECK-LABEL: energy.model @slots
// CHECK:       reduce sum (%[[J:.*]] : @N) {
// CHECK:         %[[K:.*]] = read @k[%[[J]]]
// CHECK:         reduce sum (%[[I:.*]] : @S) {
// CHECK:           %[[W:.*]] = read @w[%[[J]], %[[I]]]
// CHECK:           %[[U:.*]] = mul %[[W]], %[[K]]
// CHECK-NOT:       matmul %{{.*}}, %[[U]]
// CHECK:           %[[C:.*]] = read @c[%[[I]]]
// CHECK:           %[[T:.*]] = matmul %{{.*}}, %{{.*}} : !energy.array<Y, D>, !energy.array<D>
// CHECK:           %[[P:.*]] = dot %[[U]], %[[T]]
// CHECK:           yield %[[P]]
energy.model @slots {
  dim @N
  dim @S
  dim @D
  dim @Y
  tensor @k : input [@N, @Y]
  tensor @w : input [@N, @S]
  tensor @m : input [@S, @D]
  tensor @c : input [@S, @D]
  tensor @W : param [@Y, @D]
  term @t auxiliary {
    %W = read @W : !energy.array<Y, D>
    %Wt = transpose %W : !energy.array<Y, D>
    %s = reduce sum (%j : @N) {
      %k = read @k[%j] : !energy.array<Y>
      %inner = reduce sum (%i : @S) {
        %w = read @w[%j, %i] : !energy.array<>
        %u = mul %w, %k : !energy.array<>, !energy.array<Y>
        %a = matmul %Wt, %u : !energy.array<D, Y>, !energy.array<Y>
        %m = read @m[%i] : !energy.array<D>
        %spread = reduce_elements sqnorm %m : !energy.array<D>
        %total = sum_last %a : !energy.array<D>
        %centred = sub %a, %total : !energy.array<D>, !energy.array<>
        %b = div %centred, %spread : !energy.array<D>, !energy.array<>
        %c = read @c[%i] : !energy.array<D>
        %p = dot %b, %c : !energy.array<D>
        yield %p : !energy.array<>
      } : !energy.array<>
      yield %inner : !energy.array<>
    } : !energy.array<>
    yield %s : !energy.array<>
  }
}

// -----

// A bilinear score ⟨W k_j, q_i⟩ stays: k_j does not vary with i, so W k_j
// is computed once per row ahead of the pairs, and ⟨k_j, Wᵀ q_i⟩ would only
// widen the product per pair.
// CHECK-LABEL: energy.model @bilinear
// CHECK:       reduce sum (%{{.*}} : @S) {
// CHECK:         %[[A:.*]] = matmul %{{.*}}, %{{.*}} : !energy.array<Y, D>, !energy.array<D>
// CHECK:         %[[Q:.*]] = read @q
// CHECK:         dot %[[A]], %[[Q]]
energy.model @bilinear {
  dim @N
  dim @S
  dim @D
  dim @Y
  tensor @k : input [@N, @D]
  tensor @q : input [@S, @Y]
  tensor @W : param [@Y, @D]
  term @t auxiliary {
    %W = read @W : !energy.array<Y, D>
    %s = reduce sum (%j : @N) {
      %inner = reduce sum (%i : @S) {
        %k = read @k[%j] : !energy.array<D>
        %a = matmul %W, %k : !energy.array<Y, D>, !energy.array<D>
        %q = read @q[%i] : !energy.array<Y>
        %p = dot %a, %q : !energy.array<Y>
        yield %p : !energy.array<>
      } : !energy.array<>
      yield %inner : !energy.array<>
    } : !energy.array<>
    yield %s : !energy.array<>
  }
}
