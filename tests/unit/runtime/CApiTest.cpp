//===- CApiTest.cpp - The runtime's C API ---------------------------------===//
//
// Unit tests of energy.h on the quadratic bowl of fake_artifact.c: the same
// closed forms as through C++, arrays in and out in both element types,
// and errors as return codes with a message.
//
//===----------------------------------------------------------------------===//

#include "FakeArtifacts.h"

#include "energy/energy.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

TEST_CASE("a model runs through the C API") {
  energy_model *model = energy_model_load(fakeF64);
  REQUIRE_MESSAGE(model, energy_last_error());
  CHECK(energy_model_dtype(model) == ENERGY_F64);
  CHECK(std::string(energy_model_device(model)) == "cpu");
  CHECK(energy_model_set_threads(model, 2) == 0);

  const char *names[] = {"N"};
  const int64_t values[] = {3};
  energy_session *session =
      energy_session_create(model, names, values, 1, 0, 0);
  REQUIRE_MESSAGE(session, energy_last_error());
  energy_model_free(model); // The session keeps what it needs.

  const float x[] = {2, 4, 6};
  const double c[] = {0, 0, 0};
  const int64_t shape[] = {3};
  REQUIRE(energy_session_set(session, "x", ENERGY_F32, shape, 1, x) == 0);
  REQUIRE(energy_session_set(session, "c", ENERGY_F64, shape, 1, c) == 0);

  double energy = 0;
  REQUIRE(energy_session_energy(session, &energy) == 0);
  CHECK(energy == 28); // 0.5 * (4 + 16 + 36)

  double gradient[3];
  int64_t gradientShape[1];
  size_t rank = 1;
  REQUIRE(energy_session_gradient(session, "x", ENERGY_F64, gradient, 3,
                                  gradientShape, &rank) == 0);
  CHECK(rank == 1);
  CHECK(gradientShape[0] == 3);
  CHECK(gradient[2] == 6);

  REQUIRE(energy_session_step(session) == 0);
  int64_t taken = 0;
  double final = 0;
  REQUIRE(energy_session_run(session, 2, &taken, &final) == 0);
  CHECK(taken == 2);
  CHECK(final == 28 * std::pow(0.25, 3));

  // Query the shape, then read as f32.
  int64_t stackedShape[1] = {0};
  rank = 1;
  REQUIRE(energy_session_get(session, "stacked", ENERGY_F32, nullptr, 0,
                             stackedShape, &rank) == 0);
  CHECK(stackedShape[0] == 6);
  float stacked[6];
  REQUIRE(energy_session_get(session, "stacked", ENERGY_F32, stacked, 6,
                             nullptr, nullptr) == 0);
  CHECK(stacked[0] == 0.25f);
  CHECK(stacked[5] == 0.0f);

  // The rest of the default run (N * 10 steps at most) reaches the rule.
  REQUIRE(energy_session_run(session, -1, &taken, &final) == 0);
  CHECK(final < 1e-6);
  CHECK(taken < 30);
  energy_session_free(session);
}

TEST_CASE("C API errors return non-zero with a message") {
  CHECK(energy_model_load("/nonexistent.so") == nullptr);
  CHECK(std::string(energy_last_error()) ==
        "/nonexistent.so: cannot open: No such file or directory");
  CHECK(energy_model_load(fakeOtherVersion) == nullptr);
  CHECK(std::string(energy_last_error()).find("artifact format version 5") !=
        std::string::npos);

  energy_model *model = energy_model_load(fakeF32);
  REQUIRE(model);
  CHECK(energy_model_set_threads(model, 2) != 0);
  CHECK(std::string(energy_last_error()) ==
        std::string(fakeF32) + " was built without threads");
  const char *names[] = {"Q"};
  const int64_t values[] = {3};
  CHECK(energy_session_create(model, names, values, 1, 0, 0) == nullptr);
  CHECK(std::string(energy_last_error()) ==
        "model quadratic has no dim Q (its dims: N, K, M)");

  energy_session *session =
      energy_session_create(model, nullptr, nullptr, 0, 9, 1);
  REQUIRE(session);
  double energy = 0;
  CHECK(energy_session_energy(session, &energy) != 0);
  CHECK(std::string(energy_last_error()) ==
        "dim N is not bound; give it a value (--dim N=...)");

  const double x[] = {1, 2};
  const int64_t shape[] = {2};
  CHECK(energy_session_set(session, "x", static_cast<energy_dtype>(7), shape, 1,
                           x) != 0);
  CHECK(std::string(energy_last_error()) ==
        "energy_session_set: unknown dtype 7 (ENERGY_F32 or ENERGY_F64)");
  REQUIRE(energy_session_set(session, "x", ENERGY_F64, shape, 1, x) == 0);

  float small[1];
  int64_t outShape[1];
  size_t rank = 1;
  CHECK(energy_session_get(session, "x", ENERGY_F32, small, 1, outShape,
                           &rank) != 0);
  CHECK(std::string(energy_last_error()) ==
        "energy_session_get: the value has 2 elements (shape [2]) but "
        "capacity_elements is 1");
  CHECK(rank == 1);
  CHECK(outShape[0] == 2);
  rank = 0;
  CHECK(energy_session_get(session, "x", ENERGY_F32, small, 1, outShape,
                           &rank) != 0);
  CHECK(rank == 1);
  CHECK(energy_session_step(nullptr) != 0);
  CHECK(std::string(energy_last_error()) ==
        "energy_session_step: session is NULL");

  // The device buffers and streams of CUDA sessions, on a CPU session.
  void *data = &rank;
  size_t bytes = 7;
  CHECK(energy_session_device_buffer(session, "x", &data, &bytes) != 0);
  CHECK(std::string(energy_last_error()) ==
        "energy_session_device_buffer: deviceBuffer('x'): model quadratic "
        "runs on the CPU; its tensors are host arrays (get)");
  CHECK(energy_session_device_gradient(session, "x", &data, &bytes) != 0);
  CHECK(std::string(energy_last_error()) ==
        "energy_session_device_gradient: deviceGradient('x'): model "
        "quadratic runs on the CPU; its gradients are host arrays (gradient)");
  CHECK((data == &rank && bytes == 7));
  CHECK(energy_session_device_buffer(session, "x", nullptr, &bytes) != 0);
  CHECK(std::string(energy_last_error()) ==
        "energy_session_device_buffer: session, name, data or bytes is NULL");
  CHECK(energy_session_set_stream(session, nullptr) != 0);
  CHECK(std::string(energy_last_error()) ==
        "energy_session_set_stream: setStream: model quadratic runs on the "
        "CPU, not on a CUDA stream");
  const int64_t xShape[] = {2};
  float onDevice[2] = {1, 2};
  CHECK(energy_session_set_device(session, "x", ENERGY_F32, xShape, 1,
                                  onDevice) != 0);
  CHECK(std::string(energy_last_error()) ==
        "energy_session_set_device: setFromDevice('x'): model quadratic "
        "runs on the CPU; it takes host arrays (set)");
  CHECK(energy_session_set_device(session, "x", ENERGY_F32, xShape, 1,
                                  nullptr) != 0);
  CHECK(std::string(energy_last_error()) ==
        "energy_session_set_device: data is NULL");
  energy_session_free(session);
  energy_model_free(model);
}

TEST_CASE("notes of the runtime and its artifacts go to the application's "
          "handler, and nowhere without one") {
  using Received = std::vector<std::pair<energy_log_level, std::string>>;
  Received received;
  // The handler points at `received`: removed however the test ends.
  struct RemoveHandler {
    ~RemoveHandler() { energy_set_log_handler(nullptr, nullptr); }
  } removeHandler;
  energy_set_log_handler(
      [](energy_log_level level, const char *message, void *data) {
        static_cast<Received *>(data)->push_back({level, message});
      },
      &received);
  energy_model *model = energy_model_load(fakeFaulty);
  REQUIRE_MESSAGE(model, energy_last_error());
  const char *names[] = {"N"};
  const int64_t values[] = {2};
  energy_session *session =
      energy_session_create(model, names, values, 1, 0, 0);
  REQUIRE_MESSAGE(session, energy_last_error());
  const double zeros[] = {0, 0};
  const int64_t shape[] = {2};
  REQUIRE(energy_session_set(session, "x", ENERGY_F64, shape, 1, zeros) == 0);
  REQUIRE(energy_session_set(session, "c", ENERGY_F64, shape, 1, zeros) == 0);
  double gradient[2];
  int64_t gradientShape[1];
  size_t rank = 1;
  CHECK(energy_session_gradient(session, "x", ENERGY_F64, gradient, 2,
                                gradientShape, &rank) != 0);
  CHECK(received ==
        Received{{ENERGY_LOG_TRACE, "fake_grad_x: called"},
                 {ENERGY_LOG_NOTE, "fake_grad_x: no scratch space"}});

  energy_set_log_handler(nullptr, nullptr);
  CHECK(energy_session_gradient(session, "x", ENERGY_F64, gradient, 2,
                                gradientShape, &rank) != 0);
  CHECK(received.size() == 2);
  energy_session_free(session);
  energy_model_free(model);
}
