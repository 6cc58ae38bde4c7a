/*===- c_api_data_parallel.c - Data-parallel training through the C API ---===*\
|*                                                                            *|
|* An MPI program that trains through energy.h with an energy_communicator   *|
|* over MPI_Allgather; rank 0 writes the trained params as text, one number  *|
|* a line, for data_parallel.py to compare with energy-train alone.          *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

/* Usage: mpirun -np R c_api_data_parallel MODEL.so DATA.safetensors OUT.txt */

#include "energy/energy.h"

#include <mpi.h>
#include <stdio.h>

static int allGather(void *context, const double *values, size_t count,
                     double *gathered) {
  (void)context;
  return MPI_Allgather(values, (int)count, MPI_DOUBLE, gathered, (int)count,
                       MPI_DOUBLE, MPI_COMM_WORLD) != MPI_SUCCESS;
}

static int fail(const char *what) {
  fprintf(stderr, "c_api_data_parallel: %s: %s\n", what, energy_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  if (argc != 4) {
    fprintf(stderr, "usage: %s MODEL.so DATA.safetensors OUT.txt\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  energy_communicator group = {0, 1, allGather, NULL};
  MPI_Comm_rank(MPI_COMM_WORLD, &group.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &group.size);
  energy_model *model = energy_model_load(argv[1]);
  if (!model)
    return fail("energy_model_load");
  energy_train_options options;
  energy_train_options_init(&options);
  options.batch_size = 6;
  options.epochs = 2;
  options.seed = 3;
  options.learning_rate = 0.01;
  options.communicator = &group;
  energy_trainer *trainer =
      energy_trainer_create(model, argv[2], NULL, &options);
  if (!trainer)
    return fail("energy_trainer_create");
  for (int epoch = 0; epoch < 2; ++epoch)
    if (energy_trainer_run_epoch(trainer, NULL, NULL) != 0)
      return fail("energy_trainer_run_epoch");
  if (group.rank == 0) {
    FILE *out = fopen(argv[3], "w");
    if (!out)
      return fail("fopen");
    const char *names[] = {"Wk", "Wq"};
    for (int p = 0; p < 2; ++p) {
      double values[64];
      int64_t shape[2];
      size_t rank = 2;
      if (energy_trainer_get_param(trainer, names[p], ENERGY_F64, values, 64,
                                   shape, &rank) != 0)
        return fail("energy_trainer_get_param");
      for (int64_t i = 0; i < shape[0] * shape[1]; ++i)
        fprintf(out, "%s %.17g\n", names[p], values[i]);
    }
    fclose(out);
  }
  energy_trainer_free(trainer);
  energy_model_free(model);
  MPI_Finalize();
  return 0;
}
