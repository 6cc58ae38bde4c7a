//===- ManifestTest.cpp - Reading and checking artifact manifests ---------===//
//
// Unit tests of energy::Manifest (the fields it reads, the mistakes it
// refuses and what its messages say) and of the dim expressions it holds.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Manifest.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <string>

using energy::BufferKind;
using energy::DimExpr;
using energy::DType;
using energy::Expected;
using energy::InitKind;
using energy::Manifest;
using energy::TensorRole;

/// A valid manifest, in which `replace` substitutes text (to break it).
static std::string
manifestText(const std::map<std::string, std::string> &replace = {}) {
  std::string text = R"({
  "format": "energy-artifact", "format_version": 6,
  "model": "attention", "dtype": "f32", "target": "host",
  "source_name": "a.energy", "source": "model attention { }",
  "dims": [{"name": "N", "default": null, "derived": null},
           {"name": "D", "default": 64, "derived": null},
           {"name": "H", "default": 4, "derived": null},
           {"name": "Dh", "default": null, "derived": ["D", "H", "/"]}],
  "consts": [{"name": "beta", "value": 0.25}],
  "buffers": [
    {"name": "x", "kind": "tensor", "role": "state", "shape": [["N"], ["D"]],
     "init": null, "optimizer_state": null},
    {"name": "W", "kind": "tensor", "role": "param", "shape": [["D"], ["Dh"]],
     "init": {"kind": "normal", "args": [0.0, 0.02]}, "optimizer_state": null},
    {"name": "x.momentum", "kind": "tensor", "role": "state",
     "shape": [["N"], ["D"]], "init": {"kind": "zeros", "args": []},
     "optimizer_state": "x"},
    {"name": "z", "kind": "tensor", "role": "input", "shape": [["N"], ["D"]],
     "init": {"kind": "copy", "source": "x"}, "optimizer_state": null},
    {"name": "grad.x", "kind": "gradient", "tensor": "x",
     "shape": [["N"], ["D"]]},
    {"name": "out", "kind": "output", "shape": [["N", 1, "-"], [4]]}],
  "kernels": {"energy": "k_energy", "gradients": {"x": "k_grad_x"},
              "outputs": {"out": "k_out"}, "step": "k_step", "until": null},
  "dynamics": {"steps": ["N", 2, "*"]}
})";
  for (const auto &edit : replace) {
    size_t at = text.find(edit.first);
    REQUIRE_MESSAGE(at != std::string::npos, edit.first);
    text.replace(at, edit.first.size(), edit.second);
  }
  return text;
}

/// The error message of parsing `text`.
static std::string parseError(const std::string &text) {
  Expected<Manifest> manifest = Manifest::parse(text);
  REQUIRE_FALSE(manifest.ok());
  return manifest.message();
}

TEST_CASE("a manifest's fields are read") {
  Expected<Manifest> parsed = Manifest::parse(manifestText());
  REQUIRE_MESSAGE(parsed.ok(), parsed.message());
  const Manifest &manifest = *parsed;
  CHECK(manifest.formatVersion == 6);
  CHECK(manifest.model == "attention");
  CHECK(manifest.dtype == DType::F32);
  CHECK(manifest.targetDescription == "host");
  CHECK_FALSE(manifest.target);
  CHECK(manifest.sourceName == "a.energy");
  CHECK(manifest.source == "model attention { }");

  REQUIRE(manifest.dims.size() == 4);
  CHECK(manifest.dims[0].name == "N");
  CHECK_FALSE(manifest.dims[0].defaultValue);
  CHECK(manifest.dims[1].defaultValue == 64);
  REQUIRE(manifest.dims[3].derived);
  CHECK(manifest.dims[3].derived->text() == "D / H");
  CHECK(manifest.findDim("Dh") == 3u);
  CHECK_FALSE(manifest.findDim("Q"));

  REQUIRE(manifest.consts.size() == 1);
  CHECK(manifest.consts[0].value == 0.25);

  REQUIRE(manifest.buffers.size() == 6);
  const auto &w = manifest.buffers[*manifest.findBuffer("W")];
  CHECK(w.kind == BufferKind::Tensor);
  CHECK(w.role == TensorRole::Param);
  REQUIRE(w.init);
  CHECK(w.init->kind == InitKind::Normal);
  CHECK(w.init->args == std::vector<double>{0.0, 0.02});
  CHECK(w.shapeText() == "[D, Dh]");
  const auto &momentum = manifest.buffers[2];
  CHECK(momentum.optimizerStateOf == std::optional<std::string>("x"));
  CHECK(manifest.buffers[3].init->source == "x");
  CHECK(manifest.findGradientBuffer("x") == 4u);
  CHECK(manifest.buffers[4].gradientOf == "x");
  CHECK(manifest.buffers[5].shapeText() == "[N - 1, 4]");
  CHECK(manifest.bufferNames(BufferKind::Tensor) ==
        std::vector<std::string>{"x", "W", "x.momentum", "z"});

  CHECK(manifest.kernels.energy == "k_energy");
  CHECK(manifest.kernels.gradients.at("x") == "k_grad_x");
  CHECK(manifest.kernels.outputs.at("out") == "k_out");
  CHECK(manifest.kernels.step == std::optional<std::string>("k_step"));
  CHECK_FALSE(manifest.kernels.until);
  REQUIRE(manifest.steps);
  CHECK(manifest.steps->text() == "N * 2");
}

TEST_CASE("a model without dynamics has no step kernel and no steps") {
  Expected<Manifest> manifest = Manifest::parse(manifestText(
      {{R"("step": "k_step")", R"("step": null)"},
       {R"("dynamics": {"steps": ["N", 2, "*"]})", R"("dynamics": null)"}}));
  REQUIRE_MESSAGE(manifest.ok(), manifest.message());
  CHECK_FALSE(manifest->steps);
  CHECK_FALSE(manifest->kernels.step);
}

TEST_CASE("a target names the CPU and the features the code may use") {
  const char *v3 = R"("target": {"arch": "x86_64", "cpu": "x86-64-v3",
      "features": ["sse4.2", "avx", "avx2", "fma"]})";
  Expected<Manifest> manifest =
      Manifest::parse(manifestText({{R"("target": "host")", v3}}));
  REQUIRE_MESSAGE(manifest.ok(), manifest.message());
  REQUIRE(manifest->target);
  CHECK(manifest->target->arch == "x86_64");
  CHECK(manifest->target->cpu == "x86-64-v3");
  CHECK(manifest->target->features ==
        std::vector<std::string>{"sse4.2", "avx", "avx2", "fma"});
  CHECK(manifest->targetDescription.empty());

  // Older manifests: a description only, or no target at all.
  Expected<Manifest> untargeted =
      Manifest::parse(manifestText({{R"("target": "host",)", ""}}));
  REQUIRE_MESSAGE(untargeted.ok(), untargeted.message());
  CHECK_FALSE(untargeted->target);
  CHECK(untargeted->targetDescription.empty());
}

TEST_CASE("a target with an unknown feature or of the wrong form is "
          "refused") {
  std::string unknown = parseError(manifestText(
      {{R"("target": "host")", R"("target": {"arch": "x86_64", "cpu": "native",
          "features": ["avx2", "avx9000"]})"}}));
  CHECK_MESSAGE(unknown.rfind("target: features: unknown CPU feature "
                              "\"avx9000\", which this runtime cannot check "
                              "(known: cmov, mmx, sse, sse2, ",
                              0) == 0,
                unknown);
  CHECK(parseError(manifestText(
            {{R"("target": "host")", R"("target": {"arch": "x86_64",
                "cpu": "native", "features": ["avx2", 7]})"}})) ==
        "target: features: expected strings (CPU feature names), found a "
        "number");
  CHECK(parseError(manifestText({{R"("target": "host")",
                                  R"("target": {"arch": "x86_64",
                                      "features": []})"}})) ==
        "target: missing field \"cpu\"");
  CHECK(parseError(manifestText({{R"("target": "host")",
                                  R"("target": {"arch": "x86_64",
                                      "cpu": "native"})"}})) ==
        "target: missing field \"features\"");
  CHECK(parseError(manifestText({{R"("target": "host")", R"("target": 3)"}})) ==
        "target: expected an object (or a string), found a number");
}

TEST_CASE("the format and its version are checked first") {
  CHECK(parseError(manifestText(
            {{R"("format_version": 6)", R"("format_version": 5)"}})) ==
        "artifact format version 5, this runtime reads version 6 (compile "
        "the model again with this release's energyc)");
  CHECK(parseError(manifestText({{"energy-artifact", "onnx"}})) ==
        "format is \"onnx\", not \"energy-artifact\"");
  CHECK(parseError("[1]") ==
        "the manifest: expected an object, found an array");
  CHECK(parseError("{\"format\": ") ==
        "at byte 11 (the end): expected a value");
}

TEST_CASE("missing fields and fields of the wrong type are named") {
  CHECK(parseError(manifestText({{R"("model": "attention",)", ""}})) ==
        "missing field \"model\"");
  CHECK(
      parseError(manifestText({{R"("dtype": "f32")", R"("dtype": "f16")"}})) ==
      "dtype: unknown element type \"f16\" (known: f32, f64)");
  CHECK(parseError(manifestText({{R"("default": 64)", R"("default": 6.5)"}})) ==
        "dim D: default: expected an integer, found 6.5");
  CHECK(parseError(manifestText({{R"("value": 0.25)", R"("value": "x")"}})) ==
        "const beta: value: expected a number, found a string");
  CHECK(parseError(manifestText({{R"("shape": [["N"], ["D"]],
     "init": null)",
                                  R"("shape": "N",
     "init": null)"}})) ==
        "buffer 'x': shape: expected an array, found a string");
  CHECK(parseError(
            manifestText({{R"("role": "param")", R"("role": "weight")"}})) ==
        "buffer 'W': unknown role \"weight\" (known: input, param, state)");
  CHECK(parseError(
            manifestText({{R"("args": [0.0, 0.02])", R"("args": [1])"}})) ==
        "buffer 'W': init: normal takes 2 arguments, not 1");
  CHECK(parseError(
            manifestText({{R"("kind": "normal")", R"("kind": "gauss")"}})) ==
        "buffer 'W': init: unknown initialiser \"gauss\" (known: zeros, ones, "
        "eye, normal, uniform, copy)");
  CHECK(parseError(manifestText({{R"("energy": "k_energy", )", ""}})) ==
        "kernels: missing field \"energy\"");
  CHECK(parseError(manifestText({{R"(["N", 1, "-"])", R"(["N", "-"])"}})) ==
        "buffer 'out': shape axis 0: not a well-formed expression in reverse "
        "Polish notation");
  CHECK(parseError(manifestText({{R"({"x": "k_grad_x"})", R"({"x": 3})"}})) ==
        "kernels: gradients: x: expected a string (a symbol), found a number");
}

TEST_CASE("names must be unique and refer to what exists") {
  CHECK(parseError(manifestText({{R"("name": "z")", R"("name": "W")"}})) ==
        "buffer 'W' is declared twice");
  CHECK(parseError(manifestText({{R"({"name": "H", "default": 4)",
                                  R"({"name": "D", "default": 4)"}})) ==
        "dim D is declared twice");
  CHECK(
      parseError(manifestText({{R"([["D"], ["Dh"]])", R"([["D"], ["Q"]])"}})) ==
      "buffer 'W': shape axis 1 uses dim Q, which is not declared");
  CHECK(parseError(
            manifestText({{R"(["D", "H", "/"])", R"(["D", "Z", "/"])"}})) ==
        "dim Dh is derived from dim Z, which is not declared before it");
  CHECK(parseError(manifestText({{R"("tensor": "x")", R"("tensor": "y")"}})) ==
        "buffer 'grad.x' (a gradient) refers to 'y', which is not a buffer of "
        "the manifest");
  CHECK(parseError(manifestText(
            {{R"("optimizer_state": "x")", R"("optimizer_state": "out")"}})) ==
        "buffer 'x.momentum': optimizer_state refers to 'out', which is not a "
        "tensor");
  CHECK(
      parseError(manifestText({{R"("source": "x")", R"("source": "nope")"}})) ==
      "buffer 'z': init copy refers to 'nope', which is not a buffer of the "
      "manifest");
  CHECK(parseError(manifestText({{R"("source": "x")", R"("source": "z")"}})) ==
        "buffer 'z': init copy: the copies form a cycle through 'z'");
  CHECK(parseError(
            manifestText({{R"({"x": "k_grad_x"})", R"({"W": "k_grad_w"})"}})) ==
        "kernels: gradients: 'W': there is no gradient buffer of 'W'");
  CHECK(parseError(
            manifestText({{R"({"out": "k_out"})", R"({"x": "k_out"})"}})) ==
        "kernels: outputs: 'x' is not an output buffer");
  CHECK(parseError(manifestText({{R"({"out": "k_out"})", R"({})"}})) ==
        "output 'out' has no kernel in kernels: outputs");
  CHECK(
      parseError(manifestText({{R"("step": "k_step")", R"("step": null)"}})) ==
      "dynamics are given but kernels: step is null");
  CHECK(parseError(manifestText({{R"(["N", 2, "*"])", R"(["T"])"}})) ==
        "dynamics: steps uses dim T, which is not declared");
}

/// The value of `tokens` (as the manifest writes them) with N = 7, or its
/// error.
static std::string evaluate(const std::string &tokens) {
  Expected<Manifest> manifest =
      Manifest::parse(manifestText({{R"(["N", 2, "*"])", tokens}}));
  REQUIRE_MESSAGE(manifest.ok(), manifest.message());
  Expected<int64_t> value =
      manifest->steps->evaluate([](const std::string &name) {
        return name == "N" ? std::optional<int64_t>(7) : std::nullopt;
      });
  return value ? std::to_string(*value) : value.message();
}

TEST_CASE("dim expressions evaluate in reverse Polish notation") {
  CHECK(evaluate(R"(["N", 3, "+", 2, "*"])") == "20");
  CHECK(evaluate(R"(["N", 1, "-"])") == "6");
  CHECK(evaluate(R"(["N", 7, "/"])") == "1");
  CHECK(evaluate(R"(["N", 2, "/"])") == "7 is not divisible by 2");
  CHECK(evaluate(R"(["N", 2, "floordiv"])") == "3");
  CHECK(evaluate(R"(["N", 2, "ceildiv"])") == "4");
  CHECK(evaluate(R"(["N", 3, "mod"])") == "1");
  CHECK(evaluate(R"([0, "N", "-", 2, "floordiv"])") == "-4");
  CHECK(evaluate(R"([0, "N", "-", 2, "ceildiv"])") == "-3");
  CHECK(evaluate(R"([0, "N", "-", 3, "mod"])") == "2");
  CHECK(evaluate(R"(["N", 0, "floordiv"])") == "7 floordiv 0 divides by zero");
  CHECK(evaluate(R"(["N", 4611686018427387904, "*"])") ==
        "7 * 4611686018427387904 overflows");
  CHECK(evaluate(R"(["N", "D", "+"])") == "dim D has no value");
}

TEST_CASE("dim expressions print in infix") {
  Expected<Manifest> manifest = Manifest::parse(manifestText(
      {{R"(["N", 2, "*"])", R"(["N", 1, "+", "D", 2, "mod", "*"])"}}));
  REQUIRE_MESSAGE(manifest.ok(), manifest.message());
  CHECK(manifest->steps->text() == "(N + 1) * (D mod 2)");
  CHECK(manifest->steps->dimNames() == std::vector<std::string>{"N", "D"});
  CHECK_FALSE(manifest->steps->singleDim());
  CHECK(manifest->buffers[0].shape[0].singleDim() ==
        std::optional<std::string>("N"));
}

TEST_CASE("joint gradients and a backward step's cotangents are read and "
          "checked") {
  const std::string kernels = R"("gradients": {"x": "k_grad_x"},)";
  Expected<Manifest> joint = Manifest::parse(manifestText(
      {{kernels,
        kernels + R"( "joint_gradients": [{"tensors": ["x"], "kernel": "k_j"}],
          "backward": {"seed": "k_seed", "step": "k_back", "finish": "k_fin",
                       "mode": "unrolled", "cotangents": "k_cot"},)"}}));
  REQUIRE_MESSAGE(joint.ok(), joint.message());
  REQUIRE(joint->kernels.jointGradients.size() == 1);
  CHECK(joint->kernels.jointGradients[0].tensors ==
        std::vector<std::string>{"x"});
  CHECK(joint->kernels.jointGradients[0].kernel == "k_j");
  REQUIRE(joint->kernels.backward);
  CHECK(joint->kernels.backward->cotangents == "k_cot");

  CHECK(parseError(manifestText(
            {{kernels, kernels + R"( "joint_gradients": [{"tensors": ["W"],
                                    "kernel": "k_j"}],)"}})) ==
        "kernels: joint_gradients: 'k_j': 'W' has no gradient kernel of its "
        "own");
  CHECK(parseError(manifestText(
            {{kernels, kernels + R"( "joint_gradients": ["k_j"],)"}})) ==
        "kernels: joint_gradients: expected objects {tensors, kernel}, found "
        "a string");
}
