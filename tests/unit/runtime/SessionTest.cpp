//===- SessionTest.cpp - Binding values and running a model ---------------===//
//
// Unit tests of energy::Session on the quadratic bowl of fake_artifact.c,
// E = 0.5 * sum (x - c)^2 with gradient descent, whose runs have closed
// forms: each step multiplies x - c by exactly (1 - lr), so the energy by
// (1 - lr)^2.
//
//===----------------------------------------------------------------------===//

#include "FakeArtifacts.h"

#include "energy/Runtime/Model.h"
#include "energy/Runtime/Random.h"
#include "energy/Runtime/Session.h"

#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

using energy::DType;
using energy::Expected;
using energy::Model;
using energy::RandomStream;
using energy::RunOptions;
using energy::RunResult;
using energy::Session;
using energy::SessionOptions;
using energy::Status;
using energy::Tensor;

/// A session of the fake artifact at `path` with `options`.
static Session sessionOf(const char *path, const SessionOptions &options = {}) {
  Expected<Model> model = Model::load(path);
  REQUIRE_MESSAGE(model.ok(), model.message());
  Expected<Session> session = model->session(options);
  REQUIRE_MESSAGE(session.ok(), session.message());
  return std::move(*session);
}

/// Binds x and c of the bowl.
static void bind(Session &session, DType dtype, const std::vector<double> &x,
                 const std::vector<double> &c) {
  Status bound = session.set("x", vectorTensor(dtype, x));
  REQUIRE_MESSAGE(bound.ok(), bound.message());
  bound = session.set("c", vectorTensor(dtype, c));
  REQUIRE_MESSAGE(bound.ok(), bound.message());
}

TEST_CASE("energy, gradient and output match the closed forms") {
  for (const char *path : {fakeF64, fakeF32}) {
    CAPTURE(path);
    DType dtype = path == fakeF64 ? DType::F64 : DType::F32;
    Session session = sessionOf(path);
    bind(session, dtype, {1, 2, 3}, {0.5, 0.5, 0.5});
    Expected<double> energy = session.energy();
    REQUIRE_MESSAGE(energy.ok(), energy.message());
    CHECK(*energy == 0.5 * (0.25 + 2.25 + 6.25));

    Expected<Tensor> gradient = session.gradient("x");
    REQUIRE_MESSAGE(gradient.ok(), gradient.message());
    CHECK(*gradient == vectorTensor(dtype, {0.5, 1.5, 2.5}));
    // Computed in place: the session's own buffer, the same values, the
    // same buffer on the next call.
    Expected<const Tensor *> computed = session.computeGradient("x");
    REQUIRE_MESSAGE(computed.ok(), computed.message());
    CHECK(**computed == vectorTensor(dtype, {0.5, 1.5, 2.5}));
    CHECK(*session.computeGradient("x") == *computed);

    Expected<Tensor> stacked = session.get("stacked");
    REQUIRE_MESSAGE(stacked.ok(), stacked.message());
    CHECK(*stacked == vectorTensor(dtype, {1, 2, 3, 0.5, 0.5, 0.5}));

    Expected<std::map<std::string, int64_t>> dims = session.dims();
    REQUIRE(dims.ok());
    CHECK(*dims ==
          std::map<std::string, int64_t>{{"N", 3}, {"K", 3}, {"M", 6}});
  }
}

TEST_CASE("a run contracts by (1 - lr) per step and stops by its rule") {
  Session session = sessionOf(fakeF64);
  bind(session, DType::F64, {1, 2, 3, 4}, {0, 0, 0, 0});
  const double initial = 15; // 0.5 * (1 + 4 + 9 + 16)
  // The first step after which the energy is below tol = 1e-6.
  int64_t expectedSteps = 1;
  while (initial * std::pow(0.25, expectedSteps) >= 1e-6)
    ++expectedSteps;
  REQUIRE(expectedSteps < 40); // Below the default count, N * 10.

  std::vector<int64_t> reported;
  RunOptions options;
  options.onStep = [&](int64_t step, double energy) {
    reported.push_back(step);
    CHECK(energy == initial * std::pow(0.25, step + 1));
  };
  Expected<RunResult> run = session.run(options);
  REQUIRE_MESSAGE(run.ok(), run.message());
  CHECK(run->steps == expectedSteps);
  REQUIRE(run->trace.size() == static_cast<size_t>(expectedSteps));
  for (int64_t k = 0; k < expectedSteps; ++k)
    CHECK(run->trace[k] == initial * std::pow(0.25, k + 1));
  CHECK(run->energy == run->trace.back());
  CHECK(reported.size() == static_cast<size_t>(expectedSteps));
  CHECK(reported.front() == 0);
  CHECK(session.stepCount() == expectedSteps);

  double scale = std::pow(0.5, expectedSteps);
  Expected<std::map<std::string, Tensor>> state = session.stateTensors();
  REQUIRE(state.ok());
  CHECK(state->size() == 2);
  CHECK(state->at("x") ==
        vectorTensor(DType::F64, {scale, 2 * scale, 3 * scale, 4 * scale}));
  CHECK(state->at("x.previous") ==
        vectorTensor(DType::F64, {2 * scale, 4 * scale, 6 * scale, 8 * scale}));
}

TEST_CASE("a run takes the steps asked for; steps continue the count") {
  Session session = sessionOf(fakeF64, {{}, {{"lr", 0.25}}, {}});
  bind(session, DType::F64, {4, 4}, {0, 0});
  Expected<RunResult> run = session.run({3, nullptr});
  REQUIRE(run.ok());
  CHECK(run->steps == 3);
  CHECK(run->energy == 16 * std::pow(0.75, 6)); // 0.5 * 2 * (4 * 0.75^3)^2

  // A zero-step run reports the current energy.
  Expected<RunResult> none = session.run({0, nullptr});
  REQUIRE(none.ok());
  CHECK(none->steps == 0);
  CHECK(none->energy == run->energy);

  REQUIRE(session.step().ok());
  CHECK(session.stepCount() == 4);
  session.setStepCount(100);
  REQUIRE(session.step().ok());
  CHECK(session.stepCount() == 101);
  Expected<Tensor> x = session.get("x");
  REQUIRE(x.ok());
  CHECK(x->at(0) == 4 * std::pow(0.75, 5));
}

TEST_CASE("dims come from options, then bound tensors, then defaults") {
  // From a tensor; K from its default.
  Session inferred = sessionOf(fakeF64, {{}, {}, 7});
  REQUIRE(inferred.set("x", vectorTensor(DType::F64, {1, 2, 3, 4, 5})).ok());
  Expected<std::map<std::string, int64_t>> dims = inferred.dims();
  REQUIRE_MESSAGE(dims.ok(), dims.message());
  CHECK(*dims == std::map<std::string, int64_t>{{"N", 5}, {"K", 3}, {"M", 10}});

  // Options override a default.
  Session given = sessionOf(fakeF64, {{{"N", 2}, {"K", 4}}, {}, 7});
  dims = given.dims();
  REQUIRE(dims.ok());
  CHECK(dims->at("K") == 4);
  Expected<Tensor> w = given.get("w");
  REQUIRE(w.ok());
  CHECK(w->shape() == std::vector<int64_t>{4});

  // Conflicts name both sources.
  Session conflict = sessionOf(fakeF64, {{{"N", 8}}, {}, {}});
  REQUIRE(conflict.set("x", vectorTensor(DType::F64, {1, 2})).ok());
  CHECK(conflict.energy().message() ==
        "dim N is 8 from --dim/options but tensor 'x' gives it 2");
  Session tensors = sessionOf(fakeF64);
  bind(tensors, DType::F64, {1, 2}, {1, 2, 3});
  CHECK(tensors.energy().message() ==
        "dim N is 2 from tensor 'x' but tensor 'c' gives it 3");
  // Binding again fixes it: a failed preparation changed nothing.
  REQUIRE(tensors.set("c", vectorTensor(DType::F64, {1, 1})).ok());
  Expected<double> energy = tensors.energy();
  REQUIRE_MESSAGE(energy.ok(), energy.message());
  CHECK(*energy == 0.5);

  Session unbound = sessionOf(fakeF64);
  CHECK(unbound.energy().message() ==
        "dim N is not bound; give it a value (--dim N=...)");
}

TEST_CASE("set checks names and shapes and binds nothing on error") {
  Session session = sessionOf(fakeF64, {{{"N", 2}}, {}, {}});
  Status unknown = session.set("y", Tensor(DType::F64, {2}));
  CHECK(unknown.message() ==
        "'y' is not a tensor of model quadratic (its tensors: x, c, w, u, e, "
        "x.previous)");
  CHECK(unknown.kind() == energy::ErrorKind::Other);
  CHECK(session.set("stacked", Tensor(DType::F64, {4})).message() ==
        "'stacked' is not a tensor of model quadratic (its tensors: x, c, w, "
        "u, e, x.previous)");
  Status rank = session.set("x", Tensor(DType::F64, {2, 1}));
  CHECK(rank.message() == "tensor 'x' is declared [N] but given [2, 1]");
  CHECK(rank.kind() == energy::ErrorKind::Shape);
  bind(session, DType::F64, {1, 1}, {0, 0});
  REQUIRE(session.energy().ok());
  // Once dims are resolved, shapes must match them.
  CHECK(session.set("x", vectorTensor(DType::F64, {1, 2, 3})).message() ==
        "tensor 'x' is declared [N] = [2] but given [3]");
  CHECK(*session.energy() == 1.0);
  REQUIRE(session.set("x", vectorTensor(DType::F64, {3, 3})).ok());
  CHECK(*session.energy() == 9.0);
  CHECK(session.get("nothing").message() ==
        "'nothing' is not a tensor or output of model quadratic (its "
        "tensors: x, c, w, u, e, x.previous; its outputs: stacked)");
  CHECK(session.gradient("c").message() ==
        "model quadratic has no gradient of 'c' (it has gradients of: x)");
  CHECK(session.computeGradient("c").message() ==
        "model quadratic has no gradient of 'c' (it has gradients of: x)");
}

TEST_CASE("a tensor of the other element type is converted, with a note") {
  Session session = sessionOf(fakeF32);
  REQUIRE(session.set("x", vectorTensor(DType::F64, {0.1, 0.2})).ok());
  REQUIRE(session.set("c", vectorTensor(DType::F32, {0, 0})).ok());
  REQUIRE(session.notes().size() == 1);
  CHECK(session.notes()[0] == "tensor 'x' was given as F64 and converted to "
                              "F32, the model's element type");
  Expected<Tensor> x = session.get("x");
  REQUIRE(x.ok());
  CHECK(x->dtype() == DType::F32);
  CHECK(x->at(0) == static_cast<double>(0.1f));
}

TEST_CASE("unbound tensors get their initialisers; copies follow their "
          "source") {
  for (std::optional<uint64_t> seed :
       {std::optional<uint64_t>(), std::optional<uint64_t>(11)}) {
    Session session = sessionOf(fakeF64, {{}, {}, seed});
    bind(session, DType::F64, {1, 2}, {0, 0});
    Expected<Tensor> w = session.get("w"), u = session.get("u"),
                     e = session.get("e"), previous = session.get("x.previous");
    REQUIRE(w.ok());
    REQUIRE(u.ok());
    REQUIRE(e.ok());
    REQUIRE(previous.ok());
    RandomStream normal = RandomStream::forTensor(seed.value_or(0), "w");
    RandomStream uniform = RandomStream::forTensor(seed.value_or(0), "u");
    for (int64_t i = 0; i < 3; ++i) {
      CHECK(w->at(i) == 0.5 + 2.0 * normal.nextNormal());
      CHECK(u->at(i) == -1.0 + 4.0 * uniform.nextUniform());
      for (int64_t j = 0; j < 3; ++j)
        CHECK(e->at(i * 3 + j) == (i == j ? 1.0 : 0.0));
    }
    CHECK(*previous == vectorTensor(DType::F64, {1, 2}));
  }

  // x without a value: random with a seed (scaled by 1 / sqrt(N)), an
  // error without.
  Session seeded = sessionOf(fakeF64, {{{"N", 4}}, {}, 3});
  Expected<Tensor> x = seeded.get("x");
  REQUIRE_MESSAGE(x.ok(), x.message());
  RandomStream stream = RandomStream::forTensor(3, "x");
  for (int64_t i = 0; i < 4; ++i)
    CHECK(x->at(i) == 0.5 * stream.nextNormal());
  CHECK(*seeded.get("x.previous") == *x);

  Session unseeded = sessionOf(fakeF64, {{{"N", 4}}, {}, {}});
  CHECK(unseeded.energy().message() ==
        "tensor 'x' has no value: bind it or give an initialiser/--init "
        "random:SEED");
}

TEST_CASE("non-finite values and kernel failures stop a run with a message") {
  Session session = sessionOf(fakeFaulty);
  bind(session, DType::F64, {1, 2}, {0, 0});
  std::vector<int64_t> reported;
  Expected<RunResult> run = session.run(
      {10, [&](int64_t step, double) { reported.push_back(step); }});
  CHECK(run.message() == "step 2 produced a non-finite value in tensor 'x'");
  CHECK(reported == std::vector<int64_t>{0, 1});
  CHECK(session.get("stacked").message() ==
        "kernel fake_stacked: an adaptive step did not converge within its "
        "maximum number of rounds");
  CHECK(session.gradient("x").message() ==
        "kernel fake_grad_x: out of memory for its scratch space");
}

TEST_CASE("buffers beyond the memory are an error naming the one that "
          "does not fit") {
  // x, c, x.previous and grad.x are [N], stacked [2N]; w, u [K], e [K, K].
  const std::string machine =
      energy::byteCountText(energy::machineMemoryBytes());
  Session huge = sessionOf(fakeF64, {{{"N", 1'000'000'000'000}}, {}, 1});
  CHECK(huge.energy().message() ==
        "tensor 'x' [N]: cannot allocate 8000000000000 bytes (8.0 TB) for F64 "
        "[1000000000000]: more than the memory this machine has, " +
            machine);
  // Nothing was allocated, and the session still answers.
  CHECK(huge.dims().message() == huge.energy().message());

  Session overflowing = sessionOf(fakeF64, {{{"N", 1ll << 61}}, {}, 1});
  CHECK(overflowing.energy().message() ==
        "tensor 'x' [N]: cannot allocate F64 [2305843009213693952]: its size "
        "in bytes overflows 64 bits");

  // 8000 bytes each for x and c, 24 for w and u, 72 for e: 16120 before
  // x.previous.
  SessionOptions limited{{{"N", 1000}}, {}, 1};
  limited.memoryLimit = 20000;
  Session small = sessionOf(fakeF64, limited);
  CHECK(small.energy().message() ==
        "tensor 'x.previous' [N]: cannot allocate 8000 bytes (8.0 kB) for F64 "
        "[1000]: with the 16120 bytes (16.1 kB) of the buffers before it, "
        "more than the session's memory limit, 20000 bytes (20.0 kB)");
  limited.memoryLimit = 7000;
  CHECK(sessionOf(fakeF64, limited).energy().message() ==
        "tensor 'x' [N]: cannot allocate 8000 bytes (8.0 kB) for F64 [1000]: "
        "more than the session's memory limit, 7000 bytes (7.0 kB)");
  // All eight buffers: 4 * 8000 + 16000 + 2 * 24 + 72 = 48120 bytes.
  limited.memoryLimit = 48120;
  Expected<double> fits = sessionOf(fakeF64, limited).energy();
  CHECK_MESSAGE(fits.ok(), fits.message());
}

TEST_CASE("a session keeps its model's code loaded") {
  std::optional<Session> session;
  {
    Expected<Model> model = Model::load(fakeF64);
    REQUIRE(model.ok());
    Expected<Session> created = model->session({{{"N", 2}}, {}, 5});
    REQUIRE(created.ok());
    session = std::move(*created);
  }
  Expected<RunResult> run = session->run({2, nullptr});
  REQUIRE_MESSAGE(run.ok(), run.message());
  CHECK(run->steps == 2);
}

TEST_CASE("borrowed inputs are used in place; borrowed states are copied") {
  Session session = sessionOf(fakeF64);
  std::vector<double> c = {0.5, 0.5, 0.5}, x = {1, 2, 3};
  auto lender = std::make_shared<int>(0);
  std::weak_ptr<int> watched = lender;
  REQUIRE(session
              .set("c",
                   Tensor::borrow(DType::F64, {3}, c.data(), std::move(lender)))
              .ok());
  REQUIRE(session
              .set("x", Tensor::borrow(DType::F64, {3}, x.data(),
                                       std::make_shared<int>(0)))
              .ok());
  CHECK(*session.energy() == 0.5 * (0.25 + 2.25 + 6.25));
  // The session reads c's memory as it is at each call, and holds its
  // lender; x was copied when bound.
  c = {1, 1, 1};
  x = {0, 0, 0};
  CHECK(*session.energy() == 0.5 * (0 + 1 + 4));
  CHECK(!watched.expired());
  // A copy owns its elements.
  Tensor copied = *session.get("c");
  CHECK(!copied.borrowed());
  c[0] = 7;
  CHECK(copied.at(0) == 1);
  // Rebinding c lets the lender go.
  REQUIRE(session.set("c", vectorTensor(DType::F64, {0, 0, 0})).ok());
  CHECK(watched.expired());
}
