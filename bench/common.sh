# shellcheck shell=bash
# Sourced by the GPU bench scripts (breakdown_gpu.sh, compare_torch.sh, int8_gpu.sh,
# switch_ab_gpu.sh): what they share.

# usage_unless ARGC WANT: print the calling script's header comment (its lines 2 up to `set -uo`)
# as its usage and exit 2 unless it was given WANT arguments.
usage_unless() {
  [ "$1" -eq "$2" ] && return 0
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

# model_dims MODEL BATCH: the input dims, comma-separated, of a model bench/torch_models.py exports
# (Whisper encoders take [B, 80, 3000] log-mel features, the vision models [B, 3, 224, 224] images).
model_dims() {
  case "$1" in
    whisper*) echo "$2,80,3000" ;;
    *) echo "$2,3,224,224" ;;
  esac
}
