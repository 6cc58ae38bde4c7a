// RUN: energy-opt %s --split-input-file --energy-plan-index-maps | FileCheck %s

// Σ_k v[k] c(i, k) R[g, k] − Σ_k v[k] s(i, k) S[g, k], v per pair of the
// sum over j, is Rᵀ (v ⊙ C) − Sᵀ (v ⊙ S'), C and S' tables over k that do
// not vary with j: the sum over j sums linear maps of v.
// CHECK-LABEL: energy.model @rotation_back
// CHECK:       reduce sum (%[[J:.*]] : @N) {
// CHECK:         %[[V:.*]] = mul %{{.*}}, %{{.*}} : !energy.array<>, !energy.array<Y>
// CHECK:         %[[R:.*]] = read @R[%{{.*}}] : !energy.array<Y, D>
// CHECK:         %[[RT:.*]] = transpose %[[R]] : !energy.array<Y, D>
// CHECK:         %[[C:.*]] = tabulate (%{{.*}} : @Y) {
// CHECK:           cos
// CHECK:         } : !energy.array<Y>
// CHECK:         %[[VC:.*]] = mul %[[V]], %[[C]] : !energy.array<Y>, !energy.array<Y>
// CHECK:         %[[M1:.*]] = matmul %[[RT]], %[[VC]] : !energy.array<D, Y>, !energy.array<Y>
// CHECK:         %[[Q:.*]] = read @S[%{{.*}}] : !energy.array<Y, D>
// CHECK:         %[[QT:.*]] = transpose %[[Q]]
// CHECK:         %[[S:.*]] = tabulate (%{{.*}} : @Y) {
// CHECK:           sin
// CHECK:         } : !energy.array<Y>
// CHECK:         %[[VS:.*]] = mul %[[V]], %[[S]]
// CHECK:         %[[M2:.*]] = matmul %[[QT]], %[[VS]]
// CHECK:         %[[D:.*]] = sub %[[M1]], %[[M2]] : !energy.array<D>, !energy.array<D>
// CHECK-NOT:     reduce sum (%{{.*}} : @Y)
// CHECK:         yield %[[D]] : !energy.array<D>
energy.model @rotation_back {
  energy.dim @N
  energy.dim @Y
  energy.dim @D
  energy.tensor @k : input [@N, @Y]
  energy.tensor @w : input [@N, @N]
  energy.tensor @R : param [@N, @Y, @D]
  energy.tensor @S : param [@N, @Y, @D]
  energy.tensor @x : state [@N, @D]
  energy.gradient @x {
    energy.foreach (%i : @N) {
      %s = energy.reduce sum (%j : @N) {
        %w = energy.read @w[%i, %j] : !energy.array<>
        %kj = energy.read @k[%j] : !energy.array<Y>
        %v = energy.mul %w, %kj : !energy.array<>, !energy.array<Y>
        %m = energy.reduce sum (%c : @Y) {
          %e = energy.extract %v[%c] : !energy.array<Y> -> !energy.array<>
          %a = energy.to_real %c : !energy.array<>
          %co = energy.cos %a : !energy.array<>
          %si = energy.sin %a : !energy.array<>
          %r = energy.read @R[%i, %c] : !energy.array<D>
          %q = energy.read @S[%i, %c] : !energy.array<D>
          %ec = energy.mul %e, %co : !energy.array<>, !energy.array<>
          %t1 = energy.mul %ec, %r : !energy.array<>, !energy.array<D>
          %ne = energy.neg %e : !energy.array<>
          %es = energy.mul %ne, %si : !energy.array<>, !energy.array<>
          %t2 = energy.mul %es, %q : !energy.array<>, !energy.array<D>
          %t = energy.add %t1, %t2 : !energy.array<D>, !energy.array<D>
          energy.yield %t : !energy.array<D>
        } : !energy.array<D>
        energy.yield %m : !energy.array<D>
      } : !energy.array<D>
      energy.accumulate %s into @x[%i] : !energy.array<D>
    }
  }
}

// -----

// Sums that stay: one whose rows vary with the pair (the map is not the
// same at every j), one that reads v twice per term (not linear in v), and
// one whose map varies with the only loop around that v varies with (i).
// CHECK-LABEL: energy.model @not_maps
// CHECK-NOT:   matmul
// CHECK-COUNT-3: reduce sum (%{{.*}} : @Y)
// CHECK-NOT:   matmul
energy.model @not_maps {
  energy.dim @N
  energy.dim @Y
  energy.dim @D
  energy.tensor @k : input [@N, @Y]
  energy.tensor @R : param [@N, @Y, @D]
  energy.tensor @x : state [@N, @D]
  energy.gradient @x {
    energy.foreach (%i : @N) {
      %s = energy.reduce sum (%j : @N) {
        %v = energy.read @k[%j] : !energy.array<Y>
        %m = energy.reduce sum (%c : @Y) {
          %e = energy.extract %v[%c] : !energy.array<Y> -> !energy.array<>
          %r = energy.read @R[%j, %c] : !energy.array<D>
          %t = energy.mul %e, %r : !energy.array<>, !energy.array<D>
          energy.yield %t : !energy.array<D>
        } : !energy.array<D>
        %n = energy.reduce sum (%c : @Y) {
          %e = energy.extract %v[%c] : !energy.array<Y> -> !energy.array<>
          %e2 = energy.mul %e, %e : !energy.array<>, !energy.array<>
          %r = energy.read @R[%i, %c] : !energy.array<D>
          %t = energy.mul %e2, %r : !energy.array<>, !energy.array<D>
          energy.yield %t : !energy.array<D>
        } : !energy.array<D>
        %mn = energy.add %m, %n : !energy.array<D>, !energy.array<D>
        energy.yield %mn : !energy.array<D>
      } : !energy.array<D>
      %u = energy.read @k[%i] : !energy.array<Y>
      %o = energy.reduce sum (%c : @Y) {
        %e = energy.extract %u[%c] : !energy.array<Y> -> !energy.array<>
        %r = energy.read @R[%i, %c] : !energy.array<D>
        %t = energy.mul %e, %r : !energy.array<>, !energy.array<D>
        energy.yield %t : !energy.array<D>
      } : !energy.array<D>
      %so = energy.add %s, %o : !energy.array<D>, !energy.array<D>
      energy.accumulate %so into @x[%i] : !energy.array<D>
    }
  }
}

// -----

// A loop over k that adds v[k] c(i, k) x_i into the slots W[g, k], v per
// pair of the loop over j around it, adds the outer product (v ⊙ C) ⊗ x_i
// into W[g]: the loop over j then adds one value per pair into a slot it
// ignores (energy-plan-loop-sums sums it).
// CHECK-LABEL: energy.model @slot_rows
// CHECK:       foreach (%{{.*}} : @N) {
// CHECK:         %[[V:.*]] = mul %{{.*}}, %{{.*}} : !energy.array<>, !energy.array<Y>
// CHECK:         %[[C:.*]] = tabulate (%{{.*}} : @Y) {
// CHECK:           cos
// CHECK:         } : !energy.array<Y>
// CHECK:         %[[VC:.*]] = mul %[[V]], %[[C]] : !energy.array<Y>, !energy.array<Y>
// CHECK:         %[[X:.*]] = read @x[%{{.*}}] : !energy.array<D>
// CHECK:         %[[O:.*]] = outer %[[VC]], %[[X]] : !energy.array<Y>, !energy.array<D>
// CHECK:         %[[N:.*]] = neg %[[O]]
// CHECK:         accumulate %[[N]] into @W[%{{.*}}] : !energy.array<Y, D>
// CHECK-NOT:     foreach
energy.model @slot_rows {
  energy.dim @N
  energy.dim @H
  energy.dim @Y
  energy.dim @D
  energy.tensor @k : input [@N, @Y]
  energy.tensor @w : input [@N, @N]
  energy.tensor @x : input [@N, @D]
  energy.tensor @W : param [@H, @Y, @D]
  energy.gradient @W {
    energy.foreach (%g : @H, %i : @N) {
      energy.foreach (%j : @N) {
        %w = energy.read @w[%i, %j] : !energy.array<>
        %kj = energy.read @k[%j] : !energy.array<Y>
        %v = energy.mul %w, %kj : !energy.array<>, !energy.array<Y>
        energy.foreach (%c : @Y) {
          %e = energy.extract %v[%c] : !energy.array<Y> -> !energy.array<>
          %a = energy.to_real %c : !energy.array<>
          %co = energy.cos %a : !energy.array<>
          %xi = energy.read @x[%i] : !energy.array<D>
          %ne = energy.neg %e : !energy.array<>
          %ec = energy.mul %ne, %co : !energy.array<>, !energy.array<>
          %t = energy.mul %xi, %ec : !energy.array<D>, !energy.array<>
          energy.accumulate %t into @W[%g, %c] : !energy.array<D>
        }
      }
    }
  }
}

// -----

// Loops that stay: one adding into slots whose last index is not the
// loop's (W[k, g]: not a row of outer products), and one whose row varies
// with k (R[k]: not one row for every element).
// CHECK-LABEL: energy.model @not_slot_rows
// CHECK-NOT:   outer
// CHECK-COUNT-2: foreach (%{{.*}} : @Y)
// CHECK-NOT:   outer
energy.model @not_slot_rows {
  energy.dim @N
  energy.dim @H
  energy.dim @Y
  energy.dim @D
  energy.tensor @k : input [@N, @Y]
  energy.tensor @x : input [@N, @D]
  energy.tensor @R : input [@Y, @D]
  energy.tensor @W : param [@Y, @H, @D]
  energy.tensor @V : param [@H, @Y, @D]
  energy.gradient @W {
    energy.foreach (%g : @H, %i : @N) {
      energy.foreach (%j : @N) {
        %v = energy.read @k[%j] : !energy.array<Y>
        energy.foreach (%c : @Y) {
          %e = energy.extract %v[%c] : !energy.array<Y> -> !energy.array<>
          %xi = energy.read @x[%i] : !energy.array<D>
          %t = energy.mul %xi, %e : !energy.array<D>, !energy.array<>
          energy.accumulate %t into @W[%c, %g] : !energy.array<D>
        }
      }
    }
  }
  energy.gradient @V {
    energy.foreach (%g : @H, %i : @N) {
      energy.foreach (%j : @N) {
        %v = energy.read @k[%j] : !energy.array<Y>
        energy.foreach (%c : @Y) {
          %e = energy.extract %v[%c] : !energy.array<Y> -> !energy.array<>
          %r = energy.read @R[%c] : !energy.array<D>
          %t = energy.mul %r, %e : !energy.array<D>, !energy.array<>
          energy.accumulate %t into @V[%g, %c] : !energy.array<D>
        }
      }
    }
  }
}
