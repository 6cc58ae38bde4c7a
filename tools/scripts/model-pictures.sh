#!/usr/bin/env bash
# model-pictures.sh - regenerates every picture in docs/models/ from the built
# tools (build/bin/energyc, build/bin/energy-run), with the commands that
# docs/models.md shows, so that the document and the pictures stay in step.
#
#   tools/scripts/model-pictures.sh           regenerate every picture
#   tools/scripts/model-pictures.sh MODEL...  only the pictures of these models
#   tools/scripts/model-pictures.sh --list    print the commands, run nothing
#   tools/scripts/model-pictures.sh --check   check that docs/models.md shows
#                                             every command verbatim, and that
#                                             every picture it links is made here
#
# Run it from anywhere; it works in the repository root. Each run is a few
# seconds of in-process compilation (JIT) and well under a second of running.
# The runs are f32 on the host CPU, so another CPU may give slightly
# different last digits in the plots; the pictures are otherwise
# deterministic (--init random:SEED uses the documented generator).
set -euo pipefail
cd "$(dirname "$0")/../.."

# One command per line, exactly as docs/models.md shows it.
commands() {
  cat <<'EOF'
build/bin/energyc examples/alibi_attention.energy --emit=svg -o docs/models/alibi_attention-graph.svg
build/bin/energy-run examples/alibi_attention.energy --dim N=12 --dim D=16 --dim H=4 --init random:1 --steps 4 --plot docs/models/alibi_attention-run.svg --plot-attention attn:i=11 docs/models/alibi_attention-attention.svg
build/bin/energyc examples/capsule_routing.energy --emit=svg -o docs/models/capsule_routing-graph.svg
build/bin/energy-run examples/capsule_routing.energy --dim N=8 --dim M=6 --dim D=4 --dim Dp=4 --init random:1 --plot docs/models/capsule_routing-run.svg --plot-attention agreement: docs/models/capsule_routing-attention.svg
build/bin/energyc examples/cem_mlp.energy --emit=svg -o docs/models/cem_mlp-graph.svg
build/bin/energy-run examples/cem_mlp.energy --dim N=8 --dim D=8 --dim Dv=16 --init random:1 --steps 3 --plot docs/models/cem_mlp-run.svg
build/bin/energyc examples/cross_attention.energy --emit=svg -o docs/models/cross_attention-graph.svg
build/bin/energy-run examples/cross_attention.energy --dim NQ=6 --dim NK=8 --dim D=4 --init random:1 --plot docs/models/cross_attention-run.svg --plot-attention cross: docs/models/cross_attention-attention.svg
build/bin/energyc examples/free_energy_mixer.energy --emit=svg -o docs/models/free_energy_mixer-graph.svg
build/bin/energyc examples/gmm.energy --emit=svg -o docs/models/gmm-graph.svg
build/bin/energy-run examples/gmm.energy --dim N=300 --dim K=3 --dim D=2 --init random:3 --steps 30 --plot docs/models/gmm-run.svg
build/bin/energyc examples/hopfield.energy --emit=svg -o docs/models/hopfield-graph.svg
build/bin/energy-run examples/hopfield.energy --dim N=8 --dim K=8 --dim D=16 --init random:1 --const beta=4 --plot docs/models/hopfield-run.svg --plot-attention retrieval: docs/models/hopfield-attention.svg
build/bin/energyc examples/hopfield_attention.energy --emit=svg -o docs/models/hopfield_attention-graph.svg
build/bin/energyc examples/light_mha_2nd1st.energy --emit=svg -o docs/models/light_mha_2nd1st-graph.svg
build/bin/energy-run examples/light_mha_2nd1st.energy --dim N=8 --dim D=16 --dim H=4 --init random:1 --plot docs/models/light_mha_2nd1st-run.svg
build/bin/energyc examples/linear_attention.energy --emit=svg -o docs/models/linear_attention-graph.svg
build/bin/energy-run examples/linear_attention.energy --dim N=8 --dim D=4 --init random:1 --steps 5 --plot docs/models/linear_attention-run.svg
build/bin/energyc examples/lowrank_attention.energy --emit=svg -o docs/models/lowrank_attention-graph.svg
build/bin/energy-run examples/lowrank_attention.energy --dim N=12 --dim D=16 --dim H=2 --init random:1 --steps 4 --plot docs/models/lowrank_attention-run.svg
build/bin/energyc examples/mha_2nd1st.energy --emit=svg -o docs/models/mha_2nd1st-graph.svg
build/bin/energy-run examples/mha_2nd1st.energy --dim N=8 --dim D=16 --dim H=4 --init random:1 --plot docs/models/mha_2nd1st-run.svg
build/bin/energyc examples/momen_mha.energy --emit=svg -o docs/models/momen_mha-graph.svg
build/bin/energy-run examples/momen_mha.energy --dim N=8 --dim D=16 --dim H=4 --init random:1 --plot docs/models/momen_mha-run.svg
build/bin/energyc examples/nag_attention.energy --emit=svg -o docs/models/nag_attention-graph.svg
build/bin/energy-run examples/nag_attention.energy --dim N=8 --dim D=8 --init random:1 --plot docs/models/nag_attention-run.svg
build/bin/energyc examples/nag_mha.energy --emit=svg -o docs/models/nag_mha-graph.svg
build/bin/energy-run examples/nag_mha.energy --dim N=8 --dim D=16 --dim H=4 --init random:1 --plot docs/models/nag_mha-run.svg
build/bin/energyc examples/precond_attention.energy --emit=svg -o docs/models/precond_attention-graph.svg
build/bin/energy-run examples/precond_attention.energy --dim N=12 --dim D=16 --dim H=2 --init random:1 --steps 4 --plot docs/models/precond_attention-run.svg
build/bin/energyc examples/predictive_coding.energy --emit=svg -o docs/models/predictive_coding-graph.svg
build/bin/energy-run examples/predictive_coding.energy --dim N=8 --dim K=3 --dim D=4 --dim Z=2 --init random:1 --plot docs/models/predictive_coding-run.svg
build/bin/energyc examples/quadratic_bowl.energy --emit=svg -o docs/models/quadratic_bowl-graph.svg
build/bin/energy-run examples/quadratic_bowl.energy --dim D=3 --init random:94 --plot docs/models/quadratic_bowl-run.svg
build/bin/energyc examples/recurrent_mha.energy --emit=svg -o docs/models/recurrent_mha-graph.svg
build/bin/energy-run examples/recurrent_mha.energy --dim N=12 --dim D=16 --dim H=2 --init random:1 --plot docs/models/recurrent_mha-run.svg
build/bin/energyc examples/self_attention.energy --emit=svg -o docs/models/self_attention-graph.svg
build/bin/energy-run examples/self_attention.energy --dim N=8 --dim D=8 --init random:1 --plot docs/models/self_attention-run.svg --plot-attention attn: docs/models/self_attention-attention.svg
build/bin/energyc examples/slds.energy --emit=svg -o docs/models/slds-graph.svg
build/bin/energy-run examples/slds.energy --dim T=20 --dim K=2 --dim D=2 --init random:58 --steps 200 --plot docs/models/slds-run.svg
build/bin/energyc examples/slot_attention.energy --emit=svg -o docs/models/slot_attention-graph.svg
build/bin/energy-run examples/slot_attention.energy --dim N=16 --dim S=6 --dim D=4 --init random:1 --plot docs/models/slot_attention-run.svg --plot-attention slot: docs/models/slot_attention-attention.svg
build/bin/energyc examples/slot_attention_em.energy --emit=svg -o docs/models/slot_attention_em-graph.svg
build/bin/energy-run examples/slot_attention_em.energy --dim N=12 --dim S=4 --dim D=3 --init random:1 --plot docs/models/slot_attention_em-run.svg
build/bin/energyc examples/tied_mha.energy --emit=svg -o docs/models/tied_mha-graph.svg
build/bin/energy-run examples/tied_mha.energy --dim N=12 --dim D=16 --dim H=2 --init random:1 --steps 4 --plot docs/models/tied_mha-run.svg --plot-attention attn:k=0 docs/models/tied_mha-attention.svg
build/bin/energyc examples/transformer_block.energy --emit=svg -o docs/models/transformer_block-graph.svg
build/bin/energy-run examples/transformer_block.energy --dim N=8 --dim D=16 --dim H=2 --dim Dv=32 --init random:1 --plot docs/models/transformer_block-run.svg
EOF
}

# The model a command is about (examples/NAME.energy).
model_of() {
  local word
  for word in $1; do
    case "$word" in
      examples/*.energy) word=${word#examples/}; echo "${word%.energy}"; return ;;
    esac
  done
}

# Every picture a command writes (the words ending in .svg).
pictures_of() {
  local word
  for word in $1; do
    case "$word" in *.svg) echo "$word" ;; esac
  done
}

check() {
  local doc=docs/models.md status=0 line picture all
  all=$(commands)
  while IFS= read -r line; do
    if ! grep -qxF -- "$line" "$doc"; then
      echo "not in $doc (verbatim, on a line of its own): $line"
      status=1
    fi
  done < <(commands)
  # Every picture the document links must be one that a command writes.
  while IFS= read -r picture; do
    if ! grep -qF -- "docs/$picture" <<<"$all"; then
      echo "$doc links docs/$picture, which no command writes"
      status=1
    fi
  done < <(grep -o '(models/[A-Za-z0-9_.-]*\.svg)' "$doc" | tr -d '()')
  # And every example has a graph.
  for example in examples/*.energy; do
    if ! grep -qF -- "$example --emit=svg" <<<"$all"; then
      echo "$example has no graph command"
      status=1
    fi
  done
  [[ $status -eq 0 ]] && echo "docs/models.md shows every command; every linked picture is made here"
  return $status
}

run_one() {
  local line=$1 tool attempt
  local -a words
  read -r -a words <<<"$line"
  tool=${words[0]}
  # The tools may be replaced while a rebuild runs elsewhere: wait for them.
  for attempt in $(seq 60); do
    [[ -x "$tool" ]] && break
    sleep 1
  done
  echo "+ $line"
  "${words[@]}"
}

case "${1:-}" in
  --list) commands; exit 0 ;;
  --check) check; exit $? ;;
  -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac

for tool in build/bin/energyc build/bin/energy-run; do
  [[ -x "$tool" ]] || { echo "model-pictures.sh: $tool is missing: build the project first (make)" >&2; exit 1; }
done
mkdir -p docs/models

selected=("$@")
count=0
while IFS= read -r line; do
  if [[ ${#selected[@]} -gt 0 ]]; then
    model=$(model_of "$line")
    keep=0
    for wanted in "${selected[@]}"; do [[ "$wanted" == "$model" ]] && keep=1; done
    [[ $keep -eq 1 ]] || continue
  fi
  run_one "$line"
  count=$((count + 1))
done < <(commands)

if [[ ${#selected[@]} -gt 0 && $count -eq 0 ]]; then
  echo "model-pictures.sh: no command draws ${selected[*]} (the models are: $(ls examples/*.energy | xargs -n1 basename | sed 's/\.energy$//' | tr '\n' ' '))" >&2
  exit 1
fi
if [[ ${#selected[@]} -eq 0 ]]; then
  # Pictures in docs/models/ that no command makes are stale.
  all=$(commands)
  for picture in docs/models/*.svg; do
    grep -qF -- "$picture" <<<"$all" || echo "note: $picture is made by no command here (stale?)"
  done
fi
echo "ran $count commands; docs/models/ holds $(du -sh docs/models | cut -f1)"
