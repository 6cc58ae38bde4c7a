/*===- c_api.c - Training through the C API
--------------------------------===*\
|*                                                                            *|
|* energy_session_backward's gradient against central finite differences of   *|
|* the loss it reports, and a trainer from a safetensors file: two epochs     *|
|* lower the loss, a checkpoint saves and loads, errors have messages; a      *|
|* plugin's optimiser (Lion) is unknown until its run-time library is         *|
|* loaded, and then trains too.                                               *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

/* Usage: c_api ARTIFACT(attention_train, f64) WORK_DIR PLUGIN_LIBRARY */

#include "energy/energy.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, N = 3, D = 2, EXAMPLES = 8 };

static int fail(const char *what) {
  fprintf(stderr, "c_api: %s: %s\n", what, energy_last_error());
  return 1;
}

/* A deterministic value in [-0.5, 0.5). */
static double value(unsigned index, unsigned salt) {
  unsigned h = (index + 1) * 2654435761u ^ (salt * 40503u);
  return (double)(h % 1000) / 1000.0 - 0.5;
}

static double lossAt(energy_session *session, const double *wq) {
  const int64_t shape[] = {D, D};
  double loss = 0;
  if (energy_session_set(session, "Wq", ENERGY_F64, shape, 2, wq) ||
      energy_session_reset_states(session) ||
      energy_session_backward(session, -1, 0, &loss, NULL))
    return NAN;
  return loss;
}

/* Writes h, y : [EXAMPLES, N, D] (f64) as a safetensors file. */
static int writeData(const char *path) {
  FILE *file = fopen(path, "wb");
  if (!file)
    return 1;
  size_t bytes = EXAMPLES * N * D * sizeof(double);
  char header[256];
  int length =
      snprintf(header, sizeof header,
               "{\"h\":{\"dtype\":\"F64\",\"shape\":[%d,%d,%d],\"data_"
               "offsets\":[0,%zu]},"
               "\"y\":{\"dtype\":\"F64\",\"shape\":[%d,%d,%d],\"data_offsets\":"
               "[%zu,%zu]}}",
               EXAMPLES, N, D, bytes, EXAMPLES, N, D, bytes, 2 * bytes);
  while (length % 8)
    header[length++] = ' ';
  uint64_t size = (uint64_t)length;
  fwrite(&size, 8, 1, file);
  fwrite(header, 1, (size_t)length, file);
  for (unsigned tensor = 0; tensor < 2; ++tensor)
    for (unsigned i = 0; i < EXAMPLES * N * D; ++i) {
      double v = value(i, 7 + tensor);
      fwrite(&v, sizeof v, 1, file);
    }
  return fclose(file) != 0;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s ARTIFACT WORK_DIR PLUGIN_LIBRARY\n", argv[0]);
    return 2;
  }
  energy_model *model = energy_model_load(argv[1]);
  if (!model)
    return fail("load");
  const char *names[] = {"B", "N", "D"};
  const int64_t values[] = {B, N, D};
  energy_session *session =
      energy_session_create(model, names, values, 3, 0, 0);
  if (!session)
    return fail("session");
  double h[B * N * D], y[B * N * D], wq[D * D], wk[D * D];
  for (unsigned i = 0; i < B * N * D; ++i) {
    h[i] = value(i, 1);
    y[i] = value(i, 2);
  }
  for (unsigned i = 0; i < D * D; ++i) {
    wq[i] = value(i, 3);
    wk[i] = value(i, 4);
  }
  const int64_t dataShape[] = {B, N, D}, paramShape[] = {D, D};
  if (energy_session_set(session, "h", ENERGY_F64, dataShape, 3, h) ||
      energy_session_set(session, "y", ENERGY_F64, dataShape, 3, y) ||
      energy_session_set(session, "Wk", ENERGY_F64, paramShape, 2, wk))
    return fail("set");

  /* The gradient against central differences of the loss (step 1e-5 in
   * double: errors near 1e-10, far below a wrong term). */
  if (isnan(lossAt(session, wq)))
    return fail("backward");
  double adjoint[D * D];
  int64_t shape[2];
  size_t rank = 2;
  if (energy_session_adjoint(session, "Wq", ENERGY_F64, adjoint, D * D, shape,
                             &rank))
    return fail("adjoint");
  double worst = 0;
  for (unsigned i = 0; i < D * D; ++i) {
    double moved[D * D];
    memcpy(moved, wq, sizeof moved);
    moved[i] = wq[i] + 1e-5;
    double up = lossAt(session, moved);
    moved[i] = wq[i] - 1e-5;
    double down = lossAt(session, moved);
    double difference = (up - down) / 2e-5;
    worst = fmax(worst,
                 fabs(difference - adjoint[i]) / fmax(1.0, fabs(adjoint[i])));
  }
  printf("d loss / d Wq through the C API vs central differences: %.2e\n",
         worst);
  if (!(worst < 1e-6))
    return fprintf(stderr, "c_api: the gradient differs\n"), 1;
  if (energy_session_adjoint(session, "nope", ENERGY_F64, adjoint, D * D, NULL,
                             NULL) == 0 ||
      !strstr(energy_last_error(), "has no adjoint of 'nope'"))
    return fprintf(stderr, "c_api: expected an error for an unknown adjoint\n"),
           1;
  energy_session_free(session);

  char data[1024], checkpoint[1024];
  snprintf(data, sizeof data, "%s/c_api_data.safetensors", argv[2]);
  snprintf(checkpoint, sizeof checkpoint, "%s/c_api_checkpoint.safetensors",
           argv[2]);
  if (writeData(data))
    return fprintf(stderr, "c_api: cannot write %s\n", data), 1;
  energy_train_options options;
  energy_train_options_init(&options);
  options.batch_size = 4;
  options.epochs = 3;
  options.learning_rate = 0.05;
  options.seed = 3;
  energy_trainer *trainer = energy_trainer_create(model, data, NULL, &options);
  if (!trainer)
    return fail("trainer");
  double first = 0, last = 0, validation = 0;
  for (int epoch = 0; epoch < 3; ++epoch)
    if (energy_trainer_run_epoch(trainer, epoch ? &last : &first, &validation))
      return fail("epoch");
  printf("train loss %.6f after the first epoch, %.6f after the third\n", first,
         last);
  if (!(last < first) || !isnan(validation))
    return fprintf(stderr, "c_api: training did not lower the loss\n"), 1;
  if (energy_trainer_run_epoch(trainer, NULL, NULL) == 0)
    return fprintf(stderr, "c_api: a fourth epoch ran\n"), 1;
  if (energy_trainer_save_checkpoint(trainer, checkpoint) ||
      energy_trainer_load_checkpoint(trainer, checkpoint))
    return fail("checkpoint");
  double trained[D * D];
  if (energy_trainer_get_param(trainer, "Wq", ENERGY_F64, trained, D * D, NULL,
                               NULL))
    return fail("param");
  energy_trainer_free(trainer);

  char missing[1024];
  snprintf(missing, sizeof missing, "%s/no-such-plugin.so", argv[2]);
  options.optimizer = "lion";
  options.learning_rate = 0.01;
  if (energy_trainer_create(model, data, NULL, &options) ||
      !strstr(energy_last_error(), "unknown param optimiser 'lion'"))
    return fprintf(stderr, "c_api: lion is known before its plugin\n"), 1;
  if (energy_plugin_load(NULL) == 0 || energy_plugin_load(missing) == 0 ||
      !strstr(energy_last_error(), missing))
    return fprintf(stderr, "c_api: expected an error naming %s\n", missing), 1;
  if (energy_plugin_load(argv[3]))
    return fail("plugin");
  trainer = energy_trainer_create(model, data, NULL, &options);
  if (!trainer)
    return fail("trainer with lion");
  for (int epoch = 0; epoch < 3; ++epoch)
    if (energy_trainer_run_epoch(trainer, epoch ? &last : &first, NULL))
      return fail("epoch with lion");
  printf("lion: train loss %.6f after the first epoch, %.6f after the third\n",
         first, last);
  if (!(last < first))
    return fprintf(stderr, "c_api: lion did not lower the loss\n"), 1;
  energy_trainer_free(trainer);
  energy_model_free(model);
  printf("the C API trains\n");
  return 0;
}
