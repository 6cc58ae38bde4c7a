#!/bin/sh
# Prepares what a GPU machine (CUDA and PyTorch, no MLIR) needs for the
# device checks: tests/e2e/gpu_check.py's bundle (energy-exec, every example
# and zoo model compiled for CUDA in f32, f64 and bf16, the interpreter's
# references), the benchmark artifacts of bench/gpu_attention.py,
# gpu_gmm.py, gpu_training.py and gpu_zoo.py, and run.sh, which runs them
# all there and writes the results under $OUT; then packs it into
# BUNDLE.txz (14 MB, under the device tool's 64 MiB).
#
# Usage: bench/gpu_bundle.sh [BUILD_DIR] [BUNDLE]   (build, build/gpu-bundle)
# On the GPU machine: mkdir -p BUNDLE && tar xJf BUNDLE.txz -C BUNDLE &&
# sh BUNDLE/run.sh
set -e
build=${1:-build}
bundle=${2:-$build/gpu-bundle}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$bundle" "$bundle.tgz" "$bundle.txz"
/usr/bin/python3 "$here/../tests/e2e/gpu_check.py" prepare "$build" "$bundle"
energyc="$build/bin/energyc --target cuda --cpu x86-64-v3"
$energyc "$here/../examples/self_attention.energy" \
  -o "$bundle/artifacts/self_attention.bench.so"
for model in mha_step mha_grad; do
  $energyc --dtype bf16 "$here/models/$model.energy" \
    -o "$bundle/artifacts/$model.bench.so"
done
# (c): examples/gmm.energy without its `until` (as bench/gmm_em.py does).
sed -E 's/[[:space:]]+until [^;]*;/;/' "$here/../examples/gmm.energy" \
  > "$bundle/gmm_em.energy"
grep -q until "$bundle/gmm_em.energy" && { echo "gmm: until left" >&2; exit 1; }
$energyc "$bundle/gmm_em.energy" -o "$bundle/artifacts/gmm_em.bench.so"
rm "$bundle/gmm_em.energy"
# The training step on the GPU and on the host, from one source; the Energy
# Transformer and the RBM (a scalar step count kept on the GPU) for
# tests/e2e/device/step_waits.py.
$energyc "$here/models/attention_train.energy" \
  -o "$bundle/artifacts/attention_train.cuda.so"
$build/bin/energyc --cpu x86-64-v3 "$here/models/attention_train.energy" \
  -o "$bundle/artifacts/attention_train.cpu.so"
$energyc "$here/../tests/zoo/models/energy_transformer.energy" \
  -o "$bundle/artifacts/energy_transformer.waits.so"
$energyc "$here/../tests/zoo/models/rbm_free_energy.energy" \
  -o "$bundle/artifacts/rbm_free_energy.waits.so"
cp "$build/tests/e2e/energy-device-buffers" "$build/bin/fused-attention-check" \
  "$bundle/bin/"
# The zoo at its bench sizes, against its PyTorch models on the GPU.
/usr/bin/python3 "$here/gpu_zoo.py" prepare "$build" "$bundle"
# The Python package without the compiler, built there for that machine's
# Python over the shared runtime (python/runtime-only), and energy.torch's
# CUDA tests over artifacts compiled here.
mkdir -p "$bundle/energy-src/python" "$bundle/energy-src/runtime" \
  "$bundle/lib" "$bundle/include"
cp -r "$here/../python/src" "$here/../python/energy" \
  "$here/../python/runtime-only" "$here/../python/tests" \
  "$here/../python/Package.cmake" "$bundle/energy-src/python/"
cp -r "$here/../runtime/include" "$bundle/energy-src/runtime/"
cp -P "$build"/runtime/libenergy-runtime.so* "$bundle/lib/"
cp -r /usr/include/dlpack "$bundle/include/"
PYTHONPATH="$build/python" /usr/bin/python3 \
  "$here/../python/tests/test_torch_cuda.py" prepare "$build/bin/energyc" \
  "$bundle/torch-cuda"
cp "$here/gpu_attention.py" "$here/gpu_gmm.py" "$here/gpu_training.py" \
  "$here/gpu_zoo.py" "$here/training_step.py" "$here/benchlib.py" \
  "$here/../tests/e2e/device/step_waits.py" \
  "$here/../tools/python/attention_numpy.py" "$bundle/scripts/"
cat > "$bundle/run.sh" <<'RUN'
#!/bin/sh
# The device checks: the fused attention and the built-in tensor-core
# kernels against the host (fused-attention-check), benchmarks (a) and (b)
# at N = 8192 ((b) also on the two wgmma kernels), the f32 one,
# (c) at N = 10^6 and the training step (GPU, host, PyTorch on the GPU),
# the C API's device buffers and streams, the host's waits inside the
# training steps (step_waits.py), the zoo against its PyTorch
# models on the GPU (four of them again with every launch waiting),
# energy.torch on CUDA tensors (the Python package built
# there), then every example and zoo model against the
# interpreter (f32, f64, bf16, and bf16 again on the wgmma kernels) and
# every loss model's gradient (f32, f64);
# each under a time limit, results in $OUT/results.tgz (about 6 minutes on
# an H200).
cd "$(dirname "$0")"
R=$OUT/results
mkdir -p "$R"
E=bin/energy-exec
nvidia-smi --query-gpu=name,driver_version --format=csv > "$R/gpu.txt" 2>&1
timeout 120 bin/fused-attention-check 8192 5 > "$R/fused_attention.txt" 2>&1
echo "fused attention check rc=$?"; cat "$R/fused_attention.txt"
bench() {
  name=$1; limit=$2; script=$3; shift 3
  echo "[$(date +%T)] $name"
  timeout "$limit" python3 "scripts/$script" "$@" > "$R/$name.json" \
    2> "$R/$name.err"
  echo "$name rc=$?"; cat "$R/$name.json"; tail -3 "$R/$name.err"
}
A=gpu_attention.py
bench step8192 90 $A step $E artifacts/mha_step.bench.so 8192 5
bench grad2048 60 $A grad $E artifacts/mha_grad.bench.so 2048 3
bench grad8192 60 $A grad $E artifacts/mha_grad.bench.so 8192 3
(export ENERGY_CUDA_TENSOR_CORES=wgmma
 bench grad8192_wgmma 60 $A grad $E artifacts/mha_grad.bench.so 8192 3)
(export ENERGY_CUDA_TENSOR_CORES=wgmma-pipelined
 bench grad8192_wgmmap 60 $A grad $E artifacts/mha_grad.bench.so 8192 3)
bench self4096 40 $A self $E artifacts/self_attention.bench.so 4096 5
bench gmm1e6 120 gpu_gmm.py $E artifacts/gmm_em.bench.so 1000000 5
T="gpu_training.py $E artifacts/attention_train.cuda.so artifacts/attention_train.cpu.so"
bench train64 60 $T 4 64 64 4 10
bench train1024 90 $T 8 1024 64 4 5
timeout 60 bin/energy-device-buffers artifacts/self_attention.bench.so
echo "device buffers rc=$?"
waits() {
  name=$1; shift
  timeout 60 python3 scripts/step_waits.py $E "$@" --init random:1 \
    > "$R/waits_$name.json" 2>&1
  echo "host waits inside steps, $name rc=$?"; cat "$R/waits_$name.json"
}
waits energy_transformer artifacts/energy_transformer.waits.so --dim B=8 \
  --dim N=64 --dim D=128 --dim H=4 --dim Y=32 --dim M=512
waits attention_train artifacts/attention_train.cuda.so --dim B=4 \
  --dim N=64 --dim D=64
waits rbm_free_energy artifacts/rbm_free_energy.waits.so --dim B=128 \
  --dim D=784 --dim H=512
waits attention_newton artifacts/loss-attention_newton.f32.so --dim N=256 \
  --dim D=64
timeout 200 python3 scripts/gpu_zoo.py run $E . 5 > "$R/zoo.json" 2> "$R/zoo.err"
echo "zoo rc=$?"; cat "$R/zoo.err"
# The same models' inference with every launch waiting (as before the
# fences of energy-cuda-host-fences): what launching without waiting saves.
ENERGY_CUDA_SYNC=1 timeout 90 python3 scripts/gpu_zoo.py run $E . 5 \
  --models lista,energy_transformer,modern_hopfield_layer,rbm_free_energy \
  --modes inference > "$R/zoo_sync.json" 2> "$R/zoo_sync.err"
echo "zoo with waiting launches rc=$?"; cat "$R/zoo_sync.json"
echo "[$(date +%T)] the Python package on the GPU"
P=/tmp/energy-python
G=; command -v ninja > /dev/null && G="-G Ninja"
timeout 240 sh -c "cmake $G -S energy-src/python/runtime-only -B $P \
  -DPython_EXECUTABLE=$(command -v python3) \
  -Dpybind11_DIR=$(python3 -m pybind11 --cmakedir) \
  -DENERGY_RUNTIME_LIBRARY=$PWD/lib/libenergy-runtime.so \
  -DENERGY_DLPACK_INCLUDE=$PWD/include && cmake --build $P -j 16" \
  > "$R/python_build.log" 2>&1
echo "python build rc=$?"; tail -5 "$R/python_build.log"
ENERGY_TORCH_CUDA_ARTIFACTS=$PWD/torch-cuda PYTHONPATH=$P timeout 180 \
  python3 -m pytest -q -p no:cacheprovider \
  energy-src/python/tests/test_torch_cuda.py > "$R/python_cuda.log" 2>&1
echo "python cuda rc=$?"; tail -40 "$R/python_cuda.log"
ENERGY_GPU_CHECK_JOBS=6 timeout 200 python3 scripts/gpu_check.py check . \
  "$R/gpu_check.json" > "$R/gpu_check.log" 2>&1
echo "gpu_check rc=$?"; grep -v " ok " "$R/gpu_check.log" | tail -30
# The bf16 cases again on the wgmma kernels (sm_90 only; elsewhere the
# runtime says so and runs the mma ones).
ENERGY_CUDA_TENSOR_CORES=wgmma ENERGY_GPU_CHECK_DTYPES=bf16 \
  ENERGY_GPU_CHECK_JOBS=6 timeout 120 python3 scripts/gpu_check.py check . \
  "$R/gpu_check_wgmma.json" > "$R/gpu_check_wgmma.log" 2>&1
echo "gpu_check bf16 on wgmma rc=$?"
grep -v " ok " "$R/gpu_check_wgmma.log" | tail -30
# The device tool brings back at most 8 files: one archive.
(cd "$OUT" && tar czf results.tgz --remove-files results)
RUN
# xz: the artifacts' PTX repeats across files, which gzip's window misses
# (68 MB against 6).
(cd "$bundle" && tar cf - . | xz -9 -T2 > "../$(basename "$bundle").txz")
ls -la "$bundle.txz"
