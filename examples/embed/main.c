/*===- main.c - Embedding the runtime in a C program ----------------------===*\
|*                                                                            *|
|* Loads a compiled model through the C API (energy/energy.h), binds dims     *|
|* from the command line, and steps its dynamics, printing the energy.        *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

/* Usage: energy-embed ARTIFACT [NAME=VALUE ...] [--steps K]
 *
 * Tensors without an initialiser start random (seed 1). The program prints
 * the energy before and after each of K steps (default 10), then runs the
 * model's own step count or stopping rule and prints the final energy. */

#include "energy/energy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DIMS = 16 };

static int fail(const char *what) {
  fprintf(stderr, "energy-embed: %s: %s\n", what, energy_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s ARTIFACT [NAME=VALUE ...] [--steps K]\n",
            argv[0]);
    return 2;
  }
  char names[MAX_DIMS][64];
  const char *dimNames[MAX_DIMS];
  int64_t dimValues[MAX_DIMS];
  size_t dims = 0;
  long steps = 10;
  for (int i = 2; i < argc; ++i) {
    const char *equals = strchr(argv[i], '=');
    if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = strtol(argv[++i], NULL, 10);
    } else if (equals && dims < MAX_DIMS &&
               (size_t)(equals - argv[i]) < sizeof names[0]) {
      size_t length = (size_t)(equals - argv[i]);
      memcpy(names[dims], argv[i], length);
      names[dims][length] = '\0';
      dimNames[dims] = names[dims];
      dimValues[dims] = strtoll(equals + 1, NULL, 10);
      ++dims;
    } else {
      fprintf(stderr, "energy-embed: cannot use argument '%s'\n", argv[i]);
      return 2;
    }
  }

  energy_model *model = energy_model_load(argv[1]);
  if (!model)
    return fail("loading the model");
  energy_session *session =
      energy_session_create(model, dimNames, dimValues, dims, 1, 1);
  /* The session keeps what it needs of the model. */
  energy_model_free(model);
  if (!session)
    return fail("creating a session");

  double before, after;
  if (energy_session_energy(session, &before) != 0)
    return fail("computing the energy");
  for (long step = 0; step < steps; ++step) {
    if (energy_session_step(session) != 0 ||
        energy_session_energy(session, &after) != 0)
      return fail("stepping");
    printf("step %ld: energy %.9g -> %.9g\n", step, before, after);
    before = after;
  }

  int64_t taken;
  double final;
  if (energy_session_run(session, -1, &taken, &final) != 0)
    return fail("running");
  printf("run: %lld more steps, final energy %.9g\n", (long long)taken, final);
  energy_session_free(session);
  return 0;
}
